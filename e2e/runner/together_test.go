package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// A batch is refused before any plane starts when a run injects faults
// (they may act on the plane or a manager, so on every run of the batch)
// or needs a time scale of its own (runner.JoinsBatch), or its provider
// drives the lab (a batch shares no hosts); every run is reported
// stopped, with the reason.
func TestABatchRefusesRunsThatCannotShareItsPlane(t *testing.T) {
	root, plain, def := repoScenario(t, "three-node-scale-in")
	_, faulty, faultyLab := repoScenario(t, "faults/capi-restart-mid-rollout")
	inMemory, baremetal := repoProvider(t, root, "inmemory"), repoProvider(t, root, "baremetal")
	slow := *plain
	slow.MinTimeScale = 0.1
	for _, tc := range []struct {
		name  string
		specs []Spec
		o     Options
		want  string
	}{
		{"a run with faults", []Spec{{Scenario: plain, Lab: def, Form: scenario.Plain, Name: "ok"}, {Scenario: faulty, Lab: faultyLab, Form: scenario.Plain, Name: "faulty"}},
			Options{Provider: inMemory}, "run faulty injects faults"},
		{"a run that needs its own time scale", []Spec{{Scenario: &slow, Lab: def, Form: scenario.Plain, Name: "slow"}, {Scenario: plain, Lab: def, Form: scenario.Plain, Name: "ok"}},
			Options{Provider: inMemory}, "run slow needs time scale 0.1"},
		{"a provider on the lab", []Spec{{Scenario: plain, Lab: def, Form: scenario.Plain, Name: "ok"}},
			Options{Provider: baremetal}, "drives the lab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.RepoRoot, tc.o.Dir, tc.o.Scale = root, labtest.Dir(t), timescale.Scale(0.01)
			for i := range tc.specs { // where a run would write, were it not refused
				tc.specs[i].Dir = filepath.Join(tc.o.Dir, tc.specs[i].Name)
			}
			got := map[int]result.Result{}
			Together(context.Background(), tc.specs, tc.o, 0, func(i int, r result.Result) { got[i] = r })
			if len(got) != len(tc.specs) {
				t.Fatalf("%d of %d runs reported", len(got), len(tc.specs))
			}
			for i, r := range got {
				if !strings.Contains(r.Error, tc.want) || r.Scenario != tc.specs[i].Scenario.Name {
					t.Errorf("run %d: scenario %q, error %q, want one naming %q", i, r.Scenario, r.Error, tc.want)
				}
			}
		})
	}
}

// A batch runs at most atOnce of its runs at a time, in their order;
// each run is reported once, the last to end returned rather than
// reported, and with 0 every run goes at once.
func TestABatchRunsAtMostAtOnceOfItsRunsAtATime(t *testing.T) {
	for _, tc := range []struct{ atOnce, runs, want int }{{2, 5, 2}, {1, 3, 1}, {0, 4, 4}, {9, 3, 3}} {
		var (
			mu            sync.Mutex
			running, peak int
			order         []string
		)
		specs := make([]Spec, tc.runs)
		for i := range specs {
			specs[i].Name = fmt.Sprint(i)
		}
		run := func(s Spec) result.Result {
			mu.Lock()
			running++
			peak = max(peak, running)
			order = append(order, s.Name)
			mu.Unlock()
			// Stay until as many runs as may overlap have started (or a
			// while has passed), then a little longer, so a slow scheduler
			// hides neither a limit that is too strict nor one too loose.
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				mu.Lock()
				enough := peak >= tc.want
				mu.Unlock()
				if enough {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			return result.Result{Scenario: s.Name}
		}
		reported := map[int]bool{}
		last, lastResult := runBatch(context.Background(), specs, tc.atOnce, run, func(i int, r result.Result) {
			mu.Lock()
			defer mu.Unlock()
			if reported[i] || r.Scenario != specs[i].Name {
				t.Errorf("run %d reported twice or with another's result (%q)", i, r.Scenario)
			}
			reported[i] = true
		})
		if peak != tc.want {
			t.Errorf("atOnce %d, %d runs: %d ran at once, want %d", tc.atOnce, tc.runs, peak, tc.want)
		}
		if tc.want == 1 && strings.Join(order, ",") != "0,1,2" {
			t.Errorf("one at a time: started in order %v", order)
		}
		if reported[last] || len(reported) != tc.runs-1 || lastResult.Scenario != specs[last].Name {
			t.Errorf("atOnce %d: reported %v, last %d (%q)", tc.atOnce, reported, last, lastResult.Scenario)
		}
	}
}
