package monitor

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// wakeRig is a Recorder over a fake workload cluster with one Ready
// Node, that never polls on its own (Idle an hour), counting its polls
// by their reads of the workload API.
type wakeRig struct {
	r     *Recorder
	tl    *timeline.Timeline
	wl    client.WithWatch
	polls atomic.Int64
	down  atomic.Bool
}

func newWakeRig(t *testing.T) *wakeRig {
	t.Helper()
	rig := &wakeRig{}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	rig.wl = fake.NewClientBuilder().WithObjects(node).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok { // the poll's probe of the API
				rig.polls.Add(1)
				if rig.down.Load() {
					return errors.New("connection refused")
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	var err error
	if rig.tl, err = timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rig.tl.Close() })
	rig.r = &Recorder{Management: fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build(), Namespace: "scenario",
		Timeline: rig.tl, Interval: 10 * time.Millisecond, Idle: time.Hour,
		Workload: func(context.Context) (client.Client, error) { return rig.wl, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rig.r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return rig
}

// nodeReadyRecorded waits for the timeline to hold Node n with ready.
func (rig *wakeRig) nodeReadyRecorded(t *testing.T, ready string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, e := range rig.tl.Entries() {
			if e.Kind == vocab.KindNode && e.New != nil && e.New[vocab.FieldReady] == ready {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Node n with ready=%s not recorded within %s", ready, within)
}

// A change in the workload cluster is recorded at once, through the
// recorder's watch, and nothing is read while nothing changes.
func TestTheRecorderPollsWhenTheWorkloadChangesAndOnlyThen(t *testing.T) {
	rig := newWakeRig(t)
	rig.nodeReadyRecorded(t, "True", 5*time.Second)
	time.Sleep(100 * time.Millisecond) // the watches' first events
	before := rig.polls.Load()
	time.Sleep(300 * time.Millisecond)
	if n := rig.polls.Load() - before; n > 0 {
		t.Fatalf("%d polls of an unchanged cluster in 300 ms (Idle is an hour)", n)
	}
	n := &corev1.Node{}
	ctx := t.Context()
	if err := rig.wl.Get(ctx, client.ObjectKey{Name: "n"}, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := rig.wl.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	rig.nodeReadyRecorded(t, "False", time.Second)
}

// Wake (the runner's call for each lab and workload event) polls; and
// while the workload API does not answer, the recorder polls every
// Interval until it does.
func TestTheRecorderPollsOnWakeAndWhileTheAPIIsDown(t *testing.T) {
	rig := newWakeRig(t)
	rig.nodeReadyRecorded(t, "True", 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	before := rig.polls.Load()
	rig.down.Store(true)
	rig.r.Wake()
	time.Sleep(300 * time.Millisecond)
	if n := rig.polls.Load() - before; n < 5 {
		t.Fatalf("%d polls in 300 ms of a workload API down (Interval 10 ms)", n)
	}
	rig.down.Store(false)
	time.Sleep(100 * time.Millisecond)
	before = rig.polls.Load()
	time.Sleep(300 * time.Millisecond)
	if n := rig.polls.Load() - before; n > 0 {
		t.Fatalf("%d polls in 300 ms after the API answered again, with nothing changing", n)
	}
	var outage bool
	for _, e := range rig.tl.Entries() {
		if e.Kind == vocab.KindWorkloadAPI && e.New[vocab.FieldAPIAvailable] == "false" {
			outage = true
		}
	}
	if !outage {
		t.Fatal("the outage the wake found is not in the timeline")
	}
}
