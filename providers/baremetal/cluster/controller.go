package cluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

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

// SetupWithManager registers the controller; a Cluster paused or
// unpaused wakes its BareMetalCluster.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&infrav1.BareMetalCluster{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(
			util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("BareMetalCluster"), mgr.GetClient(), &infrav1.BareMetalCluster{})),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), mgr.GetLogger()))).
		Named("baremetalcluster").Complete(r)
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
	// CAPI's contract: a Paused condition says whether the cluster or
	// the object is paused, and nothing else is done while it is.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, bmc); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	before := bmc.DeepCopy()
	cond := metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse, Reason: WaitingForEndpointReason,
		Message: "spec.controlPlaneEndpoint is not set: give the API server's VIP", ObservedGeneration: bmc.Generation}
	if bmc.Spec.ControlPlaneEndpoint.IsValid() {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, EndpointSetReason, ""
		provisioned := true
		bmc.Status.Initialization.Provisioned = &provisioned
	}
	bmc.Status.FailureDomains = bmc.Spec.FailureDomains
	meta.SetStatusCondition(&bmc.Status.Conditions, cond)
	return ctrl.Result{}, r.Client.Status().Patch(ctx, bmc, client.MergeFrom(before))
}
