package workload

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// casLikeCAPI generates the cluster and etcd CAs the way CAPI does for a
// new control plane, and returns them as their secrets' data.
func casLikeCAPI(t testing.TB) (cluster, etcd map[string][]byte) {
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

// controlPlaneCluster starts the workload clusters with one cluster,
// default/wl, whose node cp-0 joined as control plane at rel, and returns
// a client of it through the kubeconfig CAPI writes from the CA.
func controlPlaneCluster(t testing.TB, ctx context.Context, rel Release) (c *Clusters, clusterCA, etcdCA CA, cs *kubernetes.Clientset) {
	t.Helper()
	return controlPlaneClusterWith(t, ctx, rel, Options{})
}

// controlPlaneClusterWith is controlPlaneCluster with the clusters'
// options.
func controlPlaneClusterWith(t testing.TB, ctx context.Context, rel Release, o Options) (c *Clusters, clusterCA, etcdCA CA, cs *kubernetes.Clientset) {
	t.Helper()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	ep, err := c.Create(ctx, "default/wl")
	if err != nil {
		t.Fatal(err)
	}
	clusterData, etcdData := casLikeCAPI(t)
	if clusterCA, err = CAFromSecretData(clusterData); err != nil {
		t.Fatal(err)
	}
	if etcdCA, err = CAFromSecretData(etcdData); err != nil {
		t.Fatal(err)
	}
	if err := c.JoinControlPlane(ctx, "default/wl", "cp-0", rel, nil, clusterCA, etcdCA); err != nil {
		t.Fatal(err)
	}
	kc, err := kubeconfig.New("wl", fmt.Sprintf("https://%s:%d", ep.Host, ep.Port), clusterCA.Cert, clusterCA.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return c, clusterCA, etcdCA, kubernetes.NewForConfigOrDie(cfg)
}

func TestAControlPlaneNodeIsReachableWithCAPIsKubeconfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, clusterCA, etcdCA, cs := controlPlaneCluster(t, ctx, Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0", CoreDNS: "v1.12.1"})
	node := NodeInfo{Name: "cp-0", ProviderID: "upgradelab://lab/cp-0", ControlPlane: true, KubeletVersion: "v1.35.3",
		ContainerRuntime: "containerd://2.1.4", KernelVersion: "6.8.0-79-generic", OSImage: "Ubuntu 24.04.3 LTS", Ready: true}
	if err := c.SetNode(ctx, "default/wl", node); err != nil {
		t.Fatal(err)
	}

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

	// kubeadm upgrade node on the new slot: the etcd member keeps its
	// identity and runs the new release's etcd.
	before, err := cs.CoreV1().Pods("kube-system").Get(ctx, "etcd-cp-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.JoinControlPlane(ctx, "default/wl", "cp-0", Release{Kubernetes: "v1.36.3", Etcd: "3.6.5-0", CoreDNS: "v1.13.1"}, nil, clusterCA, etcdCA); err != nil {
		t.Fatal(err)
	}
	after, err := cs.CoreV1().Pods("kube-system").Get(ctx, "etcd-cp-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Spec.Containers[0].Image != "registry.k8s.io/etcd:3.6.5-0" || after.Annotations[cloudv1.EtcdMemberIDAnnotationName] != before.Annotations[cloudv1.EtcdMemberIDAnnotationName] {
		t.Fatalf("etcd after the upgrade: image %s, member %s (was %s)", after.Spec.Containers[0].Image,
			after.Annotations[cloudv1.EtcdMemberIDAnnotationName], before.Annotations[cloudv1.EtcdMemberIDAnnotationName])
	}
}

func TestInitDeploysTheCoreDNSTheClusterConfigurationNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0", CoreDNS: "v1.12.1"}
	for _, tc := range []struct{ cluster, clusterConfiguration, want string }{
		{"default/by-image", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n", "registry.k8s.io/coredns/coredns:v1.12.1"},
		{"default/by-tag", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ndns:\n  imageTag: v1.12.3\n", "registry.k8s.io/coredns/coredns:v1.12.3"},
	} {
		if _, err := c.Create(ctx, tc.cluster); err != nil {
			t.Fatal(err)
		}
		if err := c.InitObjects(ctx, tc.cluster, rel, tc.clusterConfiguration); err != nil {
			t.Fatal(err)
		}
		dep := &appsv1.Deployment{}
		if err := c.client(tc.cluster).Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, dep); err != nil {
			t.Fatal(err)
		}
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != tc.want {
			t.Errorf("%s: CoreDNS %s, want %s", tc.cluster, got, tc.want)
		}
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

// KCP rewrites the CoreDNS ConfigMap with an update that carries no
// resourceVersion; kube-apiserver accepts it, so the workload clusters
// must too. A stale resourceVersion is still a conflict.
func TestAnUpdateWithoutResourceVersionReplacesTheObject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rel := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0", CoreDNS: "v1.12.1"}
	c, _, _, cs := controlPlaneCluster(t, ctx, rel)
	if err := c.InitObjects(ctx, "default/wl", rel, ""); err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("kube-system")
	stale, err := cms.Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unconditional := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Data: map[string]string{"Corefile": "migrated", "Corefile-backup": stale.Data["Corefile"]}}
	if _, err := cms.Update(ctx, unconditional, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("an update without resourceVersion, as KCP's CoreDNS upgrade makes: %v", err)
	}
	got, _ := cms.Get(ctx, "coredns", metav1.GetOptions{})
	if got.Data["Corefile"] != "migrated" || got.Data["Corefile-backup"] == "" {
		t.Fatalf("after the update: %v", got.Data)
	}
	stale.Data["Corefile"] = "lost update"
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("an update with a stale resourceVersion: %v, want a conflict", err)
	}
}
