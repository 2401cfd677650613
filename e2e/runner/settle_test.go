package runner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The settle waits for each Machine as KCP judges it: UpToDate True, and
// its Node's kubelet at the Machine's version.
func TestMachinesCaughtUpAsKCPJudgesThem(t *testing.T) {
	machine := func(upToDate metav1.ConditionStatus, version, kubelet string) clusterv1.Machine {
		m := clusterv1.Machine{Spec: clusterv1.MachineSpec{Version: version}}
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineUpToDateCondition, Status: upToDate}}
		if kubelet != "" {
			m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: kubelet}
		}
		return m
	}
	for _, c := range []struct {
		name     string
		machines []clusterv1.Machine
		want     bool
	}{
		{"up to date, the new kubelet", []clusterv1.Machine{machine(metav1.ConditionTrue, "v1.36.3", "v1.36.3")}, true},
		{"up to date, no Node yet", []clusterv1.Machine{machine(metav1.ConditionTrue, "v1.36.3", "")}, true},
		{"up to date by its spec, the Node still on the old kubelet", []clusterv1.Machine{machine(metav1.ConditionTrue, "v1.36.3", "v1.35.3")}, false},
		{"one of two not up to date", []clusterv1.Machine{machine(metav1.ConditionTrue, "v1.36.3", "v1.36.3"), machine(metav1.ConditionFalse, "v1.36.3", "v1.36.3")}, false},
		{"no UpToDate condition yet", []clusterv1.Machine{{Spec: clusterv1.MachineSpec{Version: "v1.36.3"}}}, false},
	} {
		if got := machinesCaughtUp(c.machines); got != c.want {
			t.Errorf("%s: machinesCaughtUp = %v, want %v", c.name, got, c.want)
		}
	}
}

// The settle waits for what the upgrade set in motion beyond the
// Machines: a ClusterClass topology that moves its MachineDeployments
// last, and a MachineDeployment whose new MachineSet has not yet reached
// its status.
func TestRolloutsOverAsCAPISaysThem(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status}
	}
	topology := func(reconciled metav1.ConditionStatus) *clusterv1.Cluster {
		c := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: "cc"}, Version: "v1.36.3"}}}
		c.Status.Conditions = []metav1.Condition{cond(clusterv1.ClusterTopologyReconciledCondition, reconciled)}
		return c
	}
	md := func(version string, generation, observed int64, conds ...metav1.Condition) clusterv1.MachineDeployment {
		d := clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		d.Spec.Template.Spec.Version = version
		d.Status.ObservedGeneration = observed
		d.Status.Conditions = conds
		return d
	}
	available := cond(clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionTrue)
	notRolling := cond(clusterv1.MachineDeploymentRollingOutCondition, metav1.ConditionFalse)
	for _, c := range []struct {
		name    string
		cluster *clusterv1.Cluster
		mds     []clusterv1.MachineDeployment
		want    bool
	}{
		{"topology reconciled, its MachineDeployment moved and settled", topology(metav1.ConditionTrue),
			[]clusterv1.MachineDeployment{md("v1.36.3", 2, 2, available, notRolling)}, true},
		{"topology not reconciled yet", topology(metav1.ConditionFalse),
			[]clusterv1.MachineDeployment{md("v1.36.3", 2, 2, available, notRolling)}, false},
		{"the topology has not moved the MachineDeployment yet", topology(metav1.ConditionTrue),
			[]clusterv1.MachineDeployment{md("v1.35.3", 1, 1, available, notRolling)}, false},
		{"the MachineDeployment's status is for its previous spec", topology(metav1.ConditionTrue),
			[]clusterv1.MachineDeployment{md("v1.36.3", 2, 1, available, notRolling)}, false},
		{"the MachineDeployment's availability unknown", topology(metav1.ConditionTrue),
			[]clusterv1.MachineDeployment{md("v1.36.3", 2, 2, cond(clusterv1.MachineDeploymentAvailableCondition, metav1.ConditionUnknown), notRolling)}, false},
		{"the MachineDeployment still rolling out", topology(metav1.ConditionTrue),
			[]clusterv1.MachineDeployment{md("v1.36.3", 2, 2, available, cond(clusterv1.MachineDeploymentRollingOutCondition, metav1.ConditionTrue))}, false},
		{"a plain Cluster has no topology to wait for", &clusterv1.Cluster{},
			[]clusterv1.MachineDeployment{md("v1.36.3", 2, 2, available, notRolling)}, true},
	} {
		if got := rolloutsOver(c.cluster, c.mds); got != c.want {
			t.Errorf("%s: rolloutsOver = %v, want %v", c.name, got, c.want)
		}
	}
}
