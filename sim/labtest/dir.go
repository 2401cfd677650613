package labtest

import (
	"os"
	"strings"
	"testing"
)

// Dir is tb's folder. With KEEP_DIR set it is a new folder under
// KEEP_DIR that outlives the test, so a failure's manager logs, lab
// events, disks and timeline can be read afterwards; otherwise it is
// removed with the test.
func Dir(tb testing.TB) string {
	tb.Helper()
	return NamedDir(tb, tb.Name())
}

// NamedDir is Dir with the kept folder named after name instead of tb (one
// benchmark running several scenarios at once).
func NamedDir(tb testing.TB, name string) string {
	tb.Helper()
	keep := os.Getenv("KEEP_DIR")
	if keep == "" {
		return tb.TempDir()
	}
	dir, err := os.MkdirTemp(keep, strings.ReplaceAll(name, "/", "_")+"-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("kept in %s", dir)
	return dir
}
