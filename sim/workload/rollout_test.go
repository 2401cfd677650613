package workload

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// podsNow are a namespace's pods of one label selector: the live ones
// (not terminating), and the images the Ready ones run.
func podsNow(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, selector string) (live int, readyImages []string) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		if podReady(&p) {
			readyImages = append(readyImages, p.Spec.Containers[0].Image)
		}
	}
	return live, readyImages
}

func allAre(images []string, want string) bool {
	for _, i := range images {
		if i != want {
			return false
		}
	}
	return true
}

// A Deployment's template change rolls through a new ReplicaSet: never
// more than replicas + maxSurge pods, never fewer than replicas -
// maxUnavailable Ready, until every replica runs the new image and the
// status says so.
func TestADeploymentRollsWithinMaxSurgeAndMaxUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	d := deployment("web", 4)
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four Ready pods", func() bool { return len(readyPods(t, ctx, cs, "web")) == 4 })
	d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "app:2"
	if _, err := cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sawBoth := false
	waitFor(t, "four Ready pods of app:2", func() bool {
		live, ready := podsNow(t, ctx, cs, "default", "app=web")
		if live > 5 {
			t.Fatalf("%d live pods; replicas 4 + maxSurge 1 allow 5", live)
		}
		if len(ready) < 4 {
			t.Fatalf("%d Ready pods (%v); replicas 4 - maxUnavailable 0 must stay Ready", len(ready), ready)
		}
		if !allAre(ready, "app:1") && !allAre(ready, "app:2") {
			sawBoth = true
		}
		return live == 4 && allAre(ready, "app:2")
	})
	if !sawBoth {
		t.Error("never saw old and new pods Ready together: not a rolling update")
	}
	waitFor(t, "the Deployment's status", func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.UpdatedReplicas == 4 && d.Status.Replicas == 4 && d.Status.AvailableReplicas == 4
	})
	// Through the store: CAPI's in-memory API server does not serve
	// ReplicaSets.
	sets := &appsv1.ReplicaSetList{}
	if err := c.client("default/wl").List(ctx, sets); err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 2 {
		t.Fatalf("%d ReplicaSets; want the old one, scaled to 0, and the new one", len(sets.Items))
	}
}

// A DaemonSet's template change replaces its pods node by node: never
// more than maxUnavailable (1) of its nodes without a Ready pod.
func TestADaemonSetRollsOneNodeAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	if err := c.InitObjects(ctx, "default/wl", Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0", CoreDNS: "v1.12.1"}, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kube-proxy Ready on five nodes", func() bool {
		_, ready := podsNow(t, ctx, cs, "kube-system", "k8s-app=kube-proxy")
		return len(ready) == 5
	})
	ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/kube-proxy:v1.36.3"
	if _, err := cs.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kube-proxy v1.36.3 Ready on five nodes", func() bool {
		_, ready := podsNow(t, ctx, cs, "kube-system", "k8s-app=kube-proxy")
		if len(ready) < 4 {
			t.Fatalf("%d of 5 nodes with a Ready kube-proxy; maxUnavailable 1", len(ready))
		}
		return len(ready) == 5 && allAre(ready, "registry.k8s.io/kube-proxy:v1.36.3")
	})
	waitFor(t, "the DaemonSet's status", func() bool {
		ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		return err == nil && ds.Status.UpdatedNumberScheduled == 5 && ds.Status.NumberReady == 5
	})
}

// A budget over a Deployment's pods expects the Deployment's replicas,
// whichever of its ReplicaSets the pods belong to, as the disruption
// controller finds them through the ReplicaSets' owner.
func TestABudgetExpectsTheDeploymentsReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cs := appCluster(t, ctx)
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createWebBudget(t, ctx, cs, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))})
	waitFor(t, "the budget's status over three Ready pods", func() bool {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && b.Status.CurrentHealthy == 3
	})
	b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.ExpectedPods != 3 || b.Status.DisruptionsAllowed != 1 {
		t.Fatalf("budget expects %d pods and allows %d disruptions; want the Deployment's 3 and 1", b.Status.ExpectedPods, b.Status.DisruptionsAllowed)
	}
}

// Recreate takes the old ReplicaSets to zero and starts the new one only
// once their pods are gone, terminating ones included.
func TestRecreateStartsTheNewReplicaSetOnceTheOldPodsAreGone(t *testing.T) {
	d := deployment("web", 2)
	d.UID = "d"
	d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	old, current := newReplicaSet(d, "old"), newReplicaSet(d, "new")
	old.UID, current.UID = "rs-old", "rs-new"
	two := int32(2)
	old.Spec.Replicas = &two
	w := &world{}
	for _, name := range []string{"a", "b"} {
		p := newPod("default", old.Name, "ReplicaSet", old.UID, old.Spec.Template, "n")
		p.Name = "web-" + name
		w.pods = append(w.pods, p)
	}
	c := &Clusters{}
	scale := c.scaleDeployment(w, d, current, []*appsv1.ReplicaSet{old})
	if n, ok := scale[old]; !ok || n != 0 {
		t.Fatalf("old ReplicaSet scaled to %v (%v); want 0", n, ok)
	}
	if _, ok := scale[current]; ok {
		t.Fatalf("the new ReplicaSet scaled to %d while the old pods run", scale[current])
	}
	now := metav1.Now()
	for _, p := range w.pods {
		p.DeletionTimestamp = &now
	}
	zero := int32(0)
	old.Spec.Replicas = &zero
	if scale := c.scaleDeployment(w, d, current, []*appsv1.ReplicaSet{old}); len(scale) != 0 {
		t.Fatalf("scaled %v while the old pods terminate; want nothing", scale)
	}
	w.pods = nil
	if scale := c.scaleDeployment(w, d, current, []*appsv1.ReplicaSet{old}); scale[current] != 2 {
		t.Fatalf("the new ReplicaSet scaled to %d once the old pods are gone; want 2", scale[current])
	}
}

// A paused Deployment's template change makes no ReplicaSet.
func TestAPausedDeploymentDoesNotRoll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, cs := appCluster(t, ctx)
	d := deployment("web", 1)
	d.Spec.Paused = true
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Deployment's status", func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration > 0
	})
	sets := &appsv1.ReplicaSetList{}
	if err := c.client("default/wl").List(ctx, sets); err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 0 {
		t.Fatalf("a paused Deployment made %d ReplicaSet(s)", len(sets.Items))
	}
}
