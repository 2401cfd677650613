package ironic

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// Without Ironic's programs Start says what to run and which packages it
// installs, and names the missing program.
func TestStartSaysHowToInstallIronic(t *testing.T) {
	present, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	saved := binaries
	t.Cleanup(func() { binaries = saved })
	binaries = []string{present, "/nonexistent/ironic-inspector"}
	_, err = Start(context.Background(), Options{Dir: t.TempDir()})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start without ironic-inspector: %v; want ErrNotInstalled", err)
	}
	for _, want := range []string{"scripts/install-deps.sh metal3", "ironic-inspector", "/nonexistent/ironic-inspector"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q in it", err, want)
		}
	}
}
