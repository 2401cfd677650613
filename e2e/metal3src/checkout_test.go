//go:build metal3

package metal3src

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/reference"
)

// A checkout named by CAPM3_SOURCE is what gets built, not the release
// archive: an unpacked copy of the release with one more file in its
// main package builds into a manager that runs that file. A second
// build of the same sources links nothing; one after a change runs it.
func TestACheckoutInTheSourceVariableIsBuilt(t *testing.T) {
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sources := os.Getenv("METAL3_SOURCES")
	if sources == "" {
		sources = filepath.Join(root, "..", "shared", "third_party")
	}
	checkout := t.TempDir()
	archive := filepath.Join(sources, CAPM3.Repo+"-"+CAPM3.Version+".tar.gz")
	if out, err := exec.Command("tar", "xzf", archive, "-C", checkout, "--strip-components=1").CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s (METAL3_SOURCES): %v\n%s", archive, err, out)
	}
	t.Setenv(CAPM3.SourceVar, checkout)
	t.Setenv("UPGRADELAB_CACHE", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	marker := writeMarker(t, checkout)
	dir, err := Build(ctx, root, CAPM3)
	if err != nil {
		t.Fatal(err)
	}
	if where, err := Built(ctx, root, CAPM3); err != nil || where != dir {
		t.Fatalf("Built after the build: %q, %v; want %q, where a run finds it", where, err, dir)
	}
	expectMarker(t, dir, checkout, marker)
	for _, f := range []string{"config/crd/kustomization.yaml", "config/rbac/role.yaml", "config/webhook/manifests.yaml", "config/default/kustomization.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the build kept no %s: %v", f, err)
		}
	}

	// The same sources again: nothing is linked (a run builds before it
	// starts, and pays for no link of what it has).
	linked := modTime(t, filepath.Join(dir, "manager"))
	if _, err := Build(ctx, root, CAPM3); err != nil {
		t.Fatal(err)
	}
	if again := modTime(t, filepath.Join(dir, "manager")); !again.Equal(linked) {
		t.Errorf("an unchanged checkout was linked again (manager written at %v, then %v)", linked, again)
	}

	// A change in the checkout: it is linked again and runs the change.
	marker = writeMarker(t, checkout)
	if _, err := Build(ctx, root, CAPM3); err != nil {
		t.Fatal(err)
	}
	expectMarker(t, dir, checkout, marker)
}

// writeMarker puts a file in the checkout's main package that makes the
// manager print a new marker when asked, and returns the marker.
func writeMarker(t *testing.T, checkout string) string {
	t.Helper()
	marker := "checkout-" + time.Now().Format("150405.000000000")
	code := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n\tif len(os.Args) == 2 && os.Args[1] == \"--print-marker\" {\n\t\tfmt.Println(\"" + marker + "\")\n\t\tos.Exit(0)\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(checkout, "zz_marker.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return marker
}

// expectMarker fails unless the manager in dir prints marker.
func expectMarker(t *testing.T, dir, checkout, marker string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(dir, "manager"), "--print-marker").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != marker {
		t.Fatalf("the manager built from %s=%s printed %.200q (%v); want %q: it was not built from the checkout as it is", CAPM3.SourceVar, checkout, got, err, marker)
	}
}

func modTime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}
