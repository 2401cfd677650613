package bmo

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/reference"
)

// Without BMO's release archive, or with an archive of something else,
// the build stops with what to set and where the source comes from.
func TestBuildSaysWhereTheSourceComesFrom(t *testing.T) {
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPGRADELAB_CACHE", t.TempDir())
	sources := t.TempDir()
	t.Setenv("METAL3_SOURCES", sources)
	_, err = Build(context.Background(), root)
	for _, want := range []string{"METAL3_SOURCES=" + sources, "github.com/metal3-io/baremetal-operator", "tag " + Version, "not found"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no archive: %v; want %q in it", err, want)
		}
	}
	writeArchive(t, filepath.Join(sources, "baremetal-operator-"+Version+".tar.gz"), "baremetal-operator-"+Version+"/go.mod", "module example.com/other\n")
	_, err = Build(context.Background(), root)
	for _, want := range []string{"METAL3_SOURCES", "module 'example.com/other'", "not baremetal-operator " + Version} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an archive of another module: %v; want %q in it", err, want)
		}
	}
}

// writeArchive writes a gzipped tar holding one file.
func writeArchive(t *testing.T, path, name, content string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}
