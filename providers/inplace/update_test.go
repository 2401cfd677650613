package inplace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
)

// A write is tried again only when it was cut off: the host restarted
// under it or the agent never answered. What the agent refused (a bad
// checksum, a full disk) fails the update.
func TestCutShortTellsACutWriteFromARefusedOne(t *testing.T) {
	before := agentv1.Status{OS: &agentv1.RunningOS{BootID: "boot-1"}}
	after := agentv1.Status{OS: &agentv1.RunningOS{BootID: "boot-2"}}
	refused := &hostagent.Error{Call: "POST /v1/stage", Status: 500, Message: "sha256 mismatch"}
	dropped := fmt.Errorf("host agent POST /v1/stage: %w", errors.Join(errors.New("read: connection reset by peer"), syscall.ECONNRESET))
	for _, tc := range []struct {
		name string
		err  error
		st   agentv1.Status
		want bool
	}{
		{"refused by the agent, same boot", refused, before, false},
		{"refused, but the host restarted under it", fmt.Errorf("wrapped: %w", refused), after, true},
		{"the connection dropped", dropped, before, true},
	} {
		if got := cutShort(&staging{bootID: "boot-1", err: tc.err}, tc.st); got != tc.want {
			t.Errorf("%s: cutShort = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An update past its deadline fails whatever step it is at, and the
// failure is kept for that image (answered again without touching the
// host); an update not past it goes on to find its host.
func TestAnUpdatePastItsDeadlineFails(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	want := infrav1.Image{URL: "http://images/ubuntu-24.04-k8s-v1.36.3", Checksum: "bb"}
	for _, tc := range []struct {
		name        string
		startedAgo  time.Duration
		wantFailure string
	}{
		{name: "past the deadline", startedAgo: 2 * time.Hour, wantFailure: "did not finish within 1h0m0s"},
		{name: "within it", startedAgo: time.Minute, wantFailure: "the Machine has no Node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Annotations: map[string]string{
				StartedAnnotation: updateKey(want, nil) + "@" + time.Now().Add(-tc.startedAgo).UTC().Format(time.RFC3339Nano)}},
				Spec: infrav1.BareMetalMachineSpec{Image: want}}
			machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(bmm.DeepCopy(), machine).Build()
			u := &Updater{Client: c, Deadline: time.Hour}
			p, err := u.step(context.Background(), machine, bmm, &bootstrapv1.KubeadmConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if !p.failed || !strings.Contains(p.message, tc.wantFailure) {
				t.Fatalf("step: %+v; want a failure mentioning %q", p, tc.wantFailure)
			}
			if tc.startedAgo < time.Hour {
				return
			}
			stored := &infrav1.BareMetalMachine{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(bmm), stored); err != nil {
				t.Fatal(err)
			}
			if key, msg, ok := recordedFailure(stored); !ok || key != updateKey(want, nil) || !strings.Contains(msg, "did not finish") {
				t.Fatalf("failure kept as %q (%v)", stored.Annotations[FailedAnnotation], ok)
			}
		})
	}
}

// A replica that did not start the write under way on the host (another
// replica did, or this process before it restarted) waits for it rather
// than start a second one into the same root; with nothing under way it
// starts the write.
func TestStageLeavesAWriteItDidNotStartToTheHost(t *testing.T) {
	var stages atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stage") {
			stages.Add(1)
		}
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ag := hostagent.New(srv.Client(), srv.URL)
	want := infrav1.Image{URL: "http://images/new", Checksum: "bb"}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{UID: "m-1"}}
	st := func(state agentv1.RootState) agentv1.Status {
		return agentv1.Status{OS: &agentv1.RunningOS{BootID: "boot-1"}, Images: agentv1.Images{Roots: []agentv1.Root{
			{ID: "A", State: agentv1.RootWritten, Checksum: "aa", Committed: true},
			{ID: "B", State: state, Checksum: "bb"},
		}}}
	}
	u := &Updater{}
	if _, done, err := u.stage(m, ag, st(agentv1.RootWriting), want); done || err != nil {
		t.Fatalf("a write under way elsewhere: done %v, err %v", done, err)
	}
	if _, started := u.staging[string(m.UID)]; started {
		t.Fatal("a second write was started while the host reports one under way")
	}
	if _, done, err := u.stage(m, ag, st(agentv1.RootCorrupt), want); done || err != nil {
		t.Fatalf("after a cut write: done %v, err %v", done, err)
	}
	if _, started := u.staging[string(m.UID)]; !started {
		t.Fatal("no write was started although none is under way")
	}
	deadline := time.Now().Add(5 * time.Second)
	for stages.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if stages.Load() != 1 {
		t.Fatalf("the agent was asked to stage %d times, want 1", stages.Load())
	}
}
