package monitor

import (
	"sort"
	"strconv"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/upgradelab/upgradelab/sim/workload"
)

// Fields of the summaries, which the checks read. A boolean is "true" or
// absent; a condition is its status ("True", "False", "Unknown") or
// absent.
const (
	FieldPhase      = "phase"
	FieldVersion    = "version"
	FieldNode       = "node"
	FieldProviderID = "providerID"
	FieldUID        = "uid"
	FieldDeleting   = "deleting"
	FieldUpdating   = "updating"
	// FieldUpdateFailed: CAPI's Updating condition says the in-place
	// update failed (the extension refused or the host fell back).
	FieldUpdateFailed = "updateFailed"
	FieldUpToDate     = "upToDate"
	FieldAvailable    = "available"
	FieldControlPlane = "controlPlane"
	FieldDeployment   = "deployment"
	FieldInfra        = "infra"

	FieldReplicas = "replicas"
	// FieldControlPlaneName is the KubeadmControlPlane a control-plane
	// Machine belongs to (its control-plane-name label).
	FieldControlPlaneName = "controlPlaneName"
	// FieldHealthCheck is a Machine's HealthCheckSucceeded condition (a
	// MachineHealthCheck's verdict; absent without one).
	FieldHealthCheck = "healthCheck"
	// FieldFeatureGates are a ClusterConfiguration's ("A=true,B=false").
	FieldFeatureGates   = "featureGates"
	FieldMaxSurge       = "maxSurge"
	FieldMaxUnavailable = "maxUnavailable"
	FieldUpToDateCount  = "upToDateReplicas"
	FieldAvailableCount = "availableReplicas"
	FieldTotal          = "totalReplicas"

	FieldState    = "state"
	FieldConsumer = "consumer"
	FieldSpare    = "spare"
	FieldPowered  = "poweredOn"

	FieldReady   = "ready"
	FieldKubelet = "kubelet"

	FieldRemoved = "removed"
	FieldImage   = "image"
	// FieldCoreDNS is KCP's clusterConfiguration.dns.imageTag: the CoreDNS
	// KCP is asked to run ("" leaves CoreDNS alone).
	FieldCoreDNS = "coreDNS"

	FieldCPUpToDate      = "controlPlaneMachinesUpToDate"
	FieldWorkersUpToDate = "workerMachinesUpToDate"
	FieldRollingOut      = "rollingOut"
	// Ready aggregates each Machine's Ready, which a failed in-place
	// update (Updating, negative polarity) makes False, while UpToDate
	// is about the spec and stays True.
	FieldCPMachinesReady     = "controlPlaneMachinesReady"
	FieldWorkerMachinesReady = "workerMachinesReady"
)

// Kinds the monitors watch, as timeline entries name them.
const (
	KindMachine           = "Machine"
	KindControlPlane      = "KubeadmControlPlane"
	KindMachineDeployment = "MachineDeployment"
	KindCluster           = "Cluster"
	KindHost              = "BareMetalHost"
	KindNode              = "Node"
	KindEtcdMember        = "EtcdMember"
	KindMachineSet        = "MachineSet"
	// KindAddon is a kubeadm add-on KCP keeps at the cluster's version:
	// the kube-proxy DaemonSet and the CoreDNS Deployment.
	KindAddon = "Addon"
)

// etcdMemberRemoved is the annotation CAPI's in-memory etcd puts on a
// member's pod when KCP removes the member (MemberRemove).
const etcdMemberRemoved = "etcd.inmemory.infrastructure.cluster.x-k8s.io/member-removed"

func set(m map[string]string, k string, ok bool) {
	if ok {
		m[k] = "true"
	}
}

func condition(m map[string]string, k string, conds []metav1.Condition, t string) {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		m[k] = string(c.Status)
	}
}

func count(p *int32) string {
	if p == nil {
		return "0"
	}
	return strconv.Itoa(int(*p))
}

// MachineSummary is what the checks need of a Machine.
func MachineSummary(m *clusterv1.Machine) map[string]string {
	s := map[string]string{
		FieldPhase: m.Status.Phase, FieldVersion: m.Spec.Version, FieldNode: m.Status.NodeRef.Name,
		FieldProviderID: m.Spec.ProviderID, FieldUID: string(m.UID), FieldInfra: m.Spec.InfrastructureRef.Name,
		FieldDeployment: m.Labels[clusterv1.MachineDeploymentNameLabel],
	}
	set(s, FieldDeleting, !m.DeletionTimestamp.IsZero())
	_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
	set(s, FieldUpdating, updating)
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpdatingCondition); c != nil {
		set(s, FieldUpdateFailed, c.Reason == clusterv1.MachineInPlaceUpdateFailedReason)
	}
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	set(s, FieldControlPlane, cp)
	if name := m.Labels[clusterv1.MachineControlPlaneNameLabel]; name != "" {
		s[FieldControlPlaneName] = name
	}
	condition(s, FieldUpToDate, m.Status.Conditions, clusterv1.MachineUpToDateCondition)
	condition(s, FieldHealthCheck, m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition)
	condition(s, FieldAvailable, m.Status.Conditions, clusterv1.MachineAvailableCondition)
	if t := m.Spec.Deletion.NodeDrainTimeoutSeconds; t != nil && *t > 0 {
		s[FieldDrainTimeout] = strconv.Itoa(int(*t))
	}
	if d := m.Status.Deletion; d != nil && !d.NodeDrainStartTime.IsZero() {
		s[FieldDrainStarted] = d.NodeDrainStartTime.UTC().Format(time.RFC3339)
	}
	return s
}

// ControlPlaneSummary is a KubeadmControlPlane's spec and counts.
func ControlPlaneSummary(k *controlplanev1.KubeadmControlPlane) map[string]string {
	s := map[string]string{
		FieldReplicas: count(k.Spec.Replicas), FieldVersion: k.Spec.Version, FieldMaxSurge: "1",
		FieldUpToDateCount: count(k.Status.UpToDateReplicas), FieldAvailableCount: count(k.Status.AvailableReplicas),
		FieldTotal: count(k.Status.Replicas),
	}
	if ms := k.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; ms != nil {
		s[FieldMaxSurge] = ms.String()
	}
	if tag := k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag; tag != "" {
		s[FieldCoreDNS] = tag
	}
	condition(s, FieldAvailable, k.Status.Conditions, controlplanev1.KubeadmControlPlaneAvailableCondition)
	return s
}

// DeploymentSummary is a MachineDeployment's spec and counts.
func DeploymentSummary(d *clusterv1.MachineDeployment) map[string]string {
	s := map[string]string{
		FieldReplicas: count(d.Spec.Replicas), FieldVersion: d.Spec.Template.Spec.Version,
		FieldMaxSurge: "1", FieldMaxUnavailable: "0",
		FieldUpToDateCount: count(d.Status.UpToDateReplicas), FieldAvailableCount: count(d.Status.AvailableReplicas),
		FieldTotal: count(d.Status.Replicas),
	}
	if ru := d.Spec.Rollout.Strategy.RollingUpdate; ru.MaxSurge != nil {
		s[FieldMaxSurge] = ru.MaxSurge.String()
	}
	if ru := d.Spec.Rollout.Strategy.RollingUpdate; ru.MaxUnavailable != nil {
		s[FieldMaxUnavailable] = ru.MaxUnavailable.String()
	}
	return s
}

// ClusterSummary is CAPI's verdict on a Cluster.
func ClusterSummary(c *clusterv1.Cluster) map[string]string {
	s := map[string]string{}
	condition(s, FieldAvailable, c.Status.Conditions, clusterv1.ClusterAvailableCondition)
	condition(s, FieldCPUpToDate, c.Status.Conditions, clusterv1.ClusterControlPlaneMachinesUpToDateCondition)
	condition(s, FieldWorkersUpToDate, c.Status.Conditions, clusterv1.ClusterWorkerMachinesUpToDateCondition)
	condition(s, FieldRollingOut, c.Status.Conditions, clusterv1.ClusterRollingOutCondition)
	condition(s, FieldCPMachinesReady, c.Status.Conditions, clusterv1.ClusterControlPlaneMachinesReadyCondition)
	condition(s, FieldWorkerMachinesReady, c.Status.Conditions, clusterv1.ClusterWorkerMachinesReadyCondition)
	return s
}

// MachineSetSummary is a MachineSet's owner, version and counts.
func MachineSetSummary(m *clusterv1.MachineSet) map[string]string {
	return map[string]string{
		FieldDeployment: m.Labels[clusterv1.MachineDeploymentNameLabel], FieldVersion: m.Spec.Template.Spec.Version,
		FieldReplicas: count(m.Spec.Replicas), FieldAvailableCount: count(m.Status.AvailableReplicas),
		FieldUpToDateCount: count(m.Status.UpToDateReplicas),
	}
}

// AddonSummary is the image of an add-on's first container.
func AddonSummary(containers []corev1.Container) map[string]string {
	if len(containers) == 0 {
		return map[string]string{}
	}
	return map[string]string{FieldImage: containers[0].Image}
}

// AddonKubeadmConfig names the kubeadm-config ConfigMap among the add-ons.
const AddonKubeadmConfig = "kubeadm-config"

// KubeadmConfigSummary is the kubernetesVersion and feature gates of the
// ClusterConfiguration in kubeadm-config (kubeadm's YAML), which KCP
// updates before it rolls a Machine and `kubeadm upgrade node` reads.
func KubeadmConfigSummary(clusterConfiguration string) map[string]string {
	s := map[string]string{}
	cc, err := workload.ParseClusterConfiguration(clusterConfiguration)
	if err != nil {
		s[FieldVersion] = "unreadable: " + err.Error()
		return s
	}
	s[FieldVersion] = cc.KubernetesVersion
	var gates []string
	for g, on := range cc.FeatureGates {
		gates = append(gates, g+"="+strconv.FormatBool(on))
	}
	sort.Strings(gates)
	if len(gates) > 0 {
		s[FieldFeatureGates] = strings.Join(gates, ",")
	}
	return s
}

// HostSummary is a BareMetalHost's state and who holds it; spareLabel is
// the label the provider marks its spares with ("": it keeps none).
func HostSummary(h *metal3.BareMetalHost, spareLabel string) map[string]string {
	s := map[string]string{FieldState: string(h.Status.Provisioning.State)}
	if h.Spec.ConsumerRef != nil {
		s[FieldConsumer] = h.Spec.ConsumerRef.Name
	}
	set(s, FieldSpare, spareLabel != "" && h.Labels[spareLabel] != "")
	set(s, FieldPowered, h.Status.PoweredOn)
	return s
}

// NodeSummary is a workload Node's readiness and kubelet.
func NodeSummary(n *corev1.Node) map[string]string {
	s := map[string]string{FieldKubelet: n.Status.NodeInfo.KubeletVersion}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			s[FieldReady] = string(c.Status)
		}
	}
	return s
}

// EtcdMemberSummary is an etcd member (its static pod in the workload
// cluster): its node, its image (when the pod names one) and whether KCP
// removed it.
func EtcdMemberSummary(p *corev1.Pod) map[string]string {
	s := map[string]string{FieldNode: p.Spec.NodeName}
	if len(p.Spec.Containers) > 0 {
		s[FieldImage] = p.Spec.Containers[0].Image
	}
	_, removed := p.Annotations[etcdMemberRemoved]
	set(s, FieldRemoved, removed)
	return s
}
