package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/providers/baremetal/callback"
	"github.com/upgradelab/upgradelab/sim/agent"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// registeredHost finds the BareMetalHost a lab host registered as.
func (e *providerEnv) registeredHost(ctx context.Context, hostname string) (*metal3.BareMetalHost, error) {
	hosts := &metal3.BareMetalHostList{}
	if err := e.c.List(ctx, hosts, client.InNamespace(e.ns), client.HasLabels{callback.PoolLabel}); err != nil {
		return nil, err
	}
	for i := range hosts.Items {
		if hosts.Items[i].Annotations[callback.HostnameAnnotation] == hostname {
			return &hosts.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no BareMetalHost registered by %s among %d", hostname, len(hosts.Items))
}

// Elemental style: hosts register themselves into a pool; a released host
// is reset (recovery wipes and reinstalls it) and registers again under a
// new identity, the old object going only then. The first reset stalls (a
// power cut during the recovery boot brings the host back in its
// installed OS) and the provider asks again.
func TestRegistrationPoolResetsHostsUnderNewIdentities(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "reset", 0.01, "--reset-timeout=3s")
	url := reference.RegistrationURL(e.callback, e.ns, "elemental")
	e.joinRegistrationPool(t, ctx, url)

	old, err := e.registeredHost(ctx, "node-0")
	if err != nil {
		t.Fatal(err)
	}
	e.provisionHost(t, ctx, old)
	node0, _ := e.site.Lab.Host("node-0")
	waitFor(t, ctx, "node-0 running its installed OS", func() (bool, string) {
		st := node0.Status()
		return st.OS != nil && st.OS.Source == lab.FromDisk, fmt.Sprintf("%+v", st.OS)
	})
	if err := node0.SetPersistent("app/data", "precious"); err != nil {
		t.Fatal(err)
	}

	// Cut the power as the first reset's recovery boot starts.
	events, stop := e.site.Lab.Subscribe()
	defer stop()
	stalled := make(chan string, 1)
	var requests atomic.Int32
	go func() {
		cut := false
		for ev := range events {
			if ev.Host == "node-0" && ev.Reason == "RecoveryBootRequested" {
				requests.Add(1)
			}
			if ev.Host == "node-0" && ev.Reason == "RecoveryBoot" && !cut {
				cut = true
				still := "old object present"
				if _, err := e.registeredHost(ctx, "node-0"); err != nil {
					still = err.Error()
				}
				node0.PowerOff()
				node0.PowerOn()
				stalled <- still
			}
		}
	}()
	old = e.host(t, ctx, old.Name)
	patch := client.MergeFrom(old.DeepCopy())
	old.Spec.ConsumerRef, old.Spec.Image = nil, nil
	if err := e.c.Patch(ctx, old, patch); err != nil {
		t.Fatal(err)
	}
	select {
	case still := <-stalled:
		if still != "old object present" {
			t.Fatalf("when the reset began: %s; the old object must stay until the reset has finished", still)
		}
	case <-ctx.Done():
		t.Fatal("node-0 never began a recovery boot")
	}

	var fresh *metal3.BareMetalHost
	waitFor(t, ctx, "node-0 registered anew and the old object gone", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(old), &metal3.BareMetalHost{})
		fresh, _ = e.registeredHost(ctx, "node-0")
		gone := apierrors.IsNotFound(err)
		return gone && fresh != nil && fresh.Name != old.Name && fresh.Status.Provisioning.State == metal3.StateAvailable,
			fmt.Sprintf("old %s gone=%v; new %v", old.Name, gone, fresh != nil)
	})
	if fresh.Annotations[callback.MachineIDAnnotation] == old.Annotations[callback.MachineIDAnnotation] {
		t.Fatalf("node-0 re-registered with its old machine ID %s", fresh.Annotations[callback.MachineIDAnnotation])
	}
	persistent := node0.Persistent()
	if _, kept := persistent["app/data"]; kept || persistent[agent.MachineIDFile] != fresh.Annotations[callback.MachineIDAnnotation] {
		t.Fatalf("node-0's persistent partition after the reset: %v; want the data gone and only the new machine ID", persistent)
	}
	if n := requests.Load(); n < 2 {
		t.Fatalf("node-0 was asked to reset %d time(s); the stalled reset must be asked again", n)
	}
	if !strings.HasPrefix(fresh.Name, "elemental-") {
		t.Fatalf("new object %s: want it named after its pool", fresh.Name)
	}
}

// joinRegistrationPool has every host of the lab register itself at url
// (its seed media booted) and waits for all four available.
func (e *providerEnv) joinRegistrationPool(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	for _, h := range e.site.Lab.Hosts() {
		if err := e.site.JoinRegistrationPool(h.Name(), url); err != nil {
			t.Fatal(err)
		}
		if err := h.PowerOn(); err != nil { // the operator boots the seed media
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "4 hosts registered and available", func() (bool, string) {
		hosts := &metal3.BareMetalHostList{}
		if err := e.c.List(ctx, hosts, client.InNamespace(e.ns), client.MatchingLabels{callback.PoolLabel: "elemental"}); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, h := range hosts.Items {
			if h.Status.Provisioning.State == metal3.StateAvailable {
				n++
			}
		}
		return n == 4, fmt.Sprintf("%d of %d available", n, len(hosts.Items))
	})
}

// provisionHost gives a registered host a consumer and the v1.35.3 image
// and waits for it provisioned.
func (e *providerEnv) provisionHost(t *testing.T, ctx context.Context, old *metal3.BareMetalHost) {
	t.Helper()
	img, _ := e.site.Lab.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.35.3")
	patch := client.MergeFrom(old.DeepCopy()) // the host controller writes it too
	old.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: e.ns, Name: "test-consumer"}
	old.Spec.Image = &metal3.Image{URL: e.site.Lab.ImageServer().ImageURL(img.Name), Checksum: img.SHA256, ChecksumType: metal3.SHA256}
	if err := e.c.Patch(ctx, old, patch); err != nil {
		t.Fatal(err)
	}
	e.waitHostState(t, ctx, old.Name, metal3.StateProvisioned)
}
