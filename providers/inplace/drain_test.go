package inplace

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// drainCluster is a workload cluster of the lab (real Eviction API and
// budgets, the lab's scheduler and kubelets) with one control plane and
// workers w-0 and w-1, and an application of two replicas on the workers
// under a budget of minAvailable.
func drainCluster(t *testing.T, ctx context.Context, minAvailable int32) client.Client {
	t.Helper()
	clusters, ep := labtest.Workload(t, "default/wl")
	clusterCA, etcdCA := labtest.ClusterCAs(t)
	if err := clusters.JoinControlPlane(ctx, "default/wl", "cp-0", workload.Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0"}, nil, clusterCA, etcdCA); err != nil {
		t.Fatal(err)
	}
	for _, n := range []workload.NodeInfo{{Name: "cp-0", ControlPlane: true, Ready: true}, {Name: "w-0", Ready: true}, {Name: "w-1", Ready: true}} {
		if err := clusters.SetNode(ctx, "default/wl", n); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := kubeconfig.New("wl", fmt.Sprintf("https://%s:%d", ep.Host, ep.Port), clusterCA.Cert, clusterCA.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	wl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(minAvailable)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	for _, o := range []client.Object{dep, pdb} {
		if err := wl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "two ready replicas", func() bool { return len(readyOn(ctx, wl, "")) == 2 })
	return wl
}

// readyOn lists the ready, not terminating web pods (on node, or on any).
func readyOn(ctx context.Context, wl client.Client, node string) []string {
	pods := &corev1.PodList{}
	if err := wl.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}
		if ready && p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) {
			out = append(out, p.Name)
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDrainEvictsWithinTheBudgetAndWaitsForThePodsToGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wl := drainCluster(t, ctx, 1)
	node := &corev1.Node{}
	if err := wl.Get(ctx, client.ObjectKey{Name: "w-0"}, node); err != nil {
		t.Fatal(err)
	}
	var d drained
	waitUntil(t, "w-0 drained", func() bool {
		var err error
		if d, err = cordonAndDrain(ctx, wl, node); err != nil {
			t.Fatal(err)
		}
		return d.done
	})
	if !node.Spec.Unschedulable {
		t.Fatal("the drained node is not cordoned")
	}
	// The pod that was on w-0 was evicted, not deleted out of turn: the
	// budget held, and its replacement runs on w-1.
	waitUntil(t, "both replicas on w-1", func() bool { return len(readyOn(ctx, wl, "w-1")) == 2 })
}

func TestADrainTheBudgetNeverAllowsFailsTheUpdateAtItsDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wl := drainCluster(t, ctx, 2) // two replicas, both must stay: no eviction is ever allowed
	node := &corev1.Node{}
	if err := wl.Get(ctx, client.ObjectKey{Name: "w-0"}, node); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = infrav1.AddToScheme(scheme)
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w-0"}}
	u := &Updater{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(bmm).Build(), DrainTimeout: 300 * time.Millisecond}

	p, ok, err := u.drain(ctx, bmm, wl, node, "img")
	if err != nil || ok || p.failed || !strings.Contains(p.message, "eviction refused") || !strings.Contains(p.message, "needs 2 healthy pods") {
		t.Fatalf("first drain step: %+v ok=%v err=%v, want running with the budget's refusal named", p, ok, err)
	}
	if len(readyOn(ctx, wl, "w-0")) != 1 {
		t.Fatal("the pod the budget protects left w-0")
	}
	time.Sleep(400 * time.Millisecond)
	p, ok, err = u.drain(ctx, bmm, wl, node, "img")
	if err != nil || ok || !p.failed || !strings.Contains(p.message, "did not finish in 300ms") || !strings.Contains(p.message, "nothing was changed") {
		t.Fatalf("past the deadline: %+v ok=%v err=%v, want a Failure naming the deadline", p, ok, err)
	}
	if bmm.Annotations[FailedAnnotation] == "" {
		t.Fatal("the failure is not kept on the BareMetalMachine")
	}
}
