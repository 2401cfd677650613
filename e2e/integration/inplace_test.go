package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// machineIdentity is what an in-place update must keep.
type machineIdentity struct {
	uid, providerID, host string
}

func (e *providerEnv) machineIdentities(t *testing.T, ctx context.Context, cluster string) map[string]machineIdentity {
	t.Helper()
	machines := &clusterv1.MachineList{}
	if err := e.c.List(ctx, machines, client.InNamespace(e.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		t.Fatal(err)
	}
	out := map[string]machineIdentity{}
	for _, m := range machines.Items {
		bmm := &infrav1.BareMetalMachine{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: m.Spec.InfrastructureRef.Name}, bmm); err != nil {
			t.Fatal(err)
		}
		out[m.Name] = machineIdentity{uid: string(m.UID), providerID: m.Spec.ProviderID, host: bmm.Status.Host}
	}
	return out
}

// A 3-node control plane with KCP maxSurge 0 and two workers (MD
// maxSurge 0) are upgraded in place through CanUpdateMachine and
// CanUpdateMachineSet, across a kill of the extension mid-update: the
// same Machines (names, UIDs, provider IDs) on the same hosts end at the
// new version, each host running the new image from its other slot, with
// its persistent data kept. The new image's i40e driver comes with NVM
// 9.50, which the old driver would warn about: each host is imaged
// first and flashed after.
func TestInPlaceUpgradeKeepsEveryMachine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, envOptions{lab: "cold-spare", scale: 0.01, extension: true})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	vars := e.clusterVars(t, ctx, "ip", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 3, 2, 0, false)
	vars["MD_MAX_SURGE"], vars["MD_MAX_UNAVAILABLE"] = "0", "1"
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)
	e.waitRolledOut(t, ctx, "ip", 3, 2, "v1.35.3")
	before := e.machineIdentities(t, ctx, "ip")
	for _, id := range before {
		h, err := e.site.Lab.Host(id.host)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.SetPersistent("app/marker", "written before the upgrade on "+id.host); err != nil {
			t.Fatal(err)
		}
	}

	const newImage = "ubuntu-24.04-k8s-v1.36.3-i40e-2.28"
	histories := map[string]*hostHistory{}
	for _, id := range before {
		histories[id.host] = recordHost(t, e.site.Lab, id.host)
	}
	next := e.withNICFirmware(e.clusterVars(t, ctx, "ip", "v1.36.3", newImage, "v1-36", 3, 2, 0, false), "x710-nvm-9.50")
	next["MD_MAX_SURGE"], next["MD_MAX_UNAVAILABLE"] = "0", "1"
	e.upgrade(t, ctx, "ip", next)
	// The extension is killed while a machine updates: the next call of
	// the restarted one picks the update up from what the host reports.
	waitFor(t, ctx, "a machine updating in place", func() (bool, string) {
		machines := &clusterv1.MachineList{}
		if err := e.c.List(ctx, machines, client.InNamespace(e.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "ip"}); err != nil {
			return false, err.Error()
		}
		for _, m := range machines.Items {
			if _, ok := m.Annotations[clusterv1.UpdateInProgressAnnotation]; ok {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d machines, none updating", len(machines.Items))
	})
	if err := e.plane.KillAndRestart(ctx, "inplace"); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut(t, ctx, "ip", 3, 2, "v1.36.3")

	e.checkSameMachines(t, ctx, "ip", before, func(id machineIdentity, h *lab.Host) {
		st := h.Status()
		if b := st.Disk.Images().Booted; st.OS == nil || st.OS.Source != lab.FromDisk || st.OS.Image.Name != newImage || b == nil || !b.Committed {
			t.Errorf("host %s after the update: %+v; want the new image committed (on either kind of disk)", id.host, st.OS)
		}
		committed, flashed := histories[id.host].first("RootCommitted", "", ""), histories[id.host].first("FlashStarted", "nvm", "x710-nvm-9.50")
		if nvmOf(h) != "9.50" || committed < 0 || flashed < committed {
			t.Errorf("host %s: NVM %q, slot committed at event %d, flash started at %d; want 9.50 flashed after the image was committed: %s", id.host, nvmOf(h), committed, flashed, histories[id.host])
		}
		if got := h.Persistent()["app/marker"]; !strings.Contains(got, id.host) {
			t.Errorf("host %s lost its persistent data: %q", id.host, got)
		}
		e.checkInventoryAfterUpdate(t, ctx, id.host, newImage)
	})
}

// checkInventoryAfterUpdate: the machine tells what host runs now, the
// host's HostFirmwareComponents its NVM; the BareMetalHost stays
// provisioned with the image it was provisioned with, which
// baremetal-operator would otherwise wipe it for.
func (e *providerEnv) checkInventoryAfterUpdate(t *testing.T, ctx context.Context, host, newImage string) {
	t.Helper()
	img, _ := e.site.Lab.Definition().Catalog.Get(newImage)
	waitFor(t, ctx, "BareMetalMachine of "+host+" naming the new image, its host the NVM", func() (bool, string) {
		bmm := e.machineOn(t, ctx, "ip", host)
		hfc := &metal3.HostFirmwareComponents{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: host}, hfc); err != nil {
			return false, err.Error()
		}
		nvm := ""
		for _, c := range hfc.Status.Components {
			if c.Component == "nic:eno1" {
				nvm = c.CurrentVersion
			}
		}
		return bmm.Status.Image != nil && bmm.Status.Image.Checksum == img.SHA256 && strings.Contains(nvm, "9.50"),
			fmt.Sprintf("status.image %+v, nic:eno1 %q", bmm.Status.Image, nvm)
	})
	if bmh := e.host(t, ctx, host); bmh.Status.Provisioning.State != metal3.StateProvisioned || bmh.Spec.Image.URL != bmh.Status.Provisioning.Image.URL ||
		bmh.Status.Provisioning.Image.Checksum == img.SHA256 {
		t.Errorf("BareMetalHost %s after the update: %s, spec.image %s, provisioned %s; want its provisioned image left alone",
			host, bmh.Status.Provisioning.State, bmh.Spec.Image.URL, bmh.Status.Provisioning.Image.URL)
	}
}

// machineOn is the BareMetalMachine of cluster bound to host.
func (e *providerEnv) machineOn(t *testing.T, ctx context.Context, cluster, host string) *infrav1.BareMetalMachine {
	t.Helper()
	list := &infrav1.BareMetalMachineList{}
	if err := e.c.List(ctx, list, client.InNamespace(e.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Status.Host == host {
			return &list.Items[i]
		}
	}
	t.Fatalf("no BareMetalMachine of %s is bound to %s", cluster, host)
	return nil
}

// checkSameMachines fails unless the cluster's Machines are the ones of
// before, each on its host under the same UID and providerID; onHost
// checks each host further.
func (e *providerEnv) checkSameMachines(t *testing.T, ctx context.Context, cluster string, before map[string]machineIdentity, onHost func(id machineIdentity, h *lab.Host)) {
	t.Helper()
	after := e.machineIdentities(t, ctx, cluster)
	if fmt.Sprint(sortedKeys(after)) != fmt.Sprint(sortedKeys(before)) {
		t.Fatalf("machines before %v, after %v; an in-place update keeps every Machine", sortedKeys(before), sortedKeys(after))
	}
	for name, id := range before {
		if after[name] != id {
			t.Errorf("machine %s: before %+v, after %+v", name, id, after[name])
		}
		h, err := e.site.Lab.Host(id.host)
		if err != nil {
			t.Fatal(err)
		}
		onHost(id, h)
	}
}

// waitUpdateFailed waits for CAPI to show a machine's in-place update
// failed and returns what the extension recorded as the reason (CAPI's
// condition says only that the hook failed).
func (e *providerEnv) waitUpdateFailed(t *testing.T, ctx context.Context, machine string) string {
	t.Helper()
	m := &clusterv1.Machine{}
	waitFor(t, ctx, "machine "+machine+" Updating=False with InPlaceUpdateFailed", func() (bool, string) {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: machine}, m); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpdatingCondition)
		if c == nil {
			return false, "no Updating condition"
		}
		return c.Reason == clusterv1.MachineInPlaceUpdateFailedReason, c.Reason + ": " + c.Message
	})
	bmm := &infrav1.BareMetalMachine{}
	var why string
	waitFor(t, ctx, "BareMetalMachine of "+machine+" InPlaceUpdated=False with InPlaceUpdateFailed", func() (bool, string) {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: m.Spec.InfrastructureRef.Name}, bmm); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(bmm.Status.Conditions, infrav1.InPlaceUpdatedCondition)
		if c == nil {
			return false, "no InPlaceUpdated condition"
		}
		why = c.Message
		return c.Status == metav1.ConditionFalse && c.Reason == infrav1.InPlaceUpdateFailedReason, c.Reason + ": " + c.Message
	})
	return why
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// An image whose health check fails (its preview driver cannot talk to
// the NIC's NVM, the port stays down): the host falls back to its old
// slot, the Node is Ready at the old version again, the Machine's
// Updating condition shows the failure, the extension says why on the
// BareMetalMachine, and the persistent data is still there.
func TestInPlaceUpdateWithAFailingHealthCheckFallsBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, envOptions{lab: "three-node", scale: 0.01, extension: true, extensionArgs: []string{"--health-grace=2s"}})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	vars := e.clusterVars(t, ctx, "hc", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 1, 1, 1, false)
	vars["MD_MAX_SURGE"], vars["MD_MAX_UNAVAILABLE"] = "0", "1"
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)
	e.waitRolledOut(t, ctx, "hc", 1, 1, "v1.35.3")
	var worker string
	var id machineIdentity
	for name, m := range e.machineIdentities(t, ctx, "hc") {
		if strings.HasPrefix(name, "hc-md-") {
			worker, id = name, m
		}
	}
	host, _ := e.site.Lab.Host(id.host)
	if err := host.SetPersistent("app/marker", "kept"); err != nil {
		t.Fatal(err)
	}

	bad := e.clusterVars(t, ctx, "hc", "v1.36.3", "ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview", "preview", 1, 1, 1, false)
	bad["MD_MAX_SURGE"], bad["MD_MAX_UNAVAILABLE"] = "0", "1"
	e.upgradeWorkers(t, ctx, "hc", bad)

	why := e.waitUpdateFailed(t, ctx, worker)
	waitFor(t, ctx, "the host back on its old image, Ready at v1.35.3", func() (bool, string) {
		st := host.Status()
		b := st.Disk.Images().Booted
		ok := st.OS != nil && st.OS.Source == lab.FromDisk && st.OS.Image.Name == "ubuntu-24.04-k8s-v1.35.3" && b != nil && b.Committed
		return ok, fmt.Sprintf("%+v", st.OS)
	})
	e.waitNodeVersion(t, ctx, "hc", worker, "v1.35.3")
	m := &clusterv1.Machine{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: worker}, m); err != nil || string(m.UID) != id.uid {
		t.Fatalf("machine %s after the failed update: %v (uid %s, was %s); want the same Machine", worker, err, m.UID, id.uid)
	}
	if !strings.Contains(why, "health check") || !strings.Contains(why, "link down") {
		t.Fatalf("the BareMetalMachine says %q; want the failed health check and its reason", why)
	}
	if got := host.Persistent()["app/marker"]; got != "kept" {
		t.Fatalf("persistent data after the fallback: %q", got)
	}
}

// waitNodeVersion waits for the Node of a Machine to be Ready at version.
func (e *providerEnv) waitNodeVersion(t *testing.T, ctx context.Context, cluster, machine, version string) {
	t.Helper()
	cs := e.workloadClient(t, ctx, cluster)
	waitFor(t, ctx, "node "+machine+" Ready at "+version, func() (bool, string) {
		n, err := cs.CoreV1().Nodes().Get(ctx, machine, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(n) && n.Status.NodeInfo.KubeletVersion == version, fmt.Sprintf("kubelet %s, conditions %v", n.Status.NodeInfo.KubeletVersion, n.Status.Conditions)
	})
}
