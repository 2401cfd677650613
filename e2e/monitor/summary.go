package monitor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/workload"
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
		vocab.FieldPhase: m.Status.Phase, vocab.FieldVersion: m.Spec.Version, vocab.FieldNode: m.Status.NodeRef.Name,
		vocab.FieldProviderID: m.Spec.ProviderID, vocab.FieldUID: string(m.UID), vocab.FieldInfra: m.Spec.InfrastructureRef.Name,
		vocab.FieldDeployment: m.Labels[clusterv1.MachineDeploymentNameLabel],
	}
	set(s, vocab.FieldDeleting, !m.DeletionTimestamp.IsZero())
	_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
	set(s, vocab.FieldUpdating, updating)
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpdatingCondition); c != nil {
		set(s, vocab.FieldUpdateFailed, c.Reason == clusterv1.MachineInPlaceUpdateFailedReason)
	}
	_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
	set(s, vocab.FieldControlPlane, cp)
	if name := m.Labels[clusterv1.MachineControlPlaneNameLabel]; name != "" {
		s[vocab.FieldControlPlaneName] = name
	}
	condition(s, vocab.FieldUpToDate, m.Status.Conditions, clusterv1.MachineUpToDateCondition)
	condition(s, vocab.FieldHealthCheck, m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition)
	condition(s, vocab.FieldAvailable, m.Status.Conditions, clusterv1.MachineAvailableCondition)
	if t := m.Spec.Deletion.NodeDrainTimeoutSeconds; t != nil && *t > 0 {
		s[vocab.FieldDrainTimeout] = strconv.Itoa(int(*t))
	}
	if d := m.Status.Deletion; d != nil && !d.NodeDrainStartTime.IsZero() {
		s[vocab.FieldDrainStarted] = d.NodeDrainStartTime.UTC().Format(time.RFC3339)
	}
	return s
}

// ControlPlaneSummary is a KubeadmControlPlane's spec and counts.
func ControlPlaneSummary(k *controlplanev1.KubeadmControlPlane) map[string]string {
	s := map[string]string{
		vocab.FieldReplicas: count(k.Spec.Replicas), vocab.FieldVersion: k.Spec.Version, vocab.FieldMaxSurge: "1",
		vocab.FieldUpToDateCount: count(k.Status.UpToDateReplicas), vocab.FieldAvailableCount: count(k.Status.AvailableReplicas),
		vocab.FieldTotal: count(k.Status.Replicas),
	}
	if ms := k.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; ms != nil {
		s[vocab.FieldMaxSurge] = ms.String()
	}
	if tag := k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag; tag != "" {
		s[vocab.FieldCoreDNS] = tag
	}
	condition(s, vocab.FieldAvailable, k.Status.Conditions, controlplanev1.KubeadmControlPlaneAvailableCondition)
	if why := kcpBlocked(k.Status.Conditions); why != "" {
		s[vocab.FieldBlocked] = why
	}
	return s
}

// kcpBlocked is why KCP holds its rollout, in its own words ("": it does
// not): its ScalingUp or ScalingDown message when a preflight check
// blocks it, and what its ControlPlaneComponentsHealthy condition says
// when False. KCP's bulleted lines are joined into one.
func kcpBlocked(conds []metav1.Condition) string {
	var parts []string
	for _, t := range []string{controlplanev1.KubeadmControlPlaneScalingUpCondition, controlplanev1.KubeadmControlPlaneScalingDownCondition} {
		if c := meta.FindStatusCondition(conds, t); c != nil && strings.Contains(c.Message, "is blocked because") {
			parts = append(parts, c.Message)
		}
	}
	if c := meta.FindStatusCondition(conds, controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition); c != nil && c.Status == metav1.ConditionFalse {
		parts = append(parts, "control plane components: "+c.Message)
	}
	return strings.Join(strings.Fields(strings.Join(parts, "; ")), " ")
}

// DeploymentSummary is a MachineDeployment's spec and counts.
func DeploymentSummary(d *clusterv1.MachineDeployment) map[string]string {
	s := map[string]string{
		vocab.FieldReplicas: count(d.Spec.Replicas), vocab.FieldVersion: d.Spec.Template.Spec.Version,
		vocab.FieldMaxSurge: "1", vocab.FieldMaxUnavailable: "0",
		vocab.FieldUpToDateCount: count(d.Status.UpToDateReplicas), vocab.FieldAvailableCount: count(d.Status.AvailableReplicas),
		vocab.FieldTotal: count(d.Status.Replicas),
	}
	if ru := d.Spec.Rollout.Strategy.RollingUpdate; ru.MaxSurge != nil {
		s[vocab.FieldMaxSurge] = ru.MaxSurge.String()
	}
	if ru := d.Spec.Rollout.Strategy.RollingUpdate; ru.MaxUnavailable != nil {
		s[vocab.FieldMaxUnavailable] = ru.MaxUnavailable.String()
	}
	return s
}

// ClusterSummary is CAPI's verdict on a Cluster.
func ClusterSummary(c *clusterv1.Cluster) map[string]string {
	s := map[string]string{}
	set(s, vocab.FieldPaused, ptr.Deref(c.Spec.Paused, false))
	condition(s, vocab.FieldAvailable, c.Status.Conditions, clusterv1.ClusterAvailableCondition)
	condition(s, vocab.FieldCPUpToDate, c.Status.Conditions, clusterv1.ClusterControlPlaneMachinesUpToDateCondition)
	condition(s, vocab.FieldWorkersUpToDate, c.Status.Conditions, clusterv1.ClusterWorkerMachinesUpToDateCondition)
	condition(s, vocab.FieldRollingOut, c.Status.Conditions, clusterv1.ClusterRollingOutCondition)
	condition(s, vocab.FieldCPMachinesReady, c.Status.Conditions, clusterv1.ClusterControlPlaneMachinesReadyCondition)
	condition(s, vocab.FieldWorkerMachinesReady, c.Status.Conditions, clusterv1.ClusterWorkerMachinesReadyCondition)
	return s
}

// MachineSetSummary is a MachineSet's owner, version and counts.
func MachineSetSummary(m *clusterv1.MachineSet) map[string]string {
	return map[string]string{
		vocab.FieldDeployment: m.Labels[clusterv1.MachineDeploymentNameLabel], vocab.FieldVersion: m.Spec.Template.Spec.Version,
		vocab.FieldReplicas: count(m.Spec.Replicas), vocab.FieldAvailableCount: count(m.Status.AvailableReplicas),
		vocab.FieldUpToDateCount: count(m.Status.UpToDateReplicas),
	}
}

// AddonSummary is an add-on's template image (its first container's)
// and, in vocab.FieldPodImages, the distinct images its live (not
// terminating) pods run: those of pods (kube-system's) that its
// selector selects.
func AddonSummary(containers []corev1.Container, selector *metav1.LabelSelector, pods []corev1.Pod) (map[string]string, error) {
	s := map[string]string{}
	if len(containers) > 0 {
		s[vocab.FieldImage] = containers[0].Image
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("add-on selector: %w", err)
	}
	seen := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && len(p.Spec.Containers) > 0 && sel.Matches(labels.Set(p.Labels)) {
			seen[p.Spec.Containers[0].Image] = true
		}
	}
	if len(seen) > 0 {
		s[vocab.FieldPodImages] = strings.Join(slices.Sorted(maps.Keys(seen)), ",")
	}
	return s, nil
}

// KubeadmConfigSummary is the kubernetesVersion and feature gates of the
// ClusterConfiguration in kubeadm-config (kubeadm's YAML), which KCP
// updates before it rolls a Machine and `kubeadm upgrade node` reads.
func KubeadmConfigSummary(clusterConfiguration string) map[string]string {
	s := map[string]string{}
	cc, err := workload.ParseClusterConfiguration(clusterConfiguration)
	if err != nil {
		s[vocab.FieldVersion] = "unreadable: " + err.Error()
		return s
	}
	s[vocab.FieldVersion] = cc.KubernetesVersion
	var gates []string
	for g, on := range cc.FeatureGates {
		gates = append(gates, g+"="+strconv.FormatBool(on))
	}
	sort.Strings(gates)
	if len(gates) > 0 {
		s[vocab.FieldFeatureGates] = strings.Join(gates, ",")
	}
	return s
}

// HostSummary is a BareMetalHost's state and who holds it; spareLabel is
// the label the provider marks its spares with ("": it keeps none).
func HostSummary(h *metal3.BareMetalHost, spareLabel string) map[string]string {
	s := map[string]string{vocab.FieldState: string(h.Status.Provisioning.State)}
	if h.Spec.ConsumerRef != nil {
		s[vocab.FieldConsumer] = h.Spec.ConsumerRef.Name
	}
	set(s, vocab.FieldSpare, spareLabel != "" && h.Labels[spareLabel] != "")
	set(s, vocab.FieldPowered, h.Status.PoweredOn)
	return s
}

// NodeSummary is a workload Node's readiness and kubelet.
func NodeSummary(n *corev1.Node) map[string]string {
	s := map[string]string{vocab.FieldKubelet: n.Status.NodeInfo.KubeletVersion}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			s[vocab.FieldReady] = string(c.Status)
		}
	}
	return s
}

// StaticPodSummary is a control-plane static pod (its mirror pod): its
// node, image, readiness and, while its container waits in
// CrashLoopBackOff, why it last exited (KCP reports such a pod failed).
func StaticPodSummary(p *corev1.Pod) map[string]string {
	s := map[string]string{vocab.FieldNode: p.Spec.NodeName}
	if len(p.Spec.Containers) > 0 {
		s[vocab.FieldImage] = p.Spec.Containers[0].Image
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			s[vocab.FieldReady] = string(c.Status)
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			why := "exited"
			if t := c.LastTerminationState.Terminated; t != nil && t.Message != "" {
				why = t.Message
			}
			s[vocab.FieldCrashLoop] = why
		}
	}
	return s
}

// EtcdMemberSummary is an etcd member (its static pod in the workload
// cluster): its node, its image (when the pod names one) and whether KCP
// removed it.
func EtcdMemberSummary(p *corev1.Pod) map[string]string {
	s := map[string]string{vocab.FieldNode: p.Spec.NodeName}
	if len(p.Spec.Containers) > 0 {
		s[vocab.FieldImage] = p.Spec.Containers[0].Image
	}
	_, removed := p.Annotations[etcdMemberRemoved]
	set(s, vocab.FieldRemoved, removed)
	return s
}
