package abcases

import (
	"context"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/internal/specfile"
)

func TestModel(t *testing.T) {
	cs, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < 8 {
		t.Fatalf("%d cases", len(cs))
	}
	for _, c := range cs {
		t.Run(c.Name, func(t *testing.T) {
			if _, err := Run(context.Background(), c, NewModel(c.Factory)); err != nil {
				t.Error(err)
			}
		})
	}
}

// neverFallsBack is a bootloader without boot counting: an activated slot
// boots for ever, committed or not.
type neverFallsBack struct {
	*Model
	activated string
}

func (n *neverFallsBack) Activate(ctx context.Context, root string, tries int) error {
	n.activated = root
	return n.Model.Activate(ctx, root, 9)
}

// The runner catches a machine that gets a rule wrong, not just one that
// errs.
func TestRunCatchesAMachineWithoutBootCounting(t *testing.T) {
	cs, _ := Cases()
	for _, c := range cs {
		if !strings.Contains(c.Name, "never passes its health check") {
			continue
		}
		_, err := Run(context.Background(), c, &neverFallsBack{Model: NewModel(c.Factory)})
		// Its tries show after the trial boot (step 4), before the boot
		// that should have fallen back (step 5) would.
		if err == nil || !strings.Contains(err.Error(), "step 4 (boot): roots {A: committed, B: written tries=8}") {
			t.Fatalf("a machine that never falls back passed the case, or failed elsewhere: %v", err)
		}
		return
	}
	t.Fatal("no health-check case in the table")
}

func TestCasesRefuseAnUnknownOp(t *testing.T) {
	var cs []Case
	err := specfile.Decode("cases.yaml", []byte("- name: x\n  steps:\n  - {op: boot, slto: A}\n"), &cs)
	if err == nil || !strings.Contains(err.Error(), "slto") {
		t.Fatalf("unknown field accepted: %v", err)
	}
}
