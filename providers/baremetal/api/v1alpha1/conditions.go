package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions and SetConditions let CAPI's condition helpers
// (sigs.k8s.io/cluster-api/util/conditions, util/paused) read and write
// the v1beta2 conditions of the provider's objects.

// GetConditions returns the machine's conditions.
func (m *BareMetalMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the machine's conditions.
func (m *BareMetalMachine) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// GetConditions returns the cluster's conditions.
func (c *BareMetalCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the cluster's conditions.
func (c *BareMetalCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }
