package machine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// testScheme holds every type these tests' fake clients store.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{metal3.AddToScheme, infrav1.AddToScheme, clusterv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// fleetMachine is one control-plane Machine of cluster sn-1 in namespace
// fleet and its BareMetalMachine, which names no host yet.
func fleetMachine() (*clusterv1.Cluster, *clusterv1.Machine, *infrav1.BareMetalMachine) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "sn-1"}}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "sn-1-cp-x", UID: "m-uid", Labels: map[string]string{clusterv1.ClusterNameLabel: "sn-1"}},
		Spec:       clusterv1.MachineSpec{ClusterName: "sn-1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptrTo("sn-1-cp-x")}},
	}
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: "fleet", Name: "sn-1-cp-x", UID: "bmm-uid", Finalizers: []string{Finalizer},
		Labels:          map[string]string{clusterv1.ClusterNameLabel: "sn-1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: machine.Name, UID: machine.UID}},
	}}
	return cluster, machine, bmm
}

// A machine whose status names its host reads that host alone; the
// namespace's whole inventory is listed only when the name is missing or
// wrong (its status write was lost, or the host went to another machine).
func TestTheBoundHostIsReadByNameBeforeTheInventoryIsListed(t *testing.T) {
	scheme := testScheme(t)
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "sn-1-cp-x", UID: types.UID("uid-1")}}
	host := func(name string, consumer string, uid string) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		if consumer != "" {
			h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "BareMetalMachine", Name: consumer, UID: types.UID(uid)}
		}
		return h
	}
	var lists int
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		host("host-0", "other", "uid-0"), host("host-1", bmm.Name, string(bmm.UID)), host("host-2", "", ""),
	).WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		lists++
		return c.List(ctx, l, o...)
	}}).Build()
	r := &Reconciler{Client: c, Reader: c}

	for _, tc := range []struct {
		statusHost string
		wantLists  int
	}{
		{statusHost: "host-1", wantLists: 0}, // named and bound: one Get
		{statusHost: "", wantLists: 1},       // the status write was lost
		{statusHost: "host-0", wantLists: 1}, // named, but bound to another machine
		{statusHost: "gone", wantLists: 1},   // named, but deleted
	} {
		lists = 0
		bmm.Status.Host = tc.statusHost
		got, err := r.boundHost(context.Background(), bmm)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Name != "host-1" || lists != tc.wantLists {
			name := "none"
			if got != nil {
				name = got.Name
			}
			t.Errorf("status.host %q: bound host %s after %d lists; want host-1 after %d", tc.statusHost, name, lists, tc.wantLists)
		}
	}
}

// A machine whose host is still provisioning is looked at every poll; a
// look that changes nothing writes nothing (each write was a request on a
// fleet's loaded API server, hundreds a second).
func TestAWaitingMachineWritesItsStatusOnlyWhenItChanges(t *testing.T) {
	scheme := testScheme(t)
	cluster, machine, bmm := fleetMachine()
	bmm.Spec.ProviderID = "upgradelab://host-1/sn-1-cp-x"
	host := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "host-1"},
		Spec:   metal3.BareMetalHostSpec{ConsumerRef: &corev1.ObjectReference{Kind: "BareMetalMachine", Name: bmm.Name, UID: bmm.UID}},
		Status: metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: metal3.StateProvisioning}}}
	var writes int
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cluster, machine, bmm, host).
		WithStatusSubresource(bmm, host).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).Build()
	r := &Reconciler{Client: c, Reader: c, Poll: time.Millisecond}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(bmm)}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}

	// The first looks write: the Paused condition (CAPI's contract, a
	// look of its own), then the host and the conditions.
	for i := 0; ; i++ {
		writes = 0
		reconcile()
		if writes == 0 {
			break
		}
		if i == 3 {
			t.Fatal("four looks at a machine whose host only provisions each wrote its status")
		}
	}
	got := &infrav1.BareMetalMachine{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Host != host.Name {
		t.Fatalf("status.host %q after the first looks; want %s", got.Status.Host, host.Name)
	}
	reconcile()
	reconcile()
	if writes != 0 {
		t.Errorf("two looks at an unchanged machine wrote its status %d times; want none", writes)
	}
	host.Status.Provisioning.State = metal3.StateProvisioned
	if err := c.Status().Update(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if writes != 1 || got.Status.Initialization.Provisioned == nil || !*got.Status.Initialization.Provisioned {
		t.Errorf("after the host was provisioned: %d writes, provisioned %v; want 1 write and true", writes, got.Status.Initialization.Provisioned)
	}
}

// A host's change wakes the machine it is bound to; a host that stands
// available and unbound wakes every machine of its namespace still
// waiting for one, and nothing else.
func TestAnAvailableHostWakesTheMachinesWaitingForOne(t *testing.T) {
	scheme := testScheme(t)
	machine := func(ns, name, host string) *infrav1.BareMetalMachine {
		m := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		m.Status.Host = host
		return m
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		machine("fleet", "waiting-0", ""), machine("fleet", "waiting-1", ""), machine("fleet", "bound", "host-9"),
		machine("other", "waiting-elsewhere", ""),
	).WithStatusSubresource(&infrav1.BareMetalMachine{}).Build()
	r := &Reconciler{Client: c, Reader: c}
	host := func(state metal3.ProvisioningState, consumer string) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "host-1"}}
		h.Status.Provisioning.State = state
		if consumer != "" {
			h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "BareMetalMachine", Name: consumer}
		}
		return h
	}
	names := func(reqs []ctrl.Request) map[string]bool {
		out := map[string]bool{}
		for _, q := range reqs {
			out[q.Namespace+"/"+q.Name] = true
		}
		return out
	}
	for _, tc := range []struct {
		name string
		host *metal3.BareMetalHost
		want []string
	}{
		{"available and unbound", host(metal3.StateAvailable, ""), []string{"fleet/waiting-0", "fleet/waiting-1"}},
		{"bound", host(metal3.StateProvisioning, "bound"), []string{"fleet/bound"}},
		{"still inspecting", host(metal3.StateInspecting, ""), nil},
	} {
		got := names(r.hostWakes(context.Background(), tc.host))
		if len(got) != len(tc.want) {
			t.Errorf("%s: woke %v, want %v", tc.name, got, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("%s: woke %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

// A machine that found no free host waits ten polls (a host becoming
// available wakes it sooner, hostWakes); one whose claim lost a race for
// a host looks again at the next poll, as another host may be free.
func TestAMachineWithoutAHostWaitsLongerThanOneThatLostARace(t *testing.T) {
	scheme := testScheme(t)
	for _, tc := range []struct {
		name     string
		hosts    []client.Object
		conflict bool
		want     func(r *Reconciler) time.Duration
	}{
		{"no host free", nil, false, func(r *Reconciler) time.Duration { return 10 * r.Poll }},
		{"the claim lost a race", []client.Object{&metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "host-1"},
			Status: metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: metal3.StateAvailable}}}}, true,
			func(r *Reconciler) time.Duration { return r.Poll }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster, machine, bmm := fleetMachine()
			data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "sn-1-cp-x"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(tc.hosts, cluster, machine, bmm, data)...).
				WithStatusSubresource(bmm).
				WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
					if _, ok := o.(*metal3.BareMetalHost); ok && tc.conflict {
						return apierrors.NewConflict(metal3.GroupVersion.WithResource("baremetalhosts").GroupResource(), o.GetName(), errors.New("changed meanwhile"))
					}
					return c.Update(ctx, o, opts...)
				}}).Build()
			r := &Reconciler{Client: c, Reader: c, Poll: time.Millisecond}
			var res ctrl.Result
			for range 3 { // the first look may only write the Paused condition
				var err error
				if res, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(bmm)}); err != nil {
					t.Fatal(err)
				}
			}
			if want := tc.want(r); res.RequeueAfter != want {
				t.Errorf("looks again after %s, want %s", res.RequeueAfter, want)
			}
		})
	}
}

// The machine's status names the image its host runs: the provisioned
// one, then the spec's once the in-place extension reports the update
// of the current spec done. The host's spec.image, which
// baremetal-operator would answer by wiping a provisioned host, is left
// as provisioned.
func TestTheImageAHostRunsIsRecordedOnItsMachine(t *testing.T) {
	old := metal3.Image{URL: "http://images/v1.35.img", Checksum: "aa"}
	host := &metal3.BareMetalHost{Spec: metal3.BareMetalHostSpec{Image: old.DeepCopy()}}
	host.Status.Provisioning.State, host.Status.Provisioning.Image = metal3.StateProvisioned, old
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec: infrav1.BareMetalMachineSpec{Image: infrav1.Image{URL: "http://images/v1.36.img", Checksum: "bb"}}}

	recordImage(bmm, host)
	if bmm.Status.Image == nil || bmm.Status.Image.URL != old.URL {
		t.Fatalf("before any in-place update: status.image %+v, want the provisioned %s", bmm.Status.Image, old.URL)
	}
	updated := metav1.Condition{Type: infrav1.InPlaceUpdatedCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1}
	bmm.Status.Conditions = []metav1.Condition{updated}
	if recordImage(bmm, host); bmm.Status.Image.URL != old.URL {
		t.Errorf("an update done for an older spec moved status.image to %s", bmm.Status.Image.URL)
	}
	bmm.Status.Conditions[0].ObservedGeneration = 2
	if recordImage(bmm, host); bmm.Status.Image.URL != bmm.Spec.Image.URL {
		t.Errorf("after the update of the current spec: status.image %s, want %s", bmm.Status.Image.URL, bmm.Spec.Image.URL)
	}
	if *host.Spec.Image != old || host.Status.Provisioning.Image != old {
		t.Errorf("the host was changed: spec.image %+v, status %+v", host.Spec.Image, host.Status.Provisioning.Image)
	}
}

// A first provisioning does not take the spare while an ordinary host is
// still entering service (baremetal-operator inspects hosts one by one):
// the machine waits, saying for which host. A host that failed on its
// way is not waited for, and the spare is taken.
func TestTheSpareIsKeptWhileAnOrdinaryHostIsEnteringService(t *testing.T) {
	_, machine, bmm := fleetMachine()
	spare := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "spare-0", Labels: map[string]string{infrav1.SpareLabel: "true"}},
		Status: metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: metal3.StateAvailable}}}
	worker := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "worker-1"},
		Status: metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: metal3.StateInspecting}}}
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "sn-1-cp-x"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(spare, worker, bootstrap, bmm).Build()
	r := &Reconciler{Client: c, Reader: c}
	got, err := r.claim(context.Background(), bmm, machine)
	if err != nil || got != nil {
		t.Fatalf("claim with worker-1 inspecting: %v, %v; want to wait", got, err)
	}
	if msg := conditionMessage(bmm, infrav1.HostAssociatedCondition); !strings.Contains(msg, "worker-1 is still entering service") {
		t.Errorf("condition %q; want it to name worker-1", msg)
	}
	worker.Status.ErrorType = metal3.InspectionError
	if err := c.Update(context.Background(), worker); err != nil {
		t.Fatal(err)
	}
	got, err = r.claim(context.Background(), bmm, machine)
	if err != nil || got == nil || got.Name != "spare-0" {
		t.Fatalf("claim with worker-1 failed: %v, %v; want the spare", got, err)
	}
}

func conditionMessage(bmm *infrav1.BareMetalMachine, t string) string {
	for _, c := range bmm.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}
