package plan

import (
	"os/exec"
	"strings"
	"testing"
)

// The Makefile's wrappers narrow the suite to their scenarios and keep
// the user's own selection: `make e2e-vm GINKGO_LABELS=X` runs only the
// VM runs that X also selects.
func TestMakeWrappersKeepTheUsersLabels(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed")
	}
	for _, target := range []string{"e2e-vm", "e2e-kind"} {
		t.Run(target, func(t *testing.T) {
			out, err := exec.Command("make", "-n", "--no-print-directory", "-C", "../..", target, "GINKGO_LABELS=single-node-in-place && ab").CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", target, err, out)
			}
			if !strings.Contains(string(out), "&& (single-node-in-place && ab)") {
				t.Errorf("make -n %s dropped the user's labels:\n%s", target, out)
			}
		})
	}
}
