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
	for target, filter := range map[string]string{
		"e2e-vm":     "--label-filter='baremetal && plain && qemu && (single-node-in-place || three-node-scale-in || cold-spare-rolling || reset-reprovisioning) && (single-node-in-place && ab)'",
		"e2e-kind":   "--label-filter='baremetal && plain && !qemu && !ostree && (single-node-in-place || three-node-scale-in || cold-spare-rolling || reset-reprovisioning) && (single-node-in-place && ab)'",
		"e2e-faults": "--label-filter='scenario && (single-node-in-place && ab)'",
	} {
		t.Run(target, func(t *testing.T) {
			out, err := exec.Command("make", "-n", "--no-print-directory", "-C", "../..", target, "GINKGO_LABELS=single-node-in-place && ab").CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", target, err, out)
			}
			// The Ginkgo command line itself, as the sub-make of e2e-vm
			// prints it too.
			if !strings.Contains(string(out), filter) {
				t.Errorf("make -n %s runs no ginkgo with %s:\n%s", target, filter, out)
			}
		})
	}
}
