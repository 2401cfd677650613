package check_test

import (
	"context"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// The model broken on purpose, judged by the rules: two control-plane
// hosts of three wiped while KCP still counted their members (a provider
// that deprovisions before KCP's pre-terminate hook ran) is a lost
// quorum, recorded from the lab's own workload events.
func TestWipingMembersKCPDidNotRemoveBreaksEtcdQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clusters, err := workload.Start(ctx, workload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer clusters.Stop(context.Background())
	if _, err := clusters.Create(ctx, "ns/wl"); err != nil {
		t.Fatal(err)
	}
	clusterCA, etcdCA := labtest.ClusterCAs(t)
	for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
		if err := clusters.JoinControlPlane(ctx, "ns/wl", n, workload.Release{Kubernetes: "v1.35.3"}, nil, clusterCA, etcdCA); err != nil {
			t.Fatal(err)
		}
	}
	tl := timeline.New()
	recCtx, stop := context.WithCancel(ctx)
	go monitor.RecordWorkload(recCtx, clusters, "ns/wl", tl, nil)
	time.Sleep(50 * time.Millisecond) // subscribed
	tl.Step(check.StepUpgrade, "")
	for _, n := range []string{"cp-a", "cp-b"} {
		clusters.StopNode(ctx, "ns/wl", n)
		clusters.MemberDataLost(ctx, "ns/wl", n)
	}
	time.Sleep(100 * time.Millisecond) // the events recorded
	tl.Step(check.StepDone, "")
	stop()
	p := check.Params{Strategy: scenario.ScaleIn, ControlPlaneReplicas: 3, EtcdOnHosts: true}
	for _, r := range check.Run(tl.Entries(), p) {
		if r.Rule != "etcd-quorum" {
			continue
		}
		if r.Status != check.Fail || len(r.Violations) == 0 {
			t.Fatalf("etcd-quorum %s: two of three members wiped unremoved", r.Status)
		}
		t.Logf("%s", r.Violations[0])
		return
	}
	t.Fatal("no etcd-quorum result")
}
