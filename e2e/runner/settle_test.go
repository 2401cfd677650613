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
