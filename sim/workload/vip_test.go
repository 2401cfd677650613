package workload

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// The VIP is kube-vip's: held by one node, down while its holder's lease
// runs out, hanging when the holder's host is gone and refusing when
// only its API server is, then taken by a node whose API server runs.
// A node that is not the holder comes and goes unseen.
func TestTheVIPFailsOverAfterKubeVIPsLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const scale = 0.02 // the 5 s lease is 100 ms
	lease := timescale.Scale(scale).Real(VIPLeaseDuration)
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0"}
	c, clusterCA, etcdCA, cs := controlPlaneClusterWith(t, ctx, rel, Options{Scale: scale})
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "cp-4"} {
		if err := c.JoinControlPlane(ctx, "default/wl", n, rel, nil, clusterCA, etcdCA); err != nil {
			t.Fatal(err)
		}
	}
	events, stop := c.Subscribe()
	defer stop()
	quick := kubernetes.NewForConfigOrDie(rest.CopyConfig(adminConfig(t, c)))
	quick.CoreV1().RESTClient().(*rest.RESTClient).Client.Timeout = 30 * time.Millisecond

	if err := c.StopNode(ctx, "default/wl", "cp-4"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("with a node that does not hold the VIP gone: %v", err)
	}

	// The holder's host goes: connections hang until the lease runs out.
	if err := c.StopNode(ctx, "default/wl", "cp-0"); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := quick.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the holder's host gone: %v, want a timeout", err)
	}
	awaitAnswer(t, ctx, cs)

	// The new holder's API server crash-loops on a running host:
	// connections are refused until its lease runs out.
	refused := StaticPodArgs{KubeAPIServer: {"feature-gates": "ServiceTrafficDistribution=true"}}
	if err := c.JoinControlPlane(ctx, "default/wl", "cp-1", Release{Kubernetes: "v1.36.3", Etcd: "3.6.5-0"}, refused, clusterCA, etcdCA); err != nil {
		t.Fatal(err)
	}
	if _, err := quick.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the holder's API server crash-looping: %v, want connection refused", err)
	}
	awaitAnswer(t, ctx, cs)

	var said []string
	var at []time.Time
	for len(said) < 4 {
		select {
		case e := <-events:
			if e.Reason == vocab.EventAPIAvailable || e.Reason == vocab.EventAPIUnavailable {
				said, at = append(said, e.Message), append(at, e.Time)
			}
		case <-ctx.Done():
			t.Fatalf("VIP events: %q", said)
		}
	}
	for i := 0; i < 4; i += 2 {
		if down := at[i+1].Sub(at[i]); down < lease || down > lease+time.Second {
			t.Errorf("the VIP was down %s (%q to %q), want kube-vip's lease, %s", down, said[i], said[i+1], lease)
		}
	}
	for i, want := range []string{"its host is gone, so connections hang", "kube-vip on cp-1 took the VIP when the lease of cp-0 ran out",
		"crash-loops", "kube-vip on cp-2 took the VIP when the lease of cp-1 ran out"} {
		if !strings.Contains(said[i], want) {
			t.Errorf("VIP event %d: %q, want %q", i, said[i], want)
		}
	}
}

// awaitAnswer waits for the API to answer again.
func awaitAnswer(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	for {
		if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the API never answered again")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func adminConfig(t *testing.T, c *Clusters) *rest.Config {
	t.Helper()
	cfg, err := c.AdminConfig("default/wl")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
