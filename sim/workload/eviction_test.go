package workload

import (
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// An evicted pod counts as disrupted for the disruption controller's
// DeletionTimeout, two minutes of the world's time: at scale 0.01 that
// is 1.2 s of the run's, not two minutes of it.
func TestAnEvictedPodCountsAsDisruptedForTheScaledTimeout(t *testing.T) {
	now := time.Now()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: map[string]metav1.Time{
			"recent": metav1.NewTime(now.Add(-time.Second)),
			"old":    metav1.NewTime(now.Add(-2 * time.Second)),
		}},
	}
	st := budgetStatus(pdb, 3, 3, now, 1200*time.Millisecond)
	if _, ok := st.DisruptedPods["recent"]; !ok {
		t.Errorf("a pod evicted 1 s ago is no longer disrupted under a 1.2 s timeout: %v", st.DisruptedPods)
	}
	if _, ok := st.DisruptedPods["old"]; ok {
		t.Errorf("a pod evicted 2 s ago still counts as disrupted under a 1.2 s timeout: %v", st.DisruptedPods)
	}
	if st.DisruptionsAllowed != 1 {
		t.Errorf("3 healthy of 3 under maxUnavailable 1: %d disruptions allowed; want 1", st.DisruptionsAllowed)
	}
}
