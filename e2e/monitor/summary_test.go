package monitor

import (
	"strings"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// The summaries carry what the checks read, under the names they read.
func TestSummariesCarryWhatTheChecksRead(t *testing.T) {
	now := metav1.Now()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "sc-cp-a", UID: "u1", DeletionTimestamp: &now,
			Labels:      map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineDeploymentNameLabel: ""},
			Annotations: map[string]string{clusterv1.UpdateInProgressAnnotation: ""}},
		Spec: clusterv1.MachineSpec{Version: "v1.36.3", ProviderID: "upgradelab://cp-0/sc-cp-a",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{Name: "sc-cp-a-infra"}},
		Status: clusterv1.MachineStatus{Phase: "Running", NodeRef: clusterv1.MachineNodeReference{Name: "sc-cp-a"},
			Conditions: []metav1.Condition{{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionFalse}}},
	}
	got := MachineSummary(m)
	for k, want := range map[string]string{vocab.FieldPhase: "Running", vocab.FieldVersion: "v1.36.3", vocab.FieldUID: "u1", vocab.FieldInfra: "sc-cp-a-infra",
		vocab.FieldDeleting: "true", vocab.FieldUpdating: "true", vocab.FieldControlPlane: "true", vocab.FieldUpToDate: "False", vocab.FieldNode: "sc-cp-a"} {
		if got[k] != want {
			t.Errorf("Machine summary %s = %q, want %q (%v)", k, got[k], want, got)
		}
	}
	if _, ok := got[vocab.FieldAvailable]; ok {
		t.Errorf("a condition the Machine does not have is in its summary: %v", got)
	}
	if _, ok := got[vocab.FieldUpdateFailed]; ok {
		t.Errorf("a Machine without an Updating condition is summarised as failed: %v", got)
	}
	m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineUpdatingCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineInPlaceUpdateFailedReason})
	if got := MachineSummary(m); got[vocab.FieldUpdateFailed] != "true" {
		t.Errorf("a failed in-place update is not in the summary: %v", got)
	}

	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "sc-md"}},
		Spec: clusterv1.MachineSetSpec{Replicas: ptr.To[int32](2), Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{Version: "v1.36.3"}}}}
	if s := MachineSetSummary(ms); s[vocab.FieldDeployment] != "sc-md" || s[vocab.FieldVersion] != "v1.36.3" || s[vocab.FieldReplicas] != "2" {
		t.Errorf("MachineSet summary %v", s)
	}
	proxyPod := func(name, image string, gone bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: image}}}}
		if gone {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	pods := []corev1.Pod{proxyPod("a", "registry.k8s.io/kube-proxy:v1.36.3", false), proxyPod("b", "registry.k8s.io/kube-proxy:v1.35.3", false),
		proxyPod("c", "registry.k8s.io/kube-proxy:v1.34.0", true),
		{ObjectMeta: metav1.ObjectMeta{Name: "dns", Labels: map[string]string{"k8s-app": "kube-dns"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "coredns:v1.13.1"}}}}}
	s, err := AddonSummary([]corev1.Container{{Image: "registry.k8s.io/kube-proxy:v1.36.3"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-proxy"}}, pods)
	if err != nil || s[vocab.FieldImage] != "registry.k8s.io/kube-proxy:v1.36.3" || s[vocab.FieldPodImages] != "registry.k8s.io/kube-proxy:v1.35.3,registry.k8s.io/kube-proxy:v1.36.3" {
		t.Errorf("add-on summary %v, %v; want the template's image and its live pods' images only", s, err)
	}

	etcd := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Image: "registry.k8s.io/etcd:3.6.5-0"}}}}
	if s := EtcdMemberSummary(etcd); s[vocab.FieldNode] != "n1" || s[vocab.FieldImage] != "registry.k8s.io/etcd:3.6.5-0" {
		t.Errorf("etcd member summary %v", s)
	}
	if s := EtcdMemberSummary(&corev1.Pod{}); s[vocab.FieldImage] != "" {
		t.Errorf("an etcd member without containers (CAPI's in-memory etcd) has no image, got %v", s)
	}

	surge := intstr.FromInt32(0)
	k := &controlplanev1.KubeadmControlPlane{Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](3), Version: "v1.36.3",
		Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
			RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{MaxSurge: &surge}}}},
		Status: controlplanev1.KubeadmControlPlaneStatus{UpToDateReplicas: ptr.To[int32](2)}}
	if s := ControlPlaneSummary(k); s[vocab.FieldReplicas] != "3" || s[vocab.FieldMaxSurge] != "0" || s[vocab.FieldUpToDateCount] != "2" || s[vocab.FieldAvailableCount] != "0" || s[vocab.FieldCoreDNS] != "" {
		t.Errorf("KCP summary %v", s)
	}
	k.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag = "v1.13.1"
	if s := ControlPlaneSummary(k); s[vocab.FieldCoreDNS] != "v1.13.1" {
		t.Errorf("KCP summary %v: want the dns.imageTag KCP is asked for", s)
	}
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"example.com/spare": "true"}},
		Spec:   metal3.BareMetalHostSpec{ConsumerRef: &corev1.ObjectReference{Name: "sc-cp-a-infra"}},
		Status: metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: metal3.StateProvisioned}}}
	if s := HostSummary(h, "example.com/spare"); s[vocab.FieldConsumer] != "sc-cp-a-infra" || s[vocab.FieldSpare] != "true" || s[vocab.FieldState] != "provisioned" {
		t.Errorf("host summary %v", s)
	}
}

func TestKubeadmConfigSummaryReadsTheVersionAndGates(t *testing.T) {
	s := KubeadmConfigSummary("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\nfeatureGates:\n  B: false\n  A: true\n")
	if s[vocab.FieldVersion] != "v1.36.3" || s[vocab.FieldFeatureGates] != "A=true,B=false" {
		t.Fatalf("summary %v", s)
	}
	if s := KubeadmConfigSummary(""); s[vocab.FieldVersion] != "" || s[vocab.FieldFeatureGates] != "" {
		t.Fatalf("empty ClusterConfiguration (CAPI's in-memory provider): %v", s)
	}
	if s := KubeadmConfigSummary("kubernetesVersion: [1"); !strings.HasPrefix(s[vocab.FieldVersion], "unreadable") {
		t.Fatalf("broken YAML: %v", s)
	}
}

// A paused Cluster says so in its summary; an unpaused one does not.
func TestClusterSummarySaysWhetherTheClusterIsPaused(t *testing.T) {
	c := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	if s := ClusterSummary(c); s[vocab.FieldPaused] != "true" {
		t.Fatalf("paused Cluster: summary %v", s)
	}
	c.Spec.Paused = ptr.To(false)
	if s := ClusterSummary(c); s[vocab.FieldPaused] != "" {
		t.Fatalf("unpaused Cluster: summary %v", s)
	}
}

// A static pod in CrashLoopBackOff is recorded with the binary's last
// words; one that runs is not.
func TestStaticPodSummaryCarriesACrashLoopsLastWords(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "cp-2", Containers: []corev1.Container{{Image: "registry.k8s.io/kube-apiserver:v1.36.3"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "unrecognized feature gate: X"}},
			}}}}
	got := StaticPodSummary(p)
	if got[vocab.FieldCrashLoop] != "unrecognized feature gate: X" || got[vocab.FieldReady] != "False" || got[vocab.FieldNode] != "cp-2" {
		t.Errorf("crash-looping pod: %v", got)
	}
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if got := StaticPodSummary(p); got[vocab.FieldCrashLoop] != "" {
		t.Errorf("running pod recorded as crash-looping: %v", got)
	}
}

// What KCP says blocks its rollout is recorded in its words, one line.
func TestControlPlaneSummarySaysWhatBlocksKCP(t *testing.T) {
	k := &controlplanev1.KubeadmControlPlane{Status: controlplanev1.KubeadmControlPlaneStatus{Conditions: []metav1.Condition{
		{Type: controlplanev1.KubeadmControlPlaneScalingDownCondition, Status: metav1.ConditionTrue,
			Message: "Scaling down from 3 to 2 replicas is blocked because:\n* waiting for control plane components to become healthy"},
		{Type: controlplanev1.KubeadmControlPlaneScalingUpCondition, Status: metav1.ConditionFalse},
		{Type: controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, Status: metav1.ConditionFalse,
			Message: "* Machine sc-cp-a:\n  * APIServerPodHealthy: CrashLoopBackOff"},
	}}}
	want := "Scaling down from 3 to 2 replicas is blocked because: * waiting for control plane components to become healthy; " +
		"control plane components: * Machine sc-cp-a: * APIServerPodHealthy: CrashLoopBackOff"
	if got := ControlPlaneSummary(k)[vocab.FieldBlocked]; got != want {
		t.Errorf("blocked: %q\nwant      %q", got, want)
	}
	k.Status.Conditions = k.Status.Conditions[1:2]
	if got := ControlPlaneSummary(k)[vocab.FieldBlocked]; got != "" {
		t.Errorf("KCP not blocked recorded as blocked: %q", got)
	}
}
