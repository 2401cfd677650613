package metal3src

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

// Without a component's release archive, with an archive of something
// else, or with a checkout variable naming no checkout of it, the build
// stops with what to set and where the source comes from.
func TestBuildSaysWhereTheSourceComesFrom(t *testing.T) {
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Component{BMO, CAPM3, IPAM} {
		t.Run(c.Name, func(t *testing.T) {
			t.Setenv("UPGRADELAB_CACHE", t.TempDir())
			t.Setenv(c.SourceVar, "")
			sources := t.TempDir()
			t.Setenv("METAL3_SOURCES", sources)
			module := "github.com/metal3-io/" + c.Repo
			expectError(t, "no archive", root, c, "METAL3_SOURCES="+sources, module, "tag "+c.Version, "not found", c.SourceVar)

			writeArchive(t, filepath.Join(sources, c.Repo+"-"+c.Version+".tar.gz"), c.Repo+"-"+c.Version+"/go.mod", "module example.com/other\n")
			expectError(t, "an archive of another module", root, c, "METAL3_SOURCES", "module 'example.com/other'", "is not "+c.Repo, "want "+module)

			t.Setenv(c.SourceVar, filepath.Join(sources, "missing"))
			expectError(t, "a checkout that is not there", root, c, c.SourceVar+"="+filepath.Join(sources, "missing"), "is not a folder")

			other := t.TempDir()
			if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv(c.SourceVar, other)
			expectError(t, "a checkout of another module", root, c, c.SourceVar+"="+other, "module 'example.com/other'", "is not "+c.Repo)
			if got := c.Source(); !strings.Contains(got, other) || !strings.Contains(got, c.SourceVar) {
				t.Errorf("Source() with %s set = %q; want the checkout and the variable", c.SourceVar, got)
			}
		})
	}
}

// expectError builds c and wants an error holding every one of wants.
func expectError(t *testing.T, what, root string, c Component, wants ...string) {
	t.Helper()
	_, err := Build(context.Background(), root, c)
	for _, want := range wants {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q in it", what, err, want)
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

// A run asks where a component was built and builds nothing: before a
// build it is told so.
func TestBuiltBuildsNothing(t *testing.T) {
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPGRADELAB_CACHE", t.TempDir())
	t.Setenv(CAPM3.SourceVar, "")
	_, err = Built(context.Background(), root, CAPM3)
	if err == nil || !strings.Contains(err.Error(), "is not built yet") || !strings.Contains(err.Error(), CAPM3.Version) {
		t.Fatalf("Built before any build: %v; want it to say CAPM3 %s is not built yet", err, CAPM3.Version)
	}
}
