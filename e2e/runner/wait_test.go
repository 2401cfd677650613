package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/timescale"
)

// A wait that runs out of time reports the last look that finished, not
// one cut short by the deadline: a look whose reads fail half way would
// count every machine as not up to date.
func TestATimedOutWaitReportsTheLastWholeLook(t *testing.T) {
	r := &run{}
	looks := 0
	err := r.wait(context.Background(), 300*time.Millisecond, func(ctx context.Context) (progress, error) {
		looks++
		if looks == 1 {
			return progress{line: "2/3 machines up to date", detail: "m-2 provisioning"}, nil
		}
		<-ctx.Done() // the Nodes' read outlives the deadline
		return progress{line: "0/3 machines up to date", detail: "no Nodes read"}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "2/3 machines up to date") || !strings.Contains(err.Error(), "m-2 provisioning") {
		t.Errorf("timed-out wait: %v; want the last whole look (2/3, m-2 provisioning)", err)
	}
}

// Under Metal3's inventory a run slows its lab to Ironic's floor for
// the lab (0.2 with IPMI-only hosts, else 0.05) and gets at least the
// provider's provisioning and upgrade intervals; upgradelab's own
// inventory keeps the scale and the scenario's timeout.
func TestARunOnIronicGetsIronicsScaleAndTheProvidersIntervals(t *testing.T) {
	for _, c := range []struct {
		provider, scenario string
		scale              timescale.Scale
		extra              time.Duration
	}{
		{"baremetal-bmo", "three-node-scale-in-ipmi", 0.2, 25 * time.Minute},
		{"baremetal-bmo", "three-node-scale-in", 0.05, 25 * time.Minute},
		{"metal3", "cold-spare-rolling", 0.05, 25 * time.Minute},
		{"baremetal", "three-node-scale-in-ipmi", 0.01, 0},
	} {
		root, s, def := repoScenario(t, c.scenario)
		cfg := repoProvider(t, root, c.provider)
		r := &run{provider: cfg, scenario: s, lab: def, opts: Options{Scale: 0.01}}
		r.fitBudget()
		r.slowToIronic()
		if r.opts.Scale != c.scale || r.opts.ExtraTime != c.extra {
			t.Errorf("%s on %s: scale %g, extra time %s; want %g and %s (intervals %s + %s, timeout %s)", c.scenario, c.provider,
				float64(r.opts.Scale), r.opts.ExtraTime, float64(c.scale), c.extra, cfg.Intervals.Provision.Duration, cfg.Intervals.Upgrade.Duration, s.Timeout.Duration)
		}
		if got, want := Limit(s, cfg, 0, 0.01), s.Timeout.Duration+c.extra; got != want {
			t.Errorf("%s on %s: Limit %s; want %s, the limit the run itself keeps (a test framework's timeout follows it)", c.scenario, c.provider, got, want)
		}
	}
}

// A scenario's timeout is its budget at the suite's time scale: a run
// asked for ten times it gets ten times the budget, a faster one no less.
func TestASlowerScaleGetsAProportionalBudget(t *testing.T) {
	root, s, _ := repoScenario(t, "three-node-scale-in")
	cfg := repoProvider(t, root, "baremetal")
	for _, c := range []struct {
		scale timescale.Scale
		want  time.Duration
	}{{0.1, 10 * s.Timeout.Duration}, {timescale.Suite, s.Timeout.Duration}, {0.001, s.Timeout.Duration}} {
		if got := Limit(s, cfg, time.Minute, c.scale); got != c.want+time.Minute {
			t.Errorf("at scale %g: limit %s; want %s and the extra minute", float64(c.scale), got, c.want)
		}
	}
	// A scenario whose minTimeScale is slower than the suite's runs at
	// it, with the budget of that scale.
	_, mhc, _ := repoScenario(t, "faults/mhc-shorter-than-reboot")
	if got, want := Limit(mhc, cfg, 0, timescale.Suite), time.Duration(float64(mhc.Timeout.Duration)*mhc.MinTimeScale/float64(timescale.Suite)); mhc.MinTimeScale == 0 || got != want {
		t.Errorf("minTimeScale %g: limit %s; want %s", mhc.MinTimeScale, got, want)
	}
	var said strings.Builder
	slow := &run{provider: cfg, scenario: mhc, opts: Options{Scale: timescale.Suite, Progress: &said}}
	slow.slowToScenario()
	if float64(slow.opts.Scale) != mhc.MinTimeScale || !strings.Contains(said.String(), "raised to the scenario's minTimeScale") {
		t.Errorf("a run at the suite's scale of a scenario with minTimeScale %g runs at %g and said %q", mhc.MinTimeScale, float64(slow.opts.Scale), said.String())
	}
	// The provider's intervals grow as the timeout does, on the run's
	// own copy of the config.
	provision := cfg.Intervals.Provision.Duration
	r := &run{provider: cfg, scenario: s, opts: Options{Scale: 0.1}}
	r.fitBudget()
	if got := r.provider.Intervals.Provision.Duration; got != 10*provision {
		t.Errorf("at scale 0.1: provisioning interval %s; want %s, ten times the config's", got, 10*provision)
	}
	if cfg.Intervals.Provision.Duration != provision {
		t.Errorf("fitBudget changed the shared config's interval to %s", cfg.Intervals.Provision.Duration)
	}
}

// At scale 0 every lab-time duration would be zero (no stall watched,
// no API outage allowed): a run refuses it before it starts anything.
func TestARunNeedsAScaleAboveZero(t *testing.T) {
	root, s, def := repoScenario(t, "single-node-in-place")
	res := Run(context.Background(), s, def, scenario.Plain, Options{RepoRoot: root, Dir: t.TempDir()})
	if !strings.Contains(res.Error, "time scale 0: a run needs one above 0") {
		t.Fatalf("a run at scale 0 stopped with %q; want it refused for its scale", res.Error)
	}
}
