package workload

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cluster-api/util/container"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InitObjects writes what `kubeadm init` leaves in a new cluster and KCP
// later reads and updates: the kubeadm-config ConfigMap (with the
// ClusterConfiguration the init used), the kube-proxy DaemonSet and
// CoreDNS (the ClusterConfiguration's dns.imageTag, or rel's). Existing
// objects are kept: a second init changes nothing.
func (c *Clusters) InitObjects(ctx context.Context, cluster string, rel Release, clusterConfiguration string) error {
	cl := c.client(cluster)
	version, coreDNS := rel.Kubernetes, rel.CoreDNS
	if cc, err := ParseClusterConfiguration(clusterConfiguration); err == nil && cc.DNS.ImageTag != "" {
		coreDNS = cc.DNS.ImageTag
	}
	objs := []client.Object{
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeadm:get-nodes"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:bootstrappers:kubeadm:default-node-token"}},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"},
			Data:       map[string]string{"ClusterConfiguration": clusterConfiguration},
		},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kube-proxy", Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-proxy"}},
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-proxy"}},
					Spec: corev1.PodSpec{
						// kubeadm's kube-proxy runs on every node, whatever its taints.
						Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{
							Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:" + container.SemverToOCIImageTag(version),
						}}}}},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "coredns"},
			Data:       map[string]string{"Corefile": ".:53 {\n    errors\n    health\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n    cache 30\n}\n"},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "coredns", Labels: map[string]string{"k8s-app": "kube-dns"}},
			// kubeadm's CoreDNS: two replicas that may run on
			// control-plane nodes, rolled one unavailable at a time.
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-dns"}},
					Spec: corev1.PodSpec{
						Tolerations: []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
							{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
						Containers: []corev1.Container{{
							Name: "coredns", Image: "registry.k8s.io/coredns/coredns:" + coreDNS,
						}}}}},
		},
	}
	for _, obj := range objs {
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("workload cluster %s: kubeadm init: %T %s: %w", cluster, obj, obj.GetName(), err)
		}
	}
	return nil
}

// ClusterConfiguration is what the lab reads of kubeadm's
// ClusterConfiguration document (kubeadm's YAML, as CABPK writes it into
// the user data and KCP into kubeadm-config): the version, the kubeadm
// feature gates, the CoreDNS tag and the control-plane components'
// extraArgs.
type ClusterConfiguration struct {
	KubernetesVersion string          `json:"kubernetesVersion"`
	FeatureGates      map[string]bool `json:"featureGates"`
	DNS               struct {
		ImageTag string `json:"imageTag"`
	} `json:"dns"`
	APIServer         ControlPlaneComponent `json:"apiServer"`
	ControllerManager ControlPlaneComponent `json:"controllerManager"`
	Scheduler         ControlPlaneComponent `json:"scheduler"`
}

// ControlPlaneComponent is one component's section of a
// ClusterConfiguration.
type ControlPlaneComponent struct {
	ExtraArgs ExtraArgs `json:"extraArgs"`
}

// ExtraArgs are a component's extra flags, name (no "--") to value.
// kubeadm's v1beta4 writes them as a list of {name, value} (what CABPK
// and KCP write for Kubernetes v1.31 on), v1beta3 as a map; both are
// read. A name listed twice keeps its last value.
type ExtraArgs map[string]string

// UnmarshalJSON reads either form.
func (a *ExtraArgs) UnmarshalJSON(b []byte) error {
	var list []struct{ Name, Value string }
	if err := json.Unmarshal(b, &list); err == nil {
		*a = ExtraArgs{}
		for _, arg := range list {
			(*a)[arg.Name] = arg.Value
		}
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("extraArgs: neither a list of {name, value} nor a map of strings: %w", err)
	}
	*a = m
	return nil
}

// StaticPodArgs are the extraArgs kubeadm writes into each control-plane
// static pod's manifest, by component (KubeAPIServer, ...).
type StaticPodArgs map[string]ExtraArgs

// Args are the static pods' extraArgs the configuration asks for.
func (cc ClusterConfiguration) Args() StaticPodArgs {
	return StaticPodArgs{KubeAPIServer: cc.APIServer.ExtraArgs, KubeControllerManager: cc.ControllerManager.ExtraArgs, KubeScheduler: cc.Scheduler.ExtraArgs}
}

// ParseClusterConfiguration reads a ClusterConfiguration document ("" is
// an empty one, as CAPI's in-memory provider writes).
func ParseClusterConfiguration(doc string) (ClusterConfiguration, error) {
	var cc ClusterConfiguration
	err := yaml.Unmarshal([]byte(doc), &cc)
	return cc, err
}

// ByEndpoint names the cluster whose API server answers at host:port, as
// kubeadm finds its cluster from controlPlaneEndpoint or the join
// discovery endpoint.
func (c *Clusters) ByEndpoint(hostPort string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.clusters {
		if fmt.Sprintf("%s:%d", c.host, w.vip.port) == hostPort {
			return name, true
		}
	}
	return "", false
}

// ClusterConfiguration is the ClusterConfiguration in the cluster's
// kubeadm-config ConfigMap, as kubeadm join and kubeadm upgrade node read
// it; "" when there is none yet.
func (c *Clusters) ClusterConfiguration(ctx context.Context, cluster string) (string, error) {
	cm := &corev1.ConfigMap{}
	err := c.client(cluster).Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("workload cluster %s: kubeadm-config: %w", cluster, err)
	}
	return cm.Data["ClusterConfiguration"], nil
}
