package scenario

import (
	"math"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
)

// AtScale is the scenario as a run at scale meets the wall clock. Every
// duration a scenario file sets is the world's time, as the lab's own
// timings are: a MachineHealthCheck's unhealthyAfter, a drain timeout,
// an API outage allowed, how long a stall is watched, and each fault's
// delay, latency, outage and restore. This is the one place they become
// wall time, by the run's time scale, for the wall-clock parts that meet
// them: CAPI's controllers, the fault injector's timers and the rules,
// which judge a wall-clock timeline.
//
// CAPI takes health-check and drain timeouts in whole seconds, so those
// are rounded up and kept at one second at least (a drain timeout of 0
// would mean none); the durations a lab-time second rounds up to are the
// ones that cannot keep their meaning at a very small scale. Timeout, the
// harness's budget for the run, is wall time and stays as it is.
func (s *Scenario) AtScale(scale timescale.Scale) *Scenario {
	w := *s
	if hc := s.Cluster.HealthCheck; hc != nil {
		w.Cluster.HealthCheck = &HealthCheck{UnhealthyAfter: wholeSeconds(scale, hc.UnhealthyAfter)}
	}
	if s.Workload.NodeDrainTimeout.Duration > 0 {
		w.Workload.NodeDrainTimeout = wholeSeconds(scale, s.Workload.NodeDrainTimeout)
	}
	w.Expect.StallFor = wall(scale, s.Expect.StallFor)
	bound := Duration{scale.Real(s.APIOutageBound())}
	w.Expect.MaxAPIOutage = &bound
	w.Faults = make([]Fault, len(s.Faults))
	for i, f := range s.Faults {
		f.When.Delay = wall(scale, f.When.Delay)
		f.DownFor = wall(scale, f.DownFor)
		if f.BMC != nil {
			b := *f.BMC
			b.Latency, b.Offline = wall(scale, b.Latency), wall(scale, b.Offline)
			f.BMC = &b
		}
		if f.PowerLoss != nil {
			p := *f.PowerLoss
			p.RestoreAfter = wall(scale, p.RestoreAfter)
			f.PowerLoss = &p
		}
		if f.PauseCluster != nil {
			f.PauseCluster = &PauseClusterFault{For: wall(scale, f.PauseCluster.For)}
		}
		if f.AgentCrash != nil {
			f.AgentCrash = &AgentCrashFault{RestartAfter: wall(scale, f.AgentCrash.RestartAfter)}
		}
		w.Faults[i] = f
	}
	return &w
}

// wall is the wall time of lab time d at scale.
func wall(scale timescale.Scale, d Duration) Duration { return Duration{scale.Real(d.Duration)} }

// wholeSeconds is wall rounded up to whole seconds, one at least.
func wholeSeconds(scale timescale.Scale, d Duration) Duration {
	secs := max(math.Ceil(scale.Real(d.Duration).Seconds()), 1)
	return Duration{time.Duration(secs) * time.Second}
}
