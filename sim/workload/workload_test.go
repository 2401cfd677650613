package workload

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
)

// casLikeCAPI generates the cluster and etcd CAs the way CAPI does for a
// new control plane, and returns them as their secrets' data.
func casLikeCAPI(t *testing.T) (cluster, etcd map[string][]byte) {
	t.Helper()
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	data := func(p secret.Purpose) map[string][]byte {
		kp := certs.GetByPurpose(p).KeyPair
		return map[string][]byte{secret.TLSCrtDataName: kp.Cert, secret.TLSKeyDataName: kp.Key}
	}
	return data(secret.ClusterCA), data(secret.EtcdCA)
}

func TestAControlPlaneNodeIsReachableWithCAPIsKubeconfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())

	ep, err := c.Create(ctx, "default/wl")
	if err != nil {
		t.Fatal(err)
	}
	clusterData, etcdData := casLikeCAPI(t)
	clusterCA, err := CAFromSecretData(clusterData)
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, err := CAFromSecretData(etcdData)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.JoinControlPlane(ctx, "default/wl", "cp-0", "v1.35.3", clusterCA, etcdCA); err != nil {
		t.Fatal(err)
	}
	node := NodeInfo{Name: "cp-0", ProviderID: "upgradelab://lab/cp-0", ControlPlane: true, KubeletVersion: "v1.35.3",
		ContainerRuntime: "containerd://2.1.4", KernelVersion: "6.8.0-79-generic", OSImage: "Ubuntu 24.04.3 LTS", Ready: true}
	if err := c.SetNode(ctx, "default/wl", node); err != nil {
		t.Fatal(err)
	}

	// The kubeconfig CAPI writes into <cluster>-kubeconfig, from the CA.
	kc, err := kubeconfig.New("wl", fmt.Sprintf("https://%s:%d", ep.Host, ep.Port), clusterCA.Cert, clusterCA.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	got, err := cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Node with CAPI's kubeconfig: %v", err)
	}
	if got.Status.NodeInfo.KubeletVersion != "v1.35.3" || got.Spec.ProviderID != "upgradelab://lab/cp-0" || !ready(got) {
		t.Fatalf("node %+v", got.Status)
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 4 {
		t.Fatalf("static pods: %d, %v; want apiserver, controller-manager, scheduler and etcd", len(pods.Items), err)
	}

	// The hardware says the NIC is down: the kubelet goes NotReady.
	node.Ready, node.NotReadyReason = false, "network: eno1 link down"
	if err := c.SetNode(ctx, "default/wl", node); err != nil {
		t.Fatal(err)
	}
	got, _ = cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
	if ready(got) {
		t.Fatal("node still Ready after the kubelet reported NotReady")
	}

	// A reboot into a newer slot: same Node, new versions.
	node.Ready, node.KubeletVersion = true, "v1.36.3"
	c.SetNode(ctx, "default/wl", node)
	got, _ = cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
	if got.Status.NodeInfo.KubeletVersion != "v1.36.3" || !ready(got) {
		t.Fatalf("after the reboot: %+v", got.Status.NodeInfo)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
