package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/clustertemplate"
	"github.com/upgradelab/upgradelab/e2e/reference"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

const clusterTemplates = "../../fixtures/clusters/baremetal"

// clusterVars are the template variables of one cluster at one version.
func (e *providerEnv) clusterVars(t *testing.T, ctx context.Context, name, version, imageName, suffix string, cpReplicas, workers, cpSurge int, nodeReuse bool) map[string]string {
	t.Helper()
	vip, err := e.site.VIP(ctx, e.ns+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	img, err := e.site.Lab.Definition().Catalog.Get(imageName)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"NAMESPACE": e.ns, "CLUSTER_NAME": name, "VIP_HOST": vip.Host, "VIP_PORT": strconv.Itoa(int(vip.Port)),
		"KUBERNETES_VERSION": version, "TEMPLATE_SUFFIX": suffix,
		"IMAGE_URL": e.site.Lab.ImageServer().ImageURL(img.Name), "IMAGE_CHECKSUM": img.SHA256,
		"CP_REPLICAS": strconv.Itoa(cpReplicas), "CP_MAX_SURGE": strconv.Itoa(cpSurge),
		"WORKER_REPLICAS": strconv.Itoa(workers), "MD_MAX_SURGE": "1", "MD_MAX_UNAVAILABLE": "0",
		"NODE_REUSE": strconv.FormatBool(nodeReuse), "NIC_FIRMWARE": "null", "COREDNS_VERSION": img.CoreDNS,
		"NODE_DRAIN_TIMEOUT_SECONDS": "0",
	}
}

// withNICFirmware sets the NVM package every NIC port should run.
func (e *providerEnv) withNICFirmware(vars map[string]string, nvm string) map[string]string {
	vars["NIC_FIRMWARE"] = fmt.Sprintf("{url: %q}", e.site.Lab.ImageServer().FirmwareURL(nvm))
	return vars
}

func (e *providerEnv) apply(t *testing.T, ctx context.Context, file string, vars map[string]string) {
	t.Helper()
	objs, err := clustertemplate.Render(filepath.Join(clusterTemplates, file), vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// upgrade points the control plane and the workers at new templates and
// a new version, as a user's `kubectl edit` would.
func (e *providerEnv) upgrade(t *testing.T, ctx context.Context, cluster string, vars map[string]string) {
	t.Helper()
	e.apply(t, ctx, "machine-templates.yaml", vars)
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster + "-cp"}, kcp); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(kcp.DeepCopy()) // KCP and its controllers write it too
	kcp.Spec.Version = vars["KUBERNETES_VERSION"]
	kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name = cluster + "-cp-" + vars["TEMPLATE_SUFFIX"]
	if err := e.c.Patch(ctx, kcp, patch); err != nil {
		t.Fatal(err)
	}
	e.pointWorkers(t, ctx, cluster, vars)
}

// upgradeWorkers points only the MachineDeployment at new templates.
func (e *providerEnv) upgradeWorkers(t *testing.T, ctx context.Context, cluster string, vars map[string]string) {
	t.Helper()
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.pointWorkers(t, ctx, cluster, vars)
}

func (e *providerEnv) pointWorkers(t *testing.T, ctx context.Context, cluster string, vars map[string]string) {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster + "-md"}, md); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.Version = vars["KUBERNETES_VERSION"]
	md.Spec.Template.Spec.InfrastructureRef.Name = cluster + "-md-" + vars["TEMPLATE_SUFFIX"]
	if err := e.c.Patch(ctx, md, patch); err != nil {
		t.Fatal(err)
	}
}

// waitRolledOut waits until every Machine of the cluster is UpToDate with
// no update in progress, and each Node is Ready at version.
func (e *providerEnv) waitRolledOut(t *testing.T, ctx context.Context, cluster string, cp, workers int32, version string) {
	t.Helper()
	var cs *kubernetes.Clientset
	waitFor(t, ctx, fmt.Sprintf("%d control-plane and %d worker machines up to date at %s", cp, workers, version), func() (bool, string) {
		kcp := &controlplanev1.KubeadmControlPlane{}
		md := &clusterv1.MachineDeployment{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster + "-cp"}, kcp); err != nil {
			return false, err.Error()
		}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster + "-md"}, md); err != nil {
			return false, err.Error()
		}
		machines := &clusterv1.MachineList{}
		if err := e.c.List(ctx, machines, client.InNamespace(e.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
			return false, err.Error()
		}
		var states []string
		upToDate := 0
		for _, m := range machines.Items {
			c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
			_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
			ok := c != nil && c.Status == metav1.ConditionTrue && m.Spec.Version == version && m.Status.NodeRef.Name != "" && m.DeletionTimestamp.IsZero() && !updating
			if ok && cs == nil {
				cs = e.workloadClient(t, ctx, cluster)
			}
			if ok {
				n, err := cs.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
				ok = err == nil && nodeReady(n) && n.Status.NodeInfo.KubeletVersion == version
			}
			if ok {
				upToDate++
			}
			states = append(states, fmt.Sprintf("%s(%s node=%s upToDate=%v)", m.Name, m.Status.Phase, m.Status.NodeRef.Name, ok))
		}
		kcpAvailable := meta.IsStatusConditionTrue(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneAvailableCondition)
		done := kcpAvailable && deref(kcp.Status.UpToDateReplicas) == cp && deref(kcp.Status.AvailableReplicas) == cp &&
			deref(md.Status.UpToDateReplicas) == workers && deref(md.Status.AvailableReplicas) == workers &&
			upToDate == int(cp+workers) && len(machines.Items) == int(cp+workers)
		var notTrue []string
		for _, c := range kcp.Status.Conditions {
			if c.Status != metav1.ConditionTrue && c.Message != "" {
				notTrue = append(notTrue, c.Type+": "+c.Message)
			}
		}
		c := &clusterv1.Cluster{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster}, c); err == nil {
			if tr := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition); tr != nil && tr.Status != metav1.ConditionTrue {
				notTrue = append(notTrue, "Cluster "+tr.Type+": "+tr.Reason+": "+tr.Message)
			}
		}
		return done, fmt.Sprintf("KCP available=%v %v upToDate=%d available=%d; MD upToDate=%d available=%d; machines %s",
			kcpAvailable, notTrue, deref(kcp.Status.UpToDateReplicas), deref(kcp.Status.AvailableReplicas),
			deref(md.Status.UpToDateReplicas), deref(md.Status.AvailableReplicas), strings.Join(states, " "))
	})
	nodes, err := e.workloadClient(t, ctx, cluster).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, n := range nodes.Items {
		if nodeReady(&n) && n.Status.NodeInfo.KubeletVersion == version {
			ready++
		}
	}
	if ready != int(cp+workers) {
		t.Fatalf("%d of %d nodes Ready at %s: %d nodes in the workload cluster", ready, cp+workers, version, len(nodes.Items))
	}
}

// workloadClient reaches the cluster through the kubeconfig CAPI wrote.
func (e *providerEnv) workloadClient(t *testing.T, ctx context.Context, cluster string) *kubernetes.Clientset {
	t.Helper()
	secret := &corev1.Secret{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster + "-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// bindings lists host -> consumer of every BareMetalHost.
func (e *providerEnv) bindings(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	hosts := &metal3.BareMetalHostList{}
	if err := e.c.List(ctx, hosts, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, h := range hosts.Items {
		out[h.Name] = string(h.Status.Provisioning.State)
		if h.Spec.ConsumerRef != nil {
			out[h.Name] += " by " + h.Spec.ConsumerRef.Name
		}
		if _, ok := h.Labels[infrav1.SpareLabel]; ok {
			out[h.Name] += " (spare)"
		}
	}
	return out
}

// The reference provider under the real CAPI managers: a 3-node control
// plane and two workers provision on the cold-spare lab, then a version
// bump with a new image rolls out with KCP maxSurge 1, the spare host
// taking the first new machine and each freed host becoming the spare.
func TestColdSpareClusterProvisionsAndRollsOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "cold-spare", 0.01)
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	vars := e.clusterVars(t, ctx, "wl", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 3, 2, 1, false)
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)
	e.waitRolledOut(t, ctx, "wl", 3, 2, "v1.35.3")
	before := e.bindings(t, ctx)
	t.Logf("hosts after provisioning: %v", before)
	if !strings.HasPrefix(before["spare-0"], "available") || !strings.HasSuffix(before["spare-0"], "(spare)") {
		t.Fatalf("spare-0 after provisioning: %q; want it available and still the spare", before["spare-0"])
	}
	for h, s := range before {
		if h != "spare-0" && !strings.HasPrefix(s, "provisioned by ") {
			t.Fatalf("host %s after provisioning: %q; want provisioned with a consumer", h, s)
		}
	}

	next := e.clusterVars(t, ctx, "wl", "v1.36.3", "ubuntu-24.04-k8s-v1.36.3", "v1-36", 3, 2, 1, false)
	e.upgrade(t, ctx, "wl", next)
	e.waitRolledOut(t, ctx, "wl", 3, 2, "v1.36.3")
	after := e.bindings(t, ctx)
	t.Logf("hosts after the rollout: %v", after)
	if !strings.HasPrefix(after["spare-0"], "provisioned by ") {
		t.Fatalf("spare-0 after the rollout: %q; want it to carry a new machine", after["spare-0"])
	}
	var spares []string
	for h, s := range after {
		if strings.HasSuffix(s, "(spare)") {
			spares = append(spares, h+": "+s)
		}
	}
	sort.Strings(spares)
	if len(spares) != 1 || !strings.Contains(spares[0], "available") {
		t.Fatalf("spares after the rollout: %v; want exactly one, available", spares)
	}
}

// Failure domains as CAPM3 has them: the BareMetalCluster declares them,
// CAPI copies them into the Cluster, KCP spreads the control plane over
// them, and each Machine gets a host labelled with its domain. The
// labels are put against the hosts' name order, so a controller that
// ignored the domain (first free host by name) would be caught.
func TestControlPlaneMachinesLandInTheirFailureDomains(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "three-node", 0.01)
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	domainOf := map[string]string{"cp-0": "rack-c", "cp-1": "rack-a", "cp-2": "rack-b"}
	for host, fd := range domainOf {
		e.patchHost(t, ctx, host, func(h *metal3.BareMetalHost) {
			if h.Labels == nil {
				h.Labels = map[string]string{}
			}
			h.Labels[infrav1.FailureDomainLabel] = fd
		})
	}
	vars := e.clusterVars(t, ctx, "fd", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 3, 0, 1, false)
	e.apply(t, ctx, "machine-templates.yaml", vars)
	objs, err := clustertemplate.Render(filepath.Join(clusterTemplates, "cluster.yaml"), vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "BareMetalCluster" {
			domains := []any{}
			for _, fd := range []string{"rack-a", "rack-b", "rack-c"} {
				domains = append(domains, map[string]any{"name": fd, "controlPlane": true})
			}
			if err := unstructured.SetNestedSlice(o.Object, domains, "spec", "failureDomains"); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	e.waitRolledOut(t, ctx, "fd", 3, 0, "v1.35.3")

	c := &clusterv1.Cluster{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "fd"}, c); err != nil {
		t.Fatal(err)
	}
	if len(c.Status.FailureDomains) != 3 {
		t.Fatalf("the Cluster's failure domains: %+v; want the BareMetalCluster's three", c.Status.FailureDomains)
	}
	machines := &clusterv1.MachineList{}
	if err := e.c.List(ctx, machines, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range machines.Items {
		bmm := &infrav1.BareMetalMachine{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: m.Spec.InfrastructureRef.Name}, bmm); err != nil {
			t.Fatal(err)
		}
		fd := m.Spec.FailureDomain
		if fd == "" || domainOf[bmm.Status.Host] != fd {
			t.Errorf("machine %s in failure domain %q is on host %s of %q", m.Name, fd, bmm.Status.Host, domainOf[bmm.Status.Host])
		}
		used[fd] = true
	}
	if len(used) != 3 {
		t.Errorf("the control plane used failure domains %v; want all three", used)
	}

	e.checkPausePropagates(t, ctx, c)

}

// checkPausePropagates sets spec.paused on cluster c and back: the Paused
// condition of its BareMetalCluster and every BareMetalMachine follows.
func (e *providerEnv) checkPausePropagates(t *testing.T, ctx context.Context, c *clusterv1.Cluster) {
	t.Helper()
	for _, paused := range []bool{true, false} {
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Paused = &paused
		if err := e.c.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
		want := metav1.ConditionFalse
		if paused {
			want = metav1.ConditionTrue
		}
		waitFor(t, ctx, fmt.Sprintf("Paused=%s on the BareMetalCluster and every BareMetalMachine", want), func() (bool, string) {
			var objs []client.Object
			bmc := &infrav1.BareMetalCluster{}
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: c.Name}, bmc); err != nil {
				return false, err.Error()
			}
			objs = append(objs, bmc)
			bmms := &infrav1.BareMetalMachineList{}
			if err := e.c.List(ctx, bmms, client.InNamespace(e.ns)); err != nil {
				return false, err.Error()
			}
			for i := range bmms.Items {
				objs = append(objs, &bmms.Items[i])
			}
			for _, o := range objs {
				cond := meta.FindStatusCondition(o.(interface{ GetConditions() []metav1.Condition }).GetConditions(), clusterv1.PausedCondition)
				if cond == nil || cond.Status != want {
					return false, fmt.Sprintf("%s: %+v", o.GetName(), cond)
				}
			}
			return true, ""
		})
	}
}
