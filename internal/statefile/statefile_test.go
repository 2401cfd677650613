package statefile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeFileAndLeavesNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "state.json")
	for i := range 3 {
		if err := Write(path, map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	var got map[string]int
	if err := Read(path, &got); err != nil || got["n"] != 2 {
		t.Fatalf("Read = %v, %v; want n=2", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("folder holds %d files, want only state.json (no temporaries)", len(entries))
	}
	if err := os.WriteFile(path, []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Read(path, &got); err == nil {
		t.Fatal("a torn file read without error")
	}
}
