package abcases

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strings"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/internal/specfile"
)

//go:embed cases.yaml
var casesYAML []byte

// Case is one sequence from a factory disk.
type Case struct {
	Name    string `json:"name"`
	Factory string `json:"factory"`
	Steps   []Step `json:"steps"`
}

// Op is one step's action.
type Op string

const (
	OpBoot     Op = "boot"
	OpStage    Op = "stage"
	OpStageCut Op = "stage-cut"
	OpActivate Op = "activate"
	OpCommit   Op = "commit"
	OpRollback Op = "rollback"
	OpReset    Op = "reset"
	OpClean    Op = "clean"
)

// Step is one action and what it must lead to.
type Step struct {
	Op    Op     `json:"op"`
	Image string `json:"image,omitempty"`
	Root  string `json:"root,omitempty"`
	Tries int    `json:"tries,omitempty"`
	// What a boot must have booted.
	Source string `json:"source,omitempty"`
	Slot   string `json:"slot,omitempty"`
	Trial  bool   `json:"trial,omitempty"`
	// Roots, when given, is every slot's summary after the step.
	Roots map[string]string `json:"roots,omitempty"`
}

// Cases are the table.
func Cases() ([]Case, error) {
	var cs []Case
	if err := specfile.Decode("sim/abcases/cases.yaml", casesYAML, &cs); err != nil {
		return nil, err
	}
	for _, c := range cs {
		for i, s := range c.Steps {
			switch s.Op {
			case OpBoot, OpStage, OpStageCut, OpActivate, OpCommit, OpRollback, OpReset, OpClean:
			default:
				return nil, fmt.Errorf("sim/abcases/cases.yaml: case %q step %d: op %q is not one of boot, stage, stage-cut, activate, commit, rollback, reset, clean", c.Name, i+1, s.Op)
			}
		}
	}
	return cs, nil
}

// Booted is what one boot ran.
type Booted struct {
	Source string // "disk" or "recovery"
	Slot   string
	Trial  bool
	Image  string
}

// Machine is a host with an A/B disk that the runner drives.
type Machine interface {
	// Boot restarts the machine gracefully, or powers it on when it is
	// off, and says what booted.
	Boot(ctx context.Context) (Booted, error)
	// Stage writes image into the slot the disk stages into; with cut,
	// the power is cut while the write is under way (the machine is then
	// off) and the slot that was being written is answered.
	Stage(ctx context.Context, image string, cut bool) (string, error)
	Activate(ctx context.Context, root string, tries int) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// Reset reboots into the recovery partition, once, and says what
	// booted.
	Reset(ctx context.Context) (Booted, error)
	// Clean erases the disk from an OS that did not boot from it.
	Clean(ctx context.Context) error
	// Images is the disk's images, as the running OS reports them.
	Images(ctx context.Context) (agentv1.Images, error)
}

// Summary is each slot's summary as cases.yaml writes it.
func Summary(im agentv1.Images) map[string]string {
	out := map[string]string{}
	for _, r := range im.Roots {
		s := string(r.State)
		if r.State == agentv1.RootWritten && r.Committed {
			s = "committed"
		}
		if r.TriesLeft > 0 {
			s += fmt.Sprintf(" tries=%d", r.TriesLeft)
		}
		out[string(r.ID)] = s
	}
	return out
}

// Trace is what a run saw, step by step, to compare two machines.
type Trace []string

// Run plays c on m. It fails at the first step whose outcome is not the
// table's, naming the case, step and both outcomes; the trace records
// every outcome.
func Run(ctx context.Context, c Case, m Machine) (Trace, error) {
	var trace Trace
	for i, s := range c.Steps {
		at := fmt.Sprintf("case %q, step %d (%s)", c.Name, i+1, s.Op)
		var got string
		var err error
		switch s.Op {
		case OpBoot, OpReset:
			boot := m.Boot
			if s.Op == OpReset {
				boot = m.Reset
			}
			var b Booted
			if b, err = boot(ctx); err == nil {
				got = fmt.Sprintf("booted source=%s slot=%s trial=%v image=%s", b.Source, b.Slot, b.Trial, b.Image)
				want := fmt.Sprintf("booted source=%s slot=%s trial=%v image=%s", s.Source, s.Slot, s.Trial, s.Image)
				if got != want {
					return trace, fmt.Errorf("%s: %s, want %s", at, got, want)
				}
			}
		case OpStage, OpStageCut:
			var root string
			if root, err = m.Stage(ctx, s.Image, s.Op == OpStageCut); err == nil {
				got = "staged into " + root
				if root != s.Root {
					return trace, fmt.Errorf("%s: %s, want %s", at, got, s.Root)
				}
			}
		case OpActivate:
			err = m.Activate(ctx, s.Root, s.Tries)
		case OpCommit:
			err = m.Commit(ctx)
		case OpRollback:
			err = m.Rollback(ctx)
		case OpClean:
			err = m.Clean(ctx)
		}
		if err != nil {
			return trace, fmt.Errorf("%s: %w", at, err)
		}
		if s.Roots != nil {
			im, err := m.Images(ctx)
			if err != nil {
				return trace, fmt.Errorf("%s: images: %w", at, err)
			}
			sum := Summary(im)
			if fmt.Sprint(sum) != fmt.Sprint(s.Roots) {
				return trace, fmt.Errorf("%s: roots %s, want %s", at, format(sum), format(s.Roots))
			}
			got += " roots " + format(sum)
		}
		trace = append(trace, fmt.Sprintf("%d %s: %s", i+1, s.Op, got))
	}
	return trace, nil
}

func format(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + m[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
