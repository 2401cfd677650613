package inplace

import (
	"context"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// OwnerAsksAnnotation is what a failed update's owner asks for now
// (updateKey of its template's image and NIC firmware), written on the
// BareMetalMachine when it changes.
const OwnerAsksAnnotation = "inplace.upgradelab.dev/owner-asks"

// RevertWatcher brings a revert to a failed update promptly. CAPI's
// Machine controller calls UpdateMachine again after a failure only on
// its error back-off, which after a few failures is minutes (up to about
// 16 at controller-runtime's default), so a user's revert of the owner
// would wait that long before UpdateMachine sees it and abandons the
// failed update. The watcher follows the KubeadmControlPlanes and
// MachineDeployments: when what an owner asks differs from what a
// Machine's failed update was for, it writes that on the Machine's
// BareMetalMachine, a change CAPI's Machine controller watches, which
// calls the hook at once.
type RevertWatcher struct {
	Client  client.Client
	Updater *Updater
}

// SetupWithManager watches Machines, and their owners' changes.
func (w *RevertWatcher) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Machine{}).
		Watches(&controlplanev1.KubeadmControlPlane{}, handler.EnqueueRequestsFromMapFunc(w.machinesOf(clusterv1.MachineControlPlaneNameLabel))).
		Watches(&clusterv1.MachineDeployment{}, handler.EnqueueRequestsFromMapFunc(w.machinesOf(clusterv1.MachineDeploymentNameLabel))).
		Named("inplace-revert").
		Complete(w)
}

// machinesOf maps an owner to its Machines (by the label naming it).
func (w *RevertWatcher) machinesOf(label string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		machines := &clusterv1.MachineList{}
		if err := w.Client.List(ctx, machines, client.InNamespace(o.GetNamespace()), client.MatchingLabels{label: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, m := range machines.Items {
			if _, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]; updating {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
			}
		}
		return out
	}
}

// Reconcile marks one Machine's BareMetalMachine when its failed update's
// owner asks for something else now.
func (w *RevertWatcher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &clusterv1.Machine{}
	if err := w.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]; !updating || m.Spec.InfrastructureRef.Kind != "BareMetalMachine" {
		return ctrl.Result{}, nil
	}
	bmm := &infrav1.BareMetalMachine{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, bmm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	failedKey, _, isFailed := recordedFailure(bmm)
	if !isFailed {
		return ctrl.Result{}, nil
	}
	asked, owner, err := w.Updater.ownerAsks(ctx, m)
	if err != nil || owner == nil {
		return ctrl.Result{}, err
	}
	askKey := updateKey(asked.Image, asked.NICFirmware)
	if askKey == failedKey || bmm.Annotations[OwnerAsksAnnotation] == askKey {
		return ctrl.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("the owner of a failed in-place update asks for something else now; telling CAPI's Machine controller", "owner", owner.kind+" "+owner.name, "asks", describeAsk(asked))
	return ctrl.Result{}, w.Updater.annotate(ctx, bmm, OwnerAsksAnnotation, askKey)
}
