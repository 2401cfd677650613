package monitor

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// One poll that sees a Machine gone and its replacement new records the
// removal first: the replay must not show both at once, which KCP's
// scale-in never allows (it creates the replacement after the deletion).
func TestOnePollRecordsRemovalsBeforeAdditions(t *testing.T) {
	tl, err := timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	r := &Recorder{Timeline: tl, last: map[string]map[string]map[string]string{}}
	r.diff(vocab.KindMachine, map[string]map[string]string{"sc-cp-b": {vocab.FieldVersion: "v1.35.3"}, "sc-cp-c": {vocab.FieldVersion: "v1.35.3"}}, time.Now())
	r.diff(vocab.KindMachine, map[string]map[string]string{"sc-cp-a": {vocab.FieldVersion: "v1.36.3"}, "sc-cp-c": {vocab.FieldVersion: "v1.35.3"}}, time.Now())
	entries := tl.Entries()
	if len(entries) != 4 {
		t.Fatalf("entries %+v", entries)
	}
	gone, added := entries[2], entries[3]
	if gone.Name != "sc-cp-b" || gone.New != nil || added.Name != "sc-cp-a" || added.Old != nil {
		t.Fatalf("second poll recorded %+v then %+v; want sc-cp-b gone, then sc-cp-a new", gone, added)
	}
}

// A Machine that starts deleting and the host it frees change between
// two of a poll's reads, at whichever read: the timeline must never show
// the host deprovisioning before the Machine deleting (what the
// no-wipe-under-live-machine rule would call a wipe under a live
// Machine). With CAPI reconciling without its rate limit the whole chain
// (Machine deleting, BareMetalMachine gone, host freed) fits between two
// reads of one poll.
func TestAPollNeverRecordsAFreedHostBeforeItsDeletingMachine(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, metal3.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	const ns = "scenario"
	reads := 6 // one poll's Lists: Clusters, KCPs, MachineDeployments, MachineSets, Machines, hosts
	for at := 1; at <= reads; at++ {
		machine := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "md-a", Finalizers: []string{"machine.cluster.x-k8s.io"}},
			Spec:       clusterv1.MachineSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{Name: "md-a"}},
		}
		host := &metal3.BareMetalHost{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host-0"},
			Spec:       metal3.BareMetalHostSpec{ConsumerRef: &corev1.ObjectReference{Kind: "BareMetalMachine", Name: "md-a"}},
			Status:     metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: metal3.StateProvisioned}},
		}
		lists, changed := 0, false
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(machine, host).WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				lists++
				if lists == reads+at { // the second poll's read number at
					changed = true
					deleteAndFree(ctx, t, cl, machine, host)
				}
				return cl.List(ctx, list, opts...)
			},
		}).Build()
		tl, err := timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		r := &Recorder{Management: c, Namespace: ns, Timeline: tl, Hosts: true}
		for range 3 {
			r.Poll(context.Background())
		}
		tl.Close()
		deleting, freed := -1, -1
		for i, e := range tl.Entries() {
			switch {
			case e.Kind == vocab.KindMachine && e.New[vocab.FieldDeleting] == "true" && deleting < 0:
				deleting = i
			case e.Kind == vocab.KindHost && e.New[vocab.FieldState] == string(metal3.StateDeprovisioning) && freed < 0:
				freed = i
			}
		}
		if lists != 3*reads || !changed || deleting < 0 || freed < 0 {
			t.Fatalf("change at read %d: %d reads in 3 polls, changed %v, Machine deleting recorded at %d, host freed at %d", at, lists, changed, deleting, freed)
		}
		if freed < deleting {
			t.Errorf("change before read %d of a poll: the host's deprovisioning (entry %d) is recorded before its Machine deleting (entry %d)", at, freed, deleting)
		}
	}
}

// deleteAndFree is what CAPI and the provider do in one quick chain: the
// Machine starts deleting, its host is released and deprovisions.
func deleteAndFree(ctx context.Context, t *testing.T, c client.Client, machine *clusterv1.Machine, host *metal3.BareMetalHost) {
	if err := c.Delete(ctx, machine.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	h := &metal3.BareMetalHost{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(host), h); err != nil {
		t.Fatal(err)
	}
	h.Spec.ConsumerRef = nil
	h.Status.Provisioning.State = metal3.StateDeprovisioning
	if err := c.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
}

// The runner polls once more at each step while Run polls on its ticker;
// under -race this fails if the two share the recorder's state unguarded.
func TestPollWhileRunning(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tl, err := timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}).Build()
	r := &Recorder{Management: c, Namespace: "ns", Timeline: tl, Interval: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for range 50 {
		r.Poll(ctx)
	}
	cancel()
	<-done
	if n := len(tl.Entries()); n != 1 {
		t.Fatalf("one Machine that never changed recorded %d times", n)
	}
}

// KCP removes a control-plane Machine's etcd member before its Node goes.
// Whichever of a poll's workload reads that chain happens before, the
// timeline never shows the Node gone while its member is still a live
// one: etcd-quorum would count that as a member down (it did, on four
// runs at once).
func TestAPollNeverRecordsANodeGoneBeforeItsMemberRemoved(t *testing.T) {
	reads := 4 // one poll's workload Lists of these kinds: the application's pods, Nodes, static pods, etcd member pods
	for at := 1; at <= reads; at++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-a"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-cp-a", Labels: map[string]string{"component": "etcd"}},
			Spec: corev1.PodSpec{NodeName: "cp-a"}}
		lists, changed := 0, false
		wl := fake.NewClientBuilder().WithObjects(node, member).WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				switch list.(type) {
				case *corev1.PodList, *corev1.NodeList:
					lists++
					if lists == reads+at { // the second poll's read number at
						changed = true
						removeMemberThenNode(ctx, t, cl, member, node)
					}
				}
				return cl.List(ctx, list, opts...)
			},
		}).Build()
		tl, err := timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		empty := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
		r := &Recorder{Management: empty, Namespace: "scenario", Timeline: tl,
			Workload: func(context.Context) (client.Client, error) { return wl, nil }}
		for range 3 {
			r.Poll(context.Background())
		}
		tl.Close()
		memberGone, nodeGone := -1, -1
		for i, e := range tl.Entries() {
			switch {
			case e.Kind == vocab.KindEtcdMember && (e.New == nil || e.New[vocab.FieldRemoved] != "") && e.Old != nil && memberGone < 0:
				memberGone = i
			case e.Kind == vocab.KindNode && e.New == nil && e.Old != nil && nodeGone < 0:
				nodeGone = i
			}
		}
		if !changed || memberGone < 0 || nodeGone < 0 {
			t.Fatalf("change at read %d: changed %v, member removed recorded at %d, Node gone at %d", at, changed, memberGone, nodeGone)
		}
		if nodeGone < memberGone {
			t.Errorf("change before read %d of a poll: the Node's deletion (entry %d) is recorded before its member's removal (entry %d)", at, nodeGone, memberGone)
		}
	}
}

// removeMemberThenNode is what KCP and the Machine controller do in one
// quick chain: the member is removed (CAPI's in-memory etcd marks its
// pod), then the Node is deleted.
func removeMemberThenNode(ctx context.Context, t *testing.T, c client.Client, member *corev1.Pod, node *corev1.Node) {
	p := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(member), p); err != nil {
		t.Fatal(err)
	}
	p.Annotations = map[string]string{etcdMemberRemoved: ""}
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, node.DeepCopy()); err != nil {
		t.Fatal(err)
	}
}

// One poll is one observation: every change it records carries the same
// time, which is how the checks know to judge them together. A new etcd
// member and its new Node seen in one poll must not replay as a moment
// with the member and without the Node.
func TestAPollsChangesShareOneTime(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-b"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-cp-b", Labels: map[string]string{"component": "etcd"}},
		Spec: corev1.PodSpec{NodeName: "cp-b"}}
	wl := fake.NewClientBuilder().Build()
	tl, err := timeline.Create(filepath.Join(t.TempDir(), "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	empty := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	r := &Recorder{Management: empty, Namespace: "scenario", Timeline: tl,
		Workload: func(context.Context) (client.Client, error) { return wl, nil }}
	r.Poll(t.Context())
	for _, o := range []client.Object{node, member} {
		if err := wl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	r.Poll(t.Context())
	tl.Close()
	var entries []timeline.Entry
	for _, e := range tl.Entries() {
		if e.Kind != vocab.KindWorkloadAPI { // the API probe, up at the first poll
			entries = append(entries, e)
		}
	}
	if len(entries) != 2 {
		t.Fatalf("want the member and the Node recorded, got %+v", entries)
	}
	if !entries[0].Time.Equal(entries[1].Time) {
		t.Errorf("one poll's changes carry different times: %s %s at %s, %s %s at %s",
			entries[0].Kind, entries[0].Name, entries[0].Time, entries[1].Kind, entries[1].Name, entries[1].Time)
	}
}

// kubeadm labels etcd tier=control-plane too: the static-pod read asks
// the API server for the others only, so etcd's pod is fetched once per
// poll, by the etcd-member read, and recorded as one kind.
func TestStaticPodsAndEtcdMembersAreReadApart(t *testing.T) {
	pod := func(name, component string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name,
			Labels: map[string]string{"component": component, "tier": "control-plane"}}, Spec: corev1.PodSpec{NodeName: "cp-a"}}
	}
	fetched := map[string]int{} // pod name to the reads that returned it
	wl := fake.NewClientBuilder().WithObjects(pod("etcd-cp-a", "etcd"), pod("kube-apiserver-cp-a", "kube-apiserver"), pod("kube-scheduler-cp-a", "kube-scheduler")).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			err := cl.List(ctx, list, opts...)
			if l, ok := list.(*corev1.PodList); ok {
				for _, p := range l.Items {
					fetched[p.Name]++
				}
			}
			return err
		}}).Build()
	r := &Recorder{workload: wl}
	static, err := r.staticPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	members, err := r.etcdMembers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(static)); !slices.Equal(got, []string{"kube-apiserver-cp-a", "kube-scheduler-cp-a"}) {
		t.Errorf("static pods read: %v", got)
	}
	if got := slices.Sorted(maps.Keys(members)); !slices.Equal(got, []string{"etcd-cp-a"}) {
		t.Errorf("etcd members read: %v", got)
	}
	if fetched["etcd-cp-a"] != 1 {
		t.Errorf("etcd's pod fetched %d times in one poll's two reads, want once", fetched["etcd-cp-a"])
	}
}

// The API is down from when the first failing read began, kept while it
// stays down: the checks judge a hung read by its start, not its poll.
func TestTheAPIIsDownFromTheFirstFailingRead(t *testing.T) {
	fails := 2
	wl := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if fails > 0 {
				fails--
				return syscall.ECONNREFUSED
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	}).Build()
	r := &Recorder{workload: wl}
	before := time.Now()
	first, err := r.api(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, _ := r.api(context.Background())
	up, _ := r.api(context.Background())
	from, err := time.Parse(time.RFC3339Nano, first["api"][vocab.FieldAPIReadFrom])
	if err != nil || from.Before(before) || first["api"][vocab.FieldAPIAvailable] != "false" {
		t.Fatalf("first failing read: %v (%v); want down from a moment after %s", first, err, before)
	}
	if second["api"][vocab.FieldAPIReadFrom] != first["api"][vocab.FieldAPIReadFrom] {
		t.Errorf("still down: read from %q, want the first failure's %q", second["api"][vocab.FieldAPIReadFrom], first["api"][vocab.FieldAPIReadFrom])
	}
	if up["api"][vocab.FieldAPIAvailable] != "true" || up["api"][vocab.FieldAPIReadFrom] != "" {
		t.Errorf("answering again: %v", up)
	}
}

// The rules tell a poll from a step or an event by vocab.PolledKinds:
// the kinds a poll reads, which must be exactly the recorder's.
func TestPolledKindsAreTheRecordersKinds(t *testing.T) {
	var read []string
	for _, k := range (&Recorder{Hosts: true}).kinds() {
		read = append(read, k.name)
	}
	slices.Sort(read)
	want := slices.Sorted(slices.Values(vocab.PolledKinds))
	if !slices.Equal(read, want) {
		t.Errorf("the recorder polls %v; vocab.PolledKinds says %v", read, want)
	}
}
