package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/sim/agent"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	begin := time.Now()
	for {
		ok, state := cond()
		if ok {
			t.Logf("%s: after %s", what, time.Since(begin).Round(100*time.Millisecond))
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last seen: %s", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// A hand-made Cluster and control-plane Machine: CABPK writes the
// bootstrap data, the host boots with it, the agent's kubeadm init makes a
// Node in the workload cluster, and the kubeconfig secret CAPI generated
// reaches it. Then the host reboots into a newer slot and the same Node
// reports the new version.
func TestCABPKBootstrapDataJoinsTheWorkloadCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	plane, err := mgmt.Start(ctx, mgmt.Options{ArtifactsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Stop()
	c := plane.Client
	installTestInfraCRDs(t, ctx, c)

	l := labtest.Up(t, "single-node", 0)
	clusters, ep := labtest.Workload(t, "default/wl")
	host, _ := l.Host("node-0")
	hostAgent := agent.New(host, clusters, 0, agent.DefaultTiming)
	agentEvents, stopEvents := l.Subscribe()
	defer stopEvents()
	go hostAgent.Run(ctx, agentEvents)
	events, stopEvents2 := l.Subscribe()
	defer stopEvents2()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bootstrap-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	infraMachine := createTestInfra(t, ctx, c, ns.Name, ep.Host, ep.Port)

	config, machine := createControlPlaneMachine(t, ctx, c, ns.Name)

	// CABPK writes the bootstrap data secret.
	var dataSecret string
	waitFor(t, ctx, "CABPK's bootstrap data", func() (bool, string) {
		got := &bootstrapv1.KubeadmConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(config), got); err != nil {
			return false, err.Error()
		}
		dataSecret = got.Status.DataSecretName
		return dataSecret != "", fmt.Sprintf("conditions %v", got.Status.Conditions)
	})
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: dataSecret}, secret); err != nil {
		t.Fatal(err)
	}

	// What the provider does: deploy image, OS image into slot A, the
	// bootstrap data on the config drive, boot from disk.
	labtest.Provision(t, l, host, events, "ubuntu-24.04-k8s-v1.35.3", secret.Data["value"])
	labtest.Expect(t, events, "node-0", "KubeletRunning", 30*time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(infraMachine), infraMachine); err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(infraMachine.Object, true, "status", "initialization", "provisioned")
	if err := c.Status().Update(ctx, infraMachine); err != nil {
		t.Fatal(err)
	}

	cs := joinedThroughCAPI(t, ctx, c, machine)

	// An update: the same Node reports the new kubelet.
	next, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	root, err := host.WriteImage(ctx, l.ImageServer().ImageURL(next.Name), next.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	host.Activate(root, 3)
	host.Reset()
	waitFor(t, ctx, "node-0 at v1.36.3 after the reboot", func() (bool, string) {
		node, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(node) && node.Status.NodeInfo.KubeletVersion == "v1.36.3", fmt.Sprintf("%+v", node.Status.NodeInfo)
	})
	if h, err := hostAgent.CheckHealth(ctx); err != nil || !h.Healthy {
		t.Fatalf("health after the update: %+v %v", h, err)
	}

	checkNotReadyWithTheNICDown(t, ctx, host, hostAgent, cs)
}

// checkNotReadyWithTheNICDown flashes an NVM whose admin-queue API major
// is newer than the driver's: after a reset the port never comes up, the
// Node goes NotReady and the health check fails.
func checkNotReadyWithTheNICDown(t *testing.T, ctx context.Context, host *lab.Host, hostAgent *agent.Agent, cs kubernetes.Interface) {
	t.Helper()
	if err := host.FlashNVM(ctx, "eno1", "x710-nvm-10.0-next"); err != nil {
		t.Fatal(err)
	}
	host.Reset()
	waitFor(t, ctx, "node-0 NotReady with the NIC down", func() (bool, string) {
		node, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// NotReady because the booted driver found the port down, not
		// merely because the host was off during the reset.
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "link down") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", node.Status.Conditions)
	})
	if h, err := hostAgent.CheckHealth(ctx); err != nil || h.Healthy {
		t.Fatalf("health with the NIC down: %+v %v; want a failure", h, err)
	}
}

// installTestInfraCRDs installs the test infrastructure provider's CRDs
// and the RBAC that lets CAPI's managers read them, and waits for them
// established.
func installTestInfraCRDs(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	if err := c.Create(ctx, testInfraAccess()); err != nil {
		t.Fatal(err)
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{testInfraCRD("TestInfraCluster", "testinfraclusters"), testInfraCRD("TestInfraMachine", "testinframachines")}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	for _, crd := range crds {
		waitFor(t, ctx, "CRD "+crd.Name+" established", func() (bool, string) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, err.Error()
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, ""
				}
			}
			return false, fmt.Sprint(got.Status.Conditions)
		})
	}
}

// createTestInfra creates the test infrastructure's cluster (its endpoint
// host:port, provisioned) and machine cp-0 (node-0's provider ID) in ns.
func createTestInfra(t *testing.T, ctx context.Context, c client.Client, ns, host string, port int32) (infraMachine *unstructured.Unstructured) {
	t.Helper()
	infraCluster := &unstructured.Unstructured{}
	infraCluster.SetAPIVersion(testInfraGroup + "/v1alpha1")
	infraCluster.SetKind("TestInfraCluster")
	infraCluster.SetNamespace(ns)
	infraCluster.SetName("wl")
	unstructured.SetNestedMap(infraCluster.Object, map[string]any{"host": host, "port": int64(port)}, "spec", "controlPlaneEndpoint")
	// The client learns new kinds from discovery, which can lag the CRD.
	waitFor(t, ctx, "the API server to serve TestInfraCluster", func() (bool, string) {
		err := c.Create(ctx, infraCluster)
		return err == nil, fmt.Sprint(err)
	})
	unstructured.SetNestedField(infraCluster.Object, true, "status", "initialization", "provisioned")
	if err := c.Status().Update(ctx, infraCluster); err != nil {
		t.Fatal(err)
	}
	infraMachine = &unstructured.Unstructured{}
	infraMachine.SetAPIVersion(testInfraGroup + "/v1alpha1")
	infraMachine.SetKind("TestInfraMachine")
	infraMachine.SetNamespace(ns)
	infraMachine.SetName("cp-0")
	unstructured.SetNestedField(infraMachine.Object, "upgradelab://single-node/node-0", "spec", "providerID")
	if err := c.Create(ctx, infraMachine); err != nil {
		t.Fatal(err)
	}
	return infraMachine
}

// createControlPlaneMachine creates Cluster wl and its control-plane
// Machine cp-0 at v1.35.3 with its KubeadmConfig.
func createControlPlaneMachine(t *testing.T, ctx context.Context, c client.Client, ns string) (*bootstrapv1.KubeadmConfig, *clusterv1.Machine) {
	t.Helper()
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: testInfraGroup, Kind: "TestInfraCluster", Name: "wl",
		}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	config := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp-0"},
		Spec: bootstrapv1.KubeadmConfigSpec{
			InitConfiguration: bootstrapv1.InitConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{
				KubeletExtraArgs: []bootstrapv1.Arg{{Name: "provider-id", Value: ptrTo("upgradelab://single-node/node-0")}},
			}},
		},
	}
	if err := c.Create(ctx, config); err != nil {
		t.Fatal(err)
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp-0", Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "wl",
			Version:     "v1.35.3",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: "cp-0",
			}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: testInfraGroup, Kind: "TestInfraMachine", Name: "cp-0"},
		},
	}
	if err := c.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}
	return config, machine
}

// joinedThroughCAPI waits for the kubeconfig secret CAPI generates, then
// through it for node-0 Ready at v1.35.3, and for machine's nodeRef; it
// answers the workload cluster's client.
func joinedThroughCAPI(t *testing.T, ctx context.Context, c client.Client, machine *clusterv1.Machine) kubernetes.Interface {
	t.Helper()
	kubeconfigSecret := &corev1.Secret{}
	waitFor(t, ctx, "the kubeconfig secret CAPI generates", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: machine.Spec.ClusterName + "-kubeconfig"}, kubeconfigSecret)
		return err == nil, fmt.Sprint(err)
	})
	restConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfigSecret.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(restConfig)
	waitFor(t, ctx, "a Ready node-0 at v1.35.3 through CAPI's kubeconfig", func() (bool, string) {
		node, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(node) && node.Status.NodeInfo.KubeletVersion == "v1.35.3", fmt.Sprintf("%+v", node.Status.NodeInfo)
	})
	waitFor(t, ctx, "the Machine's nodeRef", func() (bool, string) {
		got := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(machine), got); err != nil {
			return false, err.Error()
		}
		return got.Status.NodeRef.Name == "node-0", fmt.Sprintf("nodeRef %+v, conditions %v", got.Status.NodeRef, got.Status.Conditions)
	})
	return cs
}

func ptrTo[T any](v T) *T { return &v }

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
