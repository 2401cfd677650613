// Package cluster is the BareMetalCluster controller. On bare metal the
// API server's endpoint is a VIP the site assigns, so the cluster's
// infrastructure is ready as soon as the endpoint is given.
package cluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// Reasons of the Ready condition.
const (
	WaitingForEndpointReason = "WaitingForControlPlaneEndpoint"
	EndpointSetReason        = "ControlPlaneEndpointSet"
)

// Reconciler drives BareMetalClusters.
type Reconciler struct {
	Client client.Client
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&infrav1.BareMetalCluster{}).Named("baremetalcluster").Complete(r)
}

// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalclusters/status,verbs=get;update;patch

// Reconcile reports the cluster provisioned once its endpoint is set.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bmc := &infrav1.BareMetalCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, bmc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, bmc.ObjectMeta)
	if err != nil || cluster == nil {
		return ctrl.Result{}, err // CAPI sets the owner; that wakes us
	}
	if annotations.IsPaused(cluster, bmc) {
		return ctrl.Result{}, nil
	}
	before := bmc.DeepCopy()
	cond := metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: WaitingForEndpointReason,
		Message: "spec.controlPlaneEndpoint is not set: give the API server's VIP", ObservedGeneration: bmc.Generation}
	if bmc.Spec.ControlPlaneEndpoint.IsValid() {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, EndpointSetReason, ""
		provisioned := true
		bmc.Status.Initialization.Provisioned = &provisioned
	}
	meta.SetStatusCondition(&bmc.Status.Conditions, cond)
	return ctrl.Result{}, r.Client.Status().Patch(ctx, bmc, client.MergeFrom(before))
}
