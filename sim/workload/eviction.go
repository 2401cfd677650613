package workload

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// The Eviction API as kube-apiserver implements it
// (pkg/registry/core/pod/storage/eviction.go), on the budgets the lab's
// disruption controller keeps (apps.go):
//
//   - a pod that is already terminating, has finished, or is still
//     pending is deleted without asking any budget;
//   - a pod covered by more than one budget is refused (500);
//   - (kube-apiserver also refuses while a budget's observedGeneration
//     is behind its generation; CAPI's in-memory store bumps generation
//     on every write, status included, so that cannot be told here: the
//     lab's disruption controller recomputes the status at the tick after
//     any write to the cluster instead);
//   - a pod that is not Ready may go while the budget is met
//     (currentHealthy >= desiredHealthy; the IfHealthyBudget policy,
//     the default);
//   - otherwise the budget must allow a disruption: it is taken
//     (disruptionsAllowed decremented, the pod listed in disruptedPods)
//     and the pod deleted, or the eviction is refused with 429
//     TooManyRequests and the DisruptionBudget cause.
//
// Deleting a pod sets its deletionTimestamp; the node's kubelet ends it
// (apps.go), so an evicted pod is gone only once its node has stopped it.

// Evict evicts a pod of cluster.
func (c *Clusters) Evict(ctx context.Context, cluster, namespace, name string) error {
	cl := c.client(cluster)
	pod := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodPending {
		return c.deleteEvicted(ctx, cluster, pod, "")
	}
	// The budget is read, checked and taken as one step: a write of it
	// in between (the disruption controller's status, another eviction)
	// is a conflict, and the step is made again, as kube-apiserver's
	// eviction retries; two evictions never take one disruption.
	var budget string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		budget, err = c.takeDisruption(ctx, cluster, cl, pod)
		return err
	})
	if err != nil {
		return err
	}
	return c.deleteEvicted(ctx, cluster, pod, budget)
}

// takeDisruption asks the budget covering pod for one disruption and
// takes it: the budget's name ("" for none), or the refusal.
func (c *Clusters) takeDisruption(ctx context.Context, cluster string, cl inmemoryclient.Client, pod *corev1.Pod) (string, error) {
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := cl.List(ctx, pdbs, client.InNamespace(pod.Namespace)); err != nil {
		return "", err
	}
	var covering []policyv1.PodDisruptionBudget
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		covering = append(covering, pdb)
	}
	switch len(covering) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
	}
	pdb := covering[0]
	if !podReady(pod) && pdb.Status.DesiredHealthy > 0 && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy {
		return pdb.Name, nil
	}
	if pdb.Status.DisruptionsAllowed <= 0 {
		return "", c.refuse(cluster, pod, &pdb, fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[pod.Name] = metav1.Now()
	if err := cl.Update(ctx, &pdb); err != nil {
		return "", err
	}
	return pdb.Name, nil
}

func (c *Clusters) refuse(cluster string, pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget, cause string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	c.emit(Event{Cluster: cluster, Node: pod.Spec.NodeName, Reason: vocab.EventEvictionDenied, Message: fmt.Sprintf("eviction of %s/%s refused: %s", pod.Namespace, pod.Name, cause),
		Data: map[string]string{"pod": pod.Namespace + "/" + pod.Name, "budget": pdb.Name}})
	return err
}

func (c *Clusters) deleteEvicted(ctx context.Context, cluster string, pod *corev1.Pod, budget string) error {
	if err := c.client(cluster).Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.emit(Event{Cluster: cluster, Node: pod.Spec.NodeName, Reason: vocab.EventEvicted, Message: fmt.Sprintf("pod %s/%s evicted from %s", pod.Namespace, pod.Name, pod.Spec.NodeName),
		Data: map[string]string{"pod": pod.Namespace + "/" + pod.Name, "budget": budget}})
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// budgetStatus is what the disruption controller computes for pdb from
// the pods it selects: expected is how many pods the budget's owners
// want (their replicas), healthy the Ready ones not being disrupted.
// minAvailable as a percentage and maxUnavailable are read against
// expected, rounding up as the disruption controller does.
//
// An evicted pod not yet gone counts as disrupted for deletionTimeout
// after its eviction (the controller's DeletionTimeout: two minutes of
// the world's time, so the run's scale of it).
func budgetStatus(pdb *policyv1.PodDisruptionBudget, expected, healthy int32, now time.Time, deletionTimeout time.Duration) policyv1.PodDisruptionBudgetStatus {
	desired := expected
	switch {
	case pdb.Spec.MinAvailable != nil:
		v, _ := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		desired = int32(v)
	case pdb.Spec.MaxUnavailable != nil:
		v, _ := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		desired = max(0, expected-int32(v))
	}
	st := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation, ExpectedPods: expected, CurrentHealthy: healthy, DesiredHealthy: desired,
		DisruptionsAllowed: max(0, healthy-desired),
	}
	for name, at := range pdb.Status.DisruptedPods {
		if now.Sub(at.Time) < deletionTimeout {
			if st.DisruptedPods == nil {
				st.DisruptedPods = map[string]metav1.Time{}
			}
			st.DisruptedPods[name] = at
		}
	}
	return st
}
