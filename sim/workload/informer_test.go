package workload

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// An informer (controller-runtime's cache, as CAPI's ClusterCache
// keeps one per workload cluster) whose watch the VIP's failover
// dropped lists again and keeps every object: client-go lists with a
// watch that asks for the initial events from its last version.
func TestAnInformerKeepsItsObjectsAcrossAFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0"}
	c, clusterCA, etcdCA, cs := controlPlaneClusterWith(t, ctx, rel, Options{Scale: 0.01})
	for _, n := range []string{"cp-1", "cp-2"} {
		if err := c.JoinControlPlane(ctx, "default/wl", n, rel, nil, clusterCA, etcdCA); err != nil {
			t.Fatal(err)
		}
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	informers, err := cache.New(adminConfig(t, c), cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	informers.WaitForCacheSync(ctx)
	cached := func() map[string]bool {
		l := &corev1.NamespaceList{}
		if err := informers.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, ns := range l.Items {
			out[ns.Name] = true
		}
		return out
	}
	if !cached()["kube-system"] {
		t.Fatalf("before the failover the cache lists %v", cached())
	}

	c.memberRemoved("default/wl", "cp-0") // the holder's API server goes with its member
	time.Sleep(2 * time.Second)           // the reflector's backoff, then its new list
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for !cached()["after"] {
		if ctx.Err() != nil {
			t.Fatal("the informer never saw a namespace made after the failover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := cached(); !got["kube-system"] || !got["default"] {
		t.Errorf("after the failover the cache lists %v; want every namespace", got)
	}
}
