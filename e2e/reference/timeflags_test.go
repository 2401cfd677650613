package reference

import (
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/providers/baremetal/host"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
	"github.com/upgradelab/upgradelab/providers/inplace"
)

// labValues reads flags back into lab time at s.
func labValues(t *testing.T, flags []string, s timescale.Scale) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for _, f := range flags {
		name, value, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		d, err := time.ParseDuration(value)
		if !ok || err != nil {
			t.Fatalf("flag %q: not --name=duration", f)
		}
		out[name] = time.Duration(float64(d) / float64(s))
	}
	return out
}

// The managers' waits are the same lab time at every scale: each flag's
// wall value, read back at its scale, is the default in lab time. Only
// a floor kept for CAPI's hook cadence, or a BMC's cost, may make one
// longer, never shorter.
func TestTheManagersWaitsAreLabTimeAtAnyScale(t *testing.T) {
	want := map[string]time.Duration{
		"health-grace": inplace.DefaultHealthGrace, "reboot-retry": inplace.DefaultRebootRetry,
		"flash-timeout": inplace.DefaultFlashTimeout, "drain-timeout": inplace.DefaultDrainTimeout,
		"update-deadline": inplace.DefaultDeadline, "shutdown-timeout": inplace.DefaultShutdownTimeout,
		"bmc-retry-delay": redfish.DefaultRetryDelay, "deploy-timeout": host.DefaultDeployTimeout,
		"reset-timeout": host.DefaultResetTimeout, "soft-power-off-timeout": host.DefaultSoftPowerOffTimeout,
		"power-check-interval": host.MetalPowerCheck,
	}
	// The wall-time floors, by flag (none: 0).
	floors := map[string]time.Duration{"flash-timeout": minStepsWait, "drain-timeout": minStepsWait, "update-deadline": minStepsWait,
		"shutdown-timeout": minStepsWait, "deploy-timeout": minStepsWait, "reset-timeout": minStepsWait, "soft-power-off-timeout": minStepsWait,
		"power-check-interval": minPowerCheck, "reboot-retry": inplace.DefaultRebootRetry}
	for _, s := range []timescale.Scale{0.01, 0.1, 1} {
		flags := append(ExtensionTimeFlags(s, true), ProviderTimeFlags(s)...)
		got := labValues(t, flags, s)
		if len(got) != len(want) {
			t.Fatalf("scale %g: flags %v; want one for each of %v", float64(s), flags, want)
		}
		for name, lab := range want {
			if wall := max(s.Real(lab), floors[name]); got[name] != time.Duration(float64(wall)/float64(s)) {
				t.Errorf("scale %g: --%s is %s of lab time, want %s (%s of wall time)", float64(s), name, got[name], lab, wall)
			}
		}
	}
	// At the suite's scale the reboot retry is the lab's 30 s where the
	// lab's BMCs carry the reboot: the slow-shutdown race is real there.
	if got := labValues(t, ExtensionTimeFlags(timescale.Suite, false), timescale.Suite)["reboot-retry"]; got != inplace.DefaultRebootRetry {
		t.Errorf("reboot-retry at the suite's scale is %s of lab time, want %s", got, inplace.DefaultRebootRetry)
	}
}
