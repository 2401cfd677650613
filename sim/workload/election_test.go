package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// When the leader's host goes, the others elect one within etcd's
// election timeout; until then etcd has no leader and the API answers
// writes with etcd's "no leader".
func TestALeaderGoneLeavesEtcdLeaderlessForTheElectionTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const scale = 0.5 // the election takes 500 ms
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0"}
	c, clusterCA, etcdCA, _ := controlPlaneClusterWith(t, ctx, rel, Options{Scale: scale})
	for _, n := range []string{"cp-1", "cp-2"} {
		if err := c.JoinControlPlane(ctx, "default/wl", n, rel, nil, clusterCA, etcdCA); err != nil {
			t.Fatal(err)
		}
	}
	events, stop := c.Subscribe()
	defer stop()
	// cp-0, the first member, leads. Its VIP fails over too, so the
	// writes go to the store, through the gate the API's go through.
	if err := c.StopNode(ctx, "default/wl", "cp-0"); err != nil {
		t.Fatal(err)
	}
	write := func(name string) error {
		return c.client("default/wl").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})
	}
	if err := write("during"); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Errorf("a write during the election: %v, want etcd's no leader", err)
	}
	var election, leader time.Time
	for leader.IsZero() {
		select {
		case e := <-events:
			switch e.Reason {
			case vocab.EventEtcdElection:
				election = e.Time
			case vocab.EventEtcdLeader:
				leader = e.Time
				if !strings.Contains(e.Message, "etcd member cp-1 became the leader") {
					t.Errorf("the election's end: %q", e.Message)
				}
			}
		case <-ctx.Done():
			t.Fatal("no election ended")
		}
	}
	if want := timescale.Scale(scale).Real(ElectionTimeout); election.IsZero() || leader.Sub(election) < want {
		t.Errorf("the election took %s, want etcd's election timeout, %s", leader.Sub(election), want)
	}
	if err := write("after"); err != nil {
		t.Errorf("a write after the election: %v", err)
	}
}
