package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

func TestHealthFollowsTheMembersTable(t *testing.T) {
	R, S, W, X := MemberRunning, MemberStopped, MemberWiped, MemberRemoved
	for _, tc := range []struct {
		members map[string]MemberState
		want    Health
	}{
		{map[string]MemberState{}, HealthNoMembers},
		{map[string]MemberState{"a": R}, HealthQuorum},
		{map[string]MemberState{"a": S}, HealthNoQuorum},
		{map[string]MemberState{"a": W}, HealthDataLost},
		{map[string]MemberState{"a": R, "b": R, "c": S}, HealthQuorum},
		{map[string]MemberState{"a": R, "b": S, "c": S}, HealthNoQuorum},
		{map[string]MemberState{"a": R, "b": W, "c": W}, HealthNoQuorum},
		{map[string]MemberState{"a": W, "b": W, "c": W}, HealthDataLost},
		// KCP removed one first: two voters, both running.
		{map[string]MemberState{"a": R, "b": R, "c": X}, HealthQuorum},
		// A removed member's wipe costs nothing; a surge member counts.
		{map[string]MemberState{"a": R, "b": R, "c": R, "d": S}, HealthQuorum},
		{map[string]MemberState{"a": R, "b": R, "c": S, "d": S}, HealthNoQuorum},
		{map[string]MemberState{"a": R, "b": X, "c": X}, HealthQuorum},
	} {
		if got := health(tc.members); got != tc.want {
			t.Errorf("health(%s) = %s, want %s", describe(tc.members), got, tc.want)
		}
	}
	// Every Health has a row, and only a healthy one serves.
	for _, h := range []Health{HealthNoMembers, HealthQuorum, HealthNoQuorum, HealthDataLost} {
		b, ok := behaviours[h]
		if !ok {
			t.Fatalf("no behaviour for %s", h)
		}
		serves := b.Reads == nil && b.Writes == nil
		if want := h == HealthQuorum || h == HealthNoMembers; serves != want {
			t.Errorf("%s serves=%v, want %v", h, serves, want)
		}
	}
}

// threeControlPlanes is default/wl with cp-0..cp-2 joined and Ready.
func threeControlPlanes(t testing.TB, ctx context.Context) (*Clusters, kubernetes.Interface) {
	t.Helper()
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0", CoreDNS: "v1.12.1"}
	c, clusterCA, etcdCA, cs := controlPlaneCluster(t, ctx, rel)
	for _, n := range []string{"cp-1", "cp-2"} {
		if err := c.JoinControlPlane(ctx, "default/wl", n, rel, nil, clusterCA, etcdCA); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cp-0", "cp-1", "cp-2"} {
		if err := c.SetNode(ctx, "default/wl", NodeInfo{Name: n, ControlPlane: true, KubeletVersion: rel.Kubernetes, Ready: true}); err != nil {
			t.Fatal(err)
		}
	}
	return c, cs
}

func TestTheVIPAnswersWhileOneAPIServerRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := threeControlPlanes(t, ctx)
	events, stop := c.Subscribe()
	defer stop()
	get := func() error { _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); return err }

	c.StopNode(ctx, "default/wl", "cp-0")
	if err := get(); err != nil {
		t.Fatalf("two of three control planes up: %v", err)
	}
	c.StopNode(ctx, "default/wl", "cp-1")
	// Quorum is lost (one of three), the VIP still answers through cp-2:
	// reads and writes time out as against a real etcd.
	err := get()
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "etcdserver: request timed out") {
		t.Fatalf("read without quorum: %v, want etcd's timeout as a 500", err)
	}
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) {
		t.Fatalf("write without quorum: %v, want a 500", err)
	}
	c.StopNode(ctx, "default/wl", "cp-2")
	if err := get(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("no API server runs, the VIP answered: %v", err)
	}
	wantEvent(t, events, vocab.EventAPIUnavailable)

	// cp-0 boots again: one of three runs, still no quorum, VIP open.
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0"}
	ca := c.clusters["default/wl"].certs
	if err := c.JoinControlPlane(ctx, "default/wl", "cp-0", rel, nil, ca.clusterCA, ca.clusterCA); err == nil {
		t.Fatal("kubeadm upgrade node wrote its static pods without quorum")
	}
	wantEvent(t, events, vocab.EventAPIAvailable)
	// cp-1 too: quorum again, and what was written before is all there.
	c.setMember("default/wl", "cp-1", MemberRunning, "test")
	if err := get(); err != nil {
		t.Fatalf("two of three members back: %v", err)
	}
}

func TestEveryMembersDataGoneEmptiesTheCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := threeControlPlanes(t, ctx)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// KCP removes cp-2's member before its host is cleaned: nothing lost.
	c.memberRemoved("default/wl", "cp-2")
	c.StopNode(ctx, "default/wl", "cp-2")
	c.MemberDataLost(ctx, "default/wl", "cp-2")
	if h, _ := c.Health("default/wl"); h != HealthQuorum {
		t.Fatalf("after a removed member's wipe: %s", h)
	}
	// cp-1 wiped while it still voted: one of two runs, no quorum.
	c.StopNode(ctx, "default/wl", "cp-1")
	c.MemberDataLost(ctx, "default/wl", "cp-1")
	if h, m := c.Health("default/wl"); h != HealthNoQuorum || m["cp-1"] != MemberWiped {
		t.Fatalf("one of two voters wiped: %s %v", h, m)
	}
	// The last copy goes: the objects are gone.
	c.StopNode(ctx, "default/wl", "cp-0")
	c.MemberDataLost(ctx, "default/wl", "cp-0")
	if h, _ := c.Health("default/wl"); h != HealthDataLost {
		t.Fatalf("every voter wiped: %s", h)
	}
	cm := &corev1.ConfigMap{}
	err := c.manager.raw("default/wl").Get(ctx, client.ObjectKey{Namespace: "default", Name: "kept"}, cm)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the cluster's objects survived every member's data: %v", err)
	}
}

// appCluster is threeControlPlanes plus two Ready workers, with the lab's
// controllers at a fast scale.
func appCluster(t *testing.T, ctx context.Context) (*Clusters, kubernetes.Interface) {
	t.Helper()
	c, cs := threeControlPlanes(t, ctx)
	// A replacement takes a second to be Ready: long enough for a second
	// eviction to find the budget spent.
	c.timing = AppTiming{PodStart: time.Second, PodStop: 50 * time.Millisecond, NodeLost: 300 * time.Millisecond}
	c.scale = 1
	for _, n := range []string{"w-0", "w-1"} {
		if err := c.SetNode(ctx, "default/wl", NodeInfo{Name: n, KubeletVersion: "v1.35.3", Ready: true}); err != nil {
			t.Fatal(err)
		}
	}
	return c, cs
}

// A deleted control-plane Node's static pods go (pod GC of orphaned
// pods), so CAPI's etcd and kube-apiserver pod
// counts see only the nodes there are; the other nodes' stay.
func TestPodGCDeletesTheStaticPodsOfADeletedNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cs := appCluster(t, ctx)
	staticPods := func(node string) int {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				n++
			}
		}
		return n
	}
	if staticPods("cp-2") == 0 {
		t.Fatal("cp-2 has no static pods to begin with")
	}
	// A pod scheduled shows the lab's controllers have seen the nodes.
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a scheduled pod", func() bool { return len(readyPods(t, ctx, cs, "web")) == 1 })
	if err := cs.CoreV1().Nodes().Delete(ctx, "cp-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cp-2's static pods deleted", func() bool { return staticPods("cp-2") == 0 })
	if staticPods("cp-0") == 0 || staticPods("cp-1") == 0 {
		t.Fatal("the static pods of nodes that exist were collected")
	}
}

// kubeadm's add-ons run: CoreDNS's two replicas (on the control plane
// too, which they tolerate) and a kube-proxy pod on every node, with the
// status CAPI's upgrade spec waits on (observedGeneration caught up,
// every replica available).
func TestTheAddOnsRunPodsWithTheirStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	if err := c.InitObjects(ctx, "default/wl", Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0", CoreDNS: "v1.12.1"}, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "CoreDNS available and kube-proxy on all five nodes", func() bool {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil || d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas != 2 || d.Status.UpdatedReplicas != 2 {
			return false
		}
		ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		return err == nil && ds.Status.ObservedGeneration >= ds.Generation && ds.Status.NumberReady == 5 && ds.Status.DesiredNumberScheduled == 5
	})
	// Settled: the controllers stop writing once the status is written.
	d1, _ := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	time.Sleep(3 * controllerTick)
	d2, _ := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if d1.ResourceVersion != d2.ResourceVersion {
		t.Fatalf("the CoreDNS Deployment is rewritten at every tick (resourceVersion %s -> %s)", d1.ResourceVersion, d2.ResourceVersion)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readyPods(t *testing.T, ctx context.Context, cs kubernetes.Interface, app string) map[string]string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

func TestEvictionHonoursTheBudgetAndPodsMoveOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	events, stop := c.Subscribe()
	defer stop()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebBudget(t, ctx, cs, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))})
	waitFor(t, "three ready replicas and the budget's status", func() bool {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return len(readyPods(t, ctx, cs, "web")) == 3 && err == nil && b.Status.DisruptionsAllowed == 1
	})
	// Workers only: the control-plane taint keeps the pods off cp-*.
	nodes := map[string]int{}
	for _, n := range readyPods(t, ctx, cs, "web") {
		nodes[n]++
	}
	if len(nodes) != 2 || nodes["w-0"] == 0 || nodes["w-1"] == 0 {
		t.Fatalf("pods spread %v, want over w-0 and w-1 only", nodes)
	}
	var names []string
	for n := range readyPods(t, ctx, cs, "web") {
		names = append(names, n)
	}
	evict := func(name string) error {
		return cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})
	}
	if err := evict(names[0]); err != nil {
		t.Fatalf("first eviction with one disruption allowed: %v", err)
	}
	wantEvent(t, events, vocab.EventEvicted)
	err := evict(names[1])
	var st apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !errors.As(err, &st) || len(st.Status().Details.Causes) == 0 || st.Status().Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Fatalf("second eviction while the budget is spent: %v, want 429 with the DisruptionBudget cause", err)
	}
	wantEvent(t, events, vocab.EventEvictionDenied)
	// The evicted pod is replaced; then the budget allows one again.
	waitFor(t, "a replacement and the budget open again", func() bool {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return len(readyPods(t, ctx, cs, "web")) == 3 && err == nil && b.Status.DisruptionsAllowed == 1
	})
	if err := evict(names[1]); err != nil {
		t.Fatalf("eviction once the budget allows it: %v", err)
	}

	// Cordon w-0 and delete it: its pods go with it and come back on w-1.
	n, _ := cs.CoreV1().Nodes().Get(ctx, "w-0", metav1.GetOptions{})
	n.Spec.Unschedulable = true
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "w-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every replica on w-1", func() bool {
		pods := readyPods(t, ctx, cs, "web")
		for _, node := range pods {
			if node != "w-1" {
				return false
			}
		}
		return len(pods) == 3
	})
}

// Two evictions at once under a budget that allows one, while the
// disruption controller rewrites the budget: one is granted, the other
// refused, neither answered with a conflict (the budget is taken with
// optimistic concurrency and retried, as kube-apiserver does). Two
// evictions rarely interleave here; TestEvictionsRetryWhenTheBudgetIsRewritten
// is the one that breaks without the retry.
func TestConcurrentEvictionsTakeOneDisruption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cs := appCluster(t, ctx) // a replacement takes a second to be Ready: the budget stays spent meanwhile
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("web", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four ready replicas", func() bool { return len(readyPods(t, ctx, cs, "web")) == 4 })
	createWebBudget(t, ctx, cs, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3))})
	waitFor(t, "the budget allowing one", func() bool {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && b.Status.DisruptionsAllowed == 1
	})
	var names []string
	for n := range readyPods(t, ctx, cs, "web") {
		names = append(names, n)
	}
	errs := make(chan error, 2)
	for _, n := range names[:2] {
		go func() {
			errs <- cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n}})
		}()
	}
	granted, refused := 0, 0
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			granted++
		case apierrors.IsTooManyRequests(err):
			refused++
		default:
			t.Fatalf("an eviction answered %v, want granted or 429", err)
		}
	}
	if granted != 1 || refused != 1 {
		t.Fatalf("%d granted and %d refused of two evictions under one allowed disruption", granted, refused)
	}
}

// Every eviction succeeds under a budget that allows them all while
// another writer keeps rewriting the budget (the disruption controller
// does, every tick): the budget is taken with its resourceVersion and
// the step retried on conflict, never answered with a 409. With the
// retry taken out it failed 3 runs of 5 (a write lands between an
// eviction's read and its update); with it, 8 of 8 passed.
func TestEvictionsRetryWhenTheBudgetIsRewritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("web", 20), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebBudget(t, ctx, cs, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("100%"))})
	waitFor(t, "twenty ready replicas", func() bool { return len(readyPods(t, ctx, cs, "web")) == 20 })
	waitFor(t, "the budget allowing them all", func() bool {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && b.Status.DisruptionsAllowed >= 20
	})
	var names []string
	for n := range readyPods(t, ctx, cs, "web") {
		names = append(names, n)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // another writer of the budget, every 20 µs
		raw := c.manager.raw("default/wl")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b := &policyv1.PodDisruptionBudget{}
			if raw.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, b) == nil {
				b.Annotations = map[string]string{"rewrite": fmt.Sprint(i)}
				_ = raw.Update(ctx, b)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	for _, n := range names {
		if err := cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n}}); err != nil {
			t.Fatalf("evicting %s while the budget is rewritten: %v", n, err)
		}
	}
}

func TestAStatusSubresourceWritesOnlyTheStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cs := threeControlPlanes(t, ctx)
	n, err := cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true // ignored by the status subresource
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "Upgraded", Status: corev1.ConditionTrue})
	got, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("PUT nodes/cp-0/status: %v", err)
	}
	if got.Spec.Unschedulable || got.Status.Conditions[len(got.Status.Conditions)-1].Type != "Upgraded" {
		t.Fatalf("after the status update: unschedulable=%v conditions=%v", got.Spec.Unschedulable, got.Status.Conditions)
	}
	patched, err := cs.CoreV1().Nodes().Patch(ctx, "cp-0", "application/merge-patch+json",
		[]byte(`{"spec":{"unschedulable":true},"status":{"nodeInfo":{"kubeletVersion":"v9.9.9"}}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("PATCH nodes/cp-0/status: %v", err)
	}
	if patched.Spec.Unschedulable || patched.Status.NodeInfo.KubeletVersion != "v9.9.9" {
		t.Fatalf("after the status patch: unschedulable=%v kubelet=%s", patched.Spec.Unschedulable, patched.Status.NodeInfo.KubeletVersion)
	}
}

func wantEvent(t *testing.T, events <-chan Event, reason string) Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Reason == reason {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event", reason)
		}
	}
}

// A PATCH over HTTP (kubectl cordon, CAPI's drain) used to leave the
// object untyped in CAPI's store, and every typed read of its kind
// failed after it.
func TestAPatchedObjectStaysTyped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := threeControlPlanes(t, ctx)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "cp-1", "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := &corev1.NodeList{}
	if err := c.client("default/wl").List(ctx, nodes); err != nil {
		t.Fatalf("typed list after an HTTP patch: %v", err)
	}
	for _, n := range nodes.Items {
		if n.Name == "cp-1" && !n.Spec.Unschedulable {
			t.Fatal("the patch did not apply")
		}
	}
	// Uncordon as client-go's MergeFrom writes it: a null removes the
	// field (CAPI's store decoded the result over the old object, and
	// the node stayed cordoned).
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "cp-1", "application/merge-patch+json", []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{}
	if err := c.client("default/wl").Get(ctx, client.ObjectKey{Name: "cp-1"}, n); err != nil || n.Spec.Unschedulable {
		t.Fatalf("after the uncordon patch: unschedulable=%v err=%v", n.Spec.Unschedulable, err)
	}
	// A strategic merge patch of a list merges by the list's key.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "cp-1", "application/strategic-merge-patch+json",
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.client("default/wl").Get(ctx, client.ObjectKey{Name: "cp-1"}, n); err != nil || n.Labels["x"] != "y" || n.Labels["kubernetes.io/hostname"] != "cp-1" {
		t.Fatalf("after a strategic merge patch of a label: %v %v", n.Labels, err)
	}
}

// BenchmarkEviction is the Eviction API over HTTPS through CAPI's
// kubeconfig, as CAPI's drain calls it: each op evicts one Ready pod
// under a budget that allows it (reading the pod and its budgets, taking
// the disruption, deleting the pod).
func BenchmarkEviction(b *testing.B) {
	ctx := context.Background()
	c, _ := threeControlPlanes(b, ctx)
	// CAPI's own clients of a workload cluster are not held to
	// client-go's default 5 requests/s; nor is this one.
	cfg, err := c.AdminConfig("default/wl")
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs := kubernetes.NewForConfigOrDie(cfg)
	c.scale = 0 // pods start and stop at once
	if err := c.SetNode(ctx, "default/wl", NodeInfo{Name: "w-0", KubeletVersion: "v1.35.3", Ready: true}); err != nil {
		b.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bench"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("100%")), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%d", i)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: names[i], Labels: map[string]string{"app": "bench"}},
			Spec: corev1.PodSpec{NodeName: "w-0", Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// Every pod Ready and the budget counting them.
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "bench", metav1.GetOptions{})
		if err == nil && got.Status.CurrentHealthy == int32(b.N) && got.Status.DisruptionsAllowed == int32(b.N) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("budget never counted %d pods: %+v %v", b.N, got.Status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.ResetTimer()
	for _, name := range names {
		if err := cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}); err != nil {
			b.Fatal(err)
		}
	}
}

// The leader's host goes off: the two left elect a new leader, as etcd
// does, so KCP's MoveLeader away from a member it removes never has to
// reach the stopped one. Without quorum nobody becomes leader.
func TestARunningMemberBecomesLeaderWhenTheLeaderStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := threeControlPlanes(t, ctx)
	leader := func() string {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "component=etcd"})
		if err != nil {
			t.Fatal(err)
		}
		var name string
		var from time.Time
		for _, p := range pods.Items {
			if ts, err := time.Parse(time.RFC3339, p.Annotations[cloudv1.EtcdLeaderFromAnnotationName]); err == nil && ts.After(from) {
				name, from = p.Spec.NodeName, ts
			}
		}
		return name
	}
	if got := leader(); got != "cp-0" {
		t.Fatalf("leader %q; want cp-0, the first member", got)
	}
	events, stop := c.Subscribe()
	defer stop()
	if err := c.StopNode(ctx, "default/wl", "cp-0"); err != nil {
		t.Fatal(err)
	}
	if got := leader(); got != "cp-1" {
		t.Fatalf("after the leader stopped: leader %q; want cp-1", got)
	}
	wantEvent(t, events, vocab.EventEtcdLeader)
	// cp-1 stops too: no quorum, no election (and the API answers nothing
	// to read the leader with).
	if err := c.StopNode(ctx, "default/wl", "cp-1"); err != nil {
		t.Fatal(err)
	}
	c.setMember("default/wl", "cp-1", MemberRunning, "test")
	if got := leader(); got != "cp-1" {
		t.Fatalf("quorum back with the leader running: leader %q; want cp-1 still", got)
	}
}

// The controllers read a cluster when something changed, not at every
// tick, and still keep the modelled times: a scaled-up pod is Ready at
// its start time, not at the next full pass. The budget is there because
// its status write is one of the controllers' own: a write that changes
// what the next pass computes (the generation CAPI's store bumps) would
// make every tick a pass.
func TestTheControllersReadAClusterOnlyWhenSomethingChanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	c.timing.PodStart = 200 * time.Millisecond
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebBudget(t, ctx, cs, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	waitFor(t, "one Ready pod and the budget's status", func() bool {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return len(readyPods(t, ctx, cs, "web")) == 1 && err == nil && b.Status.DisruptionsAllowed == 1
	})
	time.Sleep(5 * controllerTick) // the status writes that follow
	st := c.appState("default/wl")
	before := st.passes.Load()
	quiet := 2 * fullPassEvery
	time.Sleep(quiet)
	if n := st.passes.Load() - before; n > 3 {
		t.Fatalf("%d passes over an unchanged cluster in %s (ticks: %d; full passes: %d)", n, quiet, quiet/controllerTick, quiet/fullPassEvery)
	}
	d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To(int32(2))
	scaled := time.Now()
	if _, err := cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two Ready pods", func() bool { return len(readyPods(t, ctx, cs, "web")) == 2 })
	if took, most := time.Since(scaled), c.timing.PodStart+fullPassEvery/2; took > most {
		t.Fatalf("the second pod took %s to be Ready; its start is %s (a missed deadline waits for the next full pass, %s)", took, c.timing.PodStart, fullPassEvery)
	}
}

// A disrupted pod's entry in a budget ends with time alone, which moves
// no resource version: the pass that keeps it asks for the pass that
// drops it, rather than leave it to the next full pass.
func TestABudgetsDisruptedPodWakesThePassThatDropsIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	pdb := createWebBudget(t, ctx, cs, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	cl := c.client("default/wl")
	if err := cl.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
		t.Fatal(err)
	}
	evicted := time.Now().Add(-time.Minute)
	pdb.Status.DisruptedPods = map[string]metav1.Time{"web-0": metav1.NewTime(evicted)}
	st := newAppState()
	now := time.Now()
	if err := c.disruption(ctx, cl, &world{budgets: []policyv1.PodDisruptionBudget{*pdb}}, st, now); err != nil {
		t.Fatal(err)
	}
	if want := evicted.Add(c.scale.Real(disruptionDeletionTimeout)); !st.due.Equal(want) {
		t.Fatalf("the pass woke at %v; want %v, when web-0's entry ends", st.due, want)
	}
}

// createWebBudget creates the budget "web" over the pods labelled
// app=web, with spec's minAvailable or maxUnavailable.
func createWebBudget(t *testing.T, ctx context.Context, cs kubernetes.Interface, spec policyv1.PodDisruptionBudgetSpec) *policyv1.PodDisruptionBudget {
	t.Helper()
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: spec}
	created, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}
