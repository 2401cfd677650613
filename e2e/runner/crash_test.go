package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/timeline"
)

// A crash of the management kube-apiserver (the plane restarted it) is a
// step on the timeline at the moment it happened, even one before the
// run subscribed, and a line of the result.
func TestAPIServerCrashIsAStepAtItsTimeAndOnTheResult(t *testing.T) {
	r := &run{tl: timeline.New()}
	at := time.Now().Add(-time.Minute)
	c := mgmt.APIServerCrash{Time: at, PID: 7, Reason: "panic: boom in main.f", Log: "/x/kube-apiserver+etcd.log", RestartedPID: 9}
	r.tl.Step("env", "plane and lab up")
	r.recordAPIServerCrash(c)
	entries := r.tl.Entries()
	if len(entries) != 2 || entries[0].Name != result.StepAPIServerCrashed || !entries[0].Time.Equal(at) || entries[0].Kind != timeline.KindStep {
		t.Fatalf("timeline: %+v; want the crash first, at %s", entries, at)
	}
	if d := entries[0].New["detail"]; !strings.Contains(d, "pid 7") || !strings.Contains(d, "panic: boom in main.f") || !strings.Contains(d, "(pid 9)") {
		t.Errorf("step detail %q", d)
	}
	if len(r.apiServerCrashes) != 1 || r.apiServerCrashes[0] != c.String() {
		t.Errorf("result lines %q", r.apiServerCrashes)
	}
}
