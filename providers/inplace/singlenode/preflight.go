package singlenode

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/cluster-api/util/collections"
)

// FailpointMarked is the point between the trigger's first write (the
// Machine marked update-in-progress) and the rest: a process armed with
// it (internal/failpoint) ends there, as one killed there would.
const FailpointMarked = "singlenode-trigger-marked"

// preflight is KCP's preflight check before it touches a Machine
// (reconcilers/kubeadmcontrolplane/preflight.go), for one Machine: none
// deleting, the Machine not found unhealthy by a MachineHealthCheck, and
// its control-plane components healthy. The components are judged by
// KCP's own function (pkg.Workload.UpdateStaticPodConditions) on the
// workload cluster as it is now, not on the Machine's conditions: KCP
// writes those and does not while the pause holds, so they may be as old
// as the pause. "" is a pass; otherwise why it failed.
//
// Kinder than KCP: the etcd member's own health (alarms, a learner) is
// not asked of etcd; with one member, its static pod stands for it.
func (r *Reconciler) preflight(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane, m *clusterv1.Machine) (string, error) {
	if !m.DeletionTimestamp.IsZero() {
		return "Machine " + m.Name + " is being deleted", nil
	}
	if why := unhealthy(m); why != "" {
		return why, nil
	}
	wl, err := r.Workloads.Client(ctx, cluster.Namespace, cluster.Name)
	if err != nil {
		return "", err
	}
	cp := &pkg.ControlPlane{KCP: kcp.DeepCopy(), Cluster: cluster, Machines: collections.FromMachines(m.DeepCopy())}
	(&pkg.Workload{Client: wl}).UpdateStaticPodConditions(ctx, cp)
	return componentsUnhealthy(cp.Machines[m.Name], cp.IsEtcdManaged()), nil
}

// unhealthy says why a MachineHealthCheck found m unhealthy ("": it did
// not), as KCP's preflight refuses to go on with such a Machine.
func unhealthy(m *clusterv1.Machine) string {
	if _, ok := m.Annotations[clusterv1.RemediateMachineAnnotation]; ok {
		return "Machine " + m.Name + " is marked for remediation"
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("Machine %s is unhealthy (%s: %s)", m.Name, c.Reason, c.Message)
	}
	return ""
}

// componentsUnhealthy names the control-plane components of m whose
// conditions (as UpdateStaticPodConditions set them) are not True.
func componentsUnhealthy(m *clusterv1.Machine, etcdManaged bool) string {
	types := []string{
		controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition,
		controlplanev1.KubeadmControlPlaneMachineControllerManagerPodHealthyCondition,
		controlplanev1.KubeadmControlPlaneMachineSchedulerPodHealthyCondition,
	}
	if etcdManaged {
		types = append(types, controlplanev1.KubeadmControlPlaneMachineEtcdPodHealthyCondition)
	}
	var bad []string
	for _, t := range types {
		c := meta.FindStatusCondition(m.Status.Conditions, t)
		switch {
		case c == nil:
			bad = append(bad, t+" not reported")
		case c.Status != metav1.ConditionTrue:
			bad = append(bad, fmt.Sprintf("%s %s (%s)", t, c.Status, c.Message))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "control-plane components of Machine " + m.Name + " are not healthy: " + strings.Join(bad, "; ")
}
