package labtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeptUnderKEEP_DIR(t *testing.T) {
	keep := t.TempDir()
	t.Setenv("KEEP_DIR", keep)
	var dir string
	t.Run("sub/test", func(t *testing.T) { dir = Dir(t) })
	if filepath.Dir(dir) != keep || !strings.HasPrefix(filepath.Base(dir), "TestKeptUnderKEEP_DIR_sub_test-") {
		t.Fatalf("folder %s, want one named after the test under %s", dir, keep)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the folder did not outlive its test: %v", err)
	}
}

func TestRemovedWithoutKEEP_DIR(t *testing.T) {
	t.Setenv("KEEP_DIR", "")
	var dir string
	t.Run("inner", func(t *testing.T) { dir = Dir(t) })
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("folder %s still there after its test (%v)", dir, err)
	}
}
