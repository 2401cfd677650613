package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/internal/vocab"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/inplace/singlenode"
)

// Finding: upstream KCP cannot upgrade a one-machine control plane in
// place without a spare host. With the InPlaceUpdates gate on and the
// extension registered, KCP (1 replica; maxSurge 0 is refused below 3)
// still creates a surge Machine first, and on a single-host lab that
// Machine waits for a host forever while the old one is never touched.
func TestPlainKCPWithOneReplicaStallsWithoutASpareHost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, envOptions{lab: "single-node", scale: 0.01, extension: true})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	vars := e.clusterVars(t, ctx, "sn", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 1, 0, 1, false)
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)
	e.waitRolledOut(t, ctx, "sn", 1, 0, "v1.35.3")
	before := e.machineIdentities(t, ctx, "sn")

	e.upgrade(t, ctx, "sn", e.clusterVars(t, ctx, "sn", "v1.36.3", "ubuntu-24.04-k8s-v1.36.3", "v1-36", 1, 0, 1, false))
	var surge string
	waitFor(t, ctx, "KCP's surge Machine waiting for a host", func() (bool, string) {
		machines := &clusterv1.MachineList{}
		if err := e.c.List(ctx, machines, client.InNamespace(e.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: "sn"}); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, m := range machines.Items {
			if _, old := before[m.Name]; old {
				continue
			}
			bmm := &infrav1.BareMetalMachine{}
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: m.Spec.InfrastructureRef.Name}, bmm); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(bmm.Status.Conditions, infrav1.HostAssociatedCondition)
			if c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.WaitingForHostReason {
				surge = m.Name + " (" + c.Message + ")"
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s %v", m.Name, c))
		}
		return false, strings.Join(seen, "; ")
	})
	t.Logf("stalled: surge machine %s", surge)

	// It stays so: the old Machine is neither updated nor deleted.
	time.Sleep(10 * time.Second)
	for name, id := range before {
		m := &clusterv1.Machine{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, m); err != nil {
			t.Fatalf("the original machine %s: %v", name, err)
		}
		if m.Spec.Version != "v1.35.3" || string(m.UID) != id.uid || !m.DeletionTimestamp.IsZero() {
			t.Fatalf("the original machine %s changed: version %s, deleting %v", name, m.Spec.Version, !m.DeletionTimestamp.IsZero())
		}
		if _, inPlace := m.Annotations[clusterv1.UpdateInProgressAnnotation]; inPlace {
			t.Fatalf("KCP started an in-place update of %s; the finding no longer holds", name)
		}
	}
}

// The shipped way for one node, on a plain and on a ClusterClass
// cluster: with the single-node annotation on the KCP, the same Machine
// (name, UID, providerID, host, Node) ends at the new version through
// CAPI's own in-place protocol, with its persistent data, KCP
// upToDateReplicas == 1, and no second Machine ever existing.
func TestSingleNodeControlPlaneUpdatesInPlace(t *testing.T) {
	t.Parallel()
	for _, clusterClass := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "clusterclass"}[clusterClass]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			singleNodeInPlace(t, clusterClass)
		})
	}
}

// createSingleNode creates cluster "one" at v1.35.3, plain or from the
// ClusterClass, with its control plane annotated for the single-node
// in-place update (on the KCP, or through the topology's metadata).
func (e *providerEnv) createSingleNode(t *testing.T, ctx context.Context, clusterClass bool, images map[string]string) {
	t.Helper()
	if clusterClass {
		vars := e.topologyVars(t, ctx, "one", "v1.35.3", images, 1, 0, 1)
		e.apply(t, ctx, "clusterclass.yaml", vars)
		e.apply(t, ctx, "cluster-topology.yaml", vars)
		// Topology metadata reaches the KCP.
		cluster := &clusterv1.Cluster{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "one"}, cluster); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Topology.ControlPlane.Metadata.Annotations = map[string]string{singlenode.Annotation: "true"}
		if err := e.c.Patch(ctx, cluster, patch); err != nil {
			t.Fatal(err)
		}
	} else {
		vars := e.clusterVars(t, ctx, "one", "v1.35.3", images["v1.35.3"], "v1-35", 1, 0, 1, false)
		e.apply(t, ctx, "machine-templates.yaml", vars)
		e.apply(t, ctx, "cluster.yaml", vars)
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "one-cp"}, kcp); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(kcp.DeepCopy())
		kcp.Annotations = map[string]string{singlenode.Annotation: "true"}
		if err := e.c.Patch(ctx, kcp, patch); err != nil {
			t.Fatal(err)
		}
	}
}

func singleNodeInPlace(t *testing.T, clusterClass bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, envOptions{lab: "single-node", scale: 0.01, extension: true})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	images := map[string]string{"v1.35.3": "ubuntu-24.04-k8s-v1.35.3", "v1.36.3": "ubuntu-24.04-k8s-v1.36.3"}
	e.createSingleNode(t, ctx, clusterClass, images)
	kcp := &controlplanev1.KubeadmControlPlane{}
	e.waitRolledOut(t, ctx, "one", 1, 0, "v1.35.3")
	before := e.machineIdentities(t, ctx, "one")
	var name string
	var id machineIdentity
	for name, id = range before {
	}
	host, _ := e.site.Lab.Host(id.host)
	if err := host.SetPersistent("app/marker", "kept"); err != nil {
		t.Fatal(err)
	}
	seen := e.watchMachineNames(ctx, "one")

	if clusterClass {
		e.upgradeTopology(t, ctx, "one", "v1.36.3")
	} else {
		e.upgrade(t, ctx, "one", e.clusterVars(t, ctx, "one", "v1.36.3", images["v1.36.3"], "v1-36", 1, 0, 1, false))
	}
	e.waitRolledOut(t, ctx, "one", 1, 0, "v1.36.3")

	after := e.machineIdentities(t, ctx, "one")
	if after[name] != id || len(after) != 1 {
		t.Fatalf("after the update: %+v; want only %s as before, %+v", after, name, id)
	}
	if names := seen(); fmt.Sprint(names) != fmt.Sprint([]string{name}) {
		t.Fatalf("machines seen during the update: %v; want only %s", names, name)
	}
	if got := host.Persistent()["app/marker"]; got != "kept" {
		t.Fatalf("persistent data after the update: %q", got)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "one-cp"}, kcp); err != nil {
		t.Fatal(err)
	}
	if deref(kcp.Status.UpToDateReplicas) != 1 {
		t.Fatalf("KCP upToDateReplicas = %d, want 1", deref(kcp.Status.UpToDateReplicas))
	}
	// KCP's workload-side work of the upgrade was done: kubeadm-config
	// says the new version (and the new version's feature gates).
	cm, err := e.workloadClient(t, ctx, "one").CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cc := monitor.KubeadmConfigSummary(cm.Data["ClusterConfiguration"]); cc[vocab.FieldVersion] != "v1.36.3" || cc[vocab.FieldFeatureGates] != "" {
		t.Fatalf("kubeadm-config after the upgrade: %v; want v1.36.3 without ControlPlaneKubeletLocalMode", cc)
	}
	// KCP runs unpaused when steady: its status follows the cluster. The
	// only host goes off; KCP's conditions must move.
	waitFor(t, ctx, "KCP unpaused, its status at its generation and Available", func() (bool, string) {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "one-cp"}, kcp); err != nil {
			return false, err.Error()
		}
		_, paused := kcp.Annotations[clusterv1.PausedAnnotation]
		return !paused && kcp.Status.ObservedGeneration == kcp.Generation && meta.IsStatusConditionTrue(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneAvailableCondition),
			fmt.Sprintf("annotations %v, observedGeneration %d of %d, %s", kcp.Annotations, kcp.Status.ObservedGeneration, kcp.Generation, conditionStates(kcp.Status.Conditions))
	})
	steady := conditionStates(kcp.Status.Conditions)
	// Off for good: a host merely powered off is powered on again by the
	// provider (spec.online, as baremetal-operator does), maybe before
	// KCP looks.
	if err := host.FailPowerSupply(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "KCP's conditions to follow the host going off", func() (bool, string) {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "one-cp"}, kcp); err != nil {
			return false, err.Error()
		}
		now := conditionStates(kcp.Status.Conditions)
		return now != steady, now
	})
}

// conditionStates is "Type=Status" of each condition, in order.
func conditionStates(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, c.Type+"="+string(c.Status))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// watchMachineNames records every Machine name of a cluster until ctx ends.
func (e *providerEnv) watchMachineNames(ctx context.Context, cluster string) func() []string {
	var mu sync.Mutex
	names := map[string]bool{}
	go func() {
		for ctx.Err() == nil {
			machines := &clusterv1.MachineList{}
			if err := e.c.List(ctx, machines, client.InNamespace(e.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err == nil {
				mu.Lock()
				for _, m := range machines.Items {
					names[m.Name] = true
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return sortedKeys(names)
	}
}
