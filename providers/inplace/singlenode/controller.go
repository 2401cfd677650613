// Package singlenode upgrades a one-machine KubeadmControlPlane in place.
//
// Upstream KCP refuses maxSurge 0 below three replicas and always creates
// a surge Machine for one replica, so a single-node control plane cannot
// be updated in place without a spare host. This controller drives CAPI's
// own in-place protocol for that one Machine instead of KCP: the same
// annotations, the same desired objects (computed by KCP's own package),
// and CAPI's Machine controller calling the UpdateMachine hook. To keep
// KCP from creating the surge Machine first, it holds an opted-in KCP
// paused while the control plane is steady, runs the update while KCP is
// paused, and lets KCP go once the Machine matches the new spec, so KCP
// finds it up to date. docs/SINGLE-NODE.md says what this gives up.
package singlenode

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Annotations on the KubeadmControlPlane.
const (
	// Annotation opts a one-replica KCP in ("true").
	Annotation = "inplace.upgradelab.dev/single-node"
	// PausedByAnnotation marks a pause this controller set (and may lift).
	PausedByAnnotation = "inplace.upgradelab.dev/paused-by-single-node"
)

// kcpManager is KCP's field manager: objects this controller applies look
// to KCP as if it had applied them itself.
const kcpManager = "capi-kubeadmcontrolplane"

// Reconciler drives opted-in KubeadmControlPlanes.
type Reconciler struct {
	Client client.Client
	// Workloads reaches a workload cluster (to see that KCP finished its
	// work there before pausing it).
	Workloads Workloads
}

// Workloads gives a client of a workload cluster.
type Workloads interface {
	Client(ctx context.Context, namespace, cluster string) (client.Client, error)
}

// SetupWithManager watches KCPs and their Machines.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&controlplanev1.KubeadmControlPlane{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.GetLabels()[clusterv1.MachineControlPlaneNameLabel]
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		})).
		Named("singlenode").
		Complete(r)
}

// Reconcile holds, updates, or releases one KCP.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, kcp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if kcp.Annotations[Annotation] != "true" || kcp.Spec.Replicas == nil || *kcp.Spec.Replicas != 1 || !kcp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: kcp.Namespace, Name: kcp.Labels[clusterv1.ClusterNameLabel]}, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(kcp.Namespace), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if len(machines.Items) != 1 || !machines.Items[0].Status.NodeRef.IsDefined() {
		return ctrl.Result{}, r.release(ctx, kcp) // provisioning, or not ours to drive
	}
	m := &machines.Items[0]
	upToDate, res, err := r.upToDate(ctx, cluster, kcp, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
	switch {
	case updating:
		return ctrl.Result{RequeueAfter: 2 * time.Second}, r.hold(ctx, kcp)
	case upToDate && steady(kcp) && r.addonsDone(ctx, cluster, kcp):
		return ctrl.Result{}, r.hold(ctx, kcp) // keep KCP from surging on the next change
	case upToDate:
		return ctrl.Result{RequeueAfter: 2 * time.Second}, r.release(ctx, kcp) // let KCP see the Machine up to date
	case !res.EligibleForInPlaceUpdate:
		log.FromContext(ctx).Info("the change cannot be made in place; leaving it to KCP", "why", strings.Join(res.LogMessages, "; "))
		return ctrl.Result{}, r.release(ctx, kcp)
	}
	if err := r.hold(ctx, kcp); err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("updating the single control-plane Machine in place", "machine", m.Name, "why", strings.Join(res.LogMessages, "; "))
	return ctrl.Result{RequeueAfter: 2 * time.Second}, r.trigger(ctx, m, res)
}

// steady: KCP has seen its current spec and reports everything done: its
// Machine up to date, ready and available, etcd and the control plane
// components healthy. Pausing earlier would freeze KCP mid-way.
func steady(kcp *controlplanev1.KubeadmControlPlane) bool {
	if kcp.Status.ObservedGeneration != kcp.Generation || ptrValue(kcp.Status.UpToDateReplicas) != 1 ||
		ptrValue(kcp.Status.ReadyReplicas) != 1 || ptrValue(kcp.Status.AvailableReplicas) != 1 {
		return false
	}
	for _, c := range []string{
		controlplanev1.KubeadmControlPlaneAvailableCondition, controlplanev1.KubeadmControlPlaneMachinesReadyCondition,
		controlplanev1.KubeadmControlPlaneMachinesUpToDateCondition, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition,
		controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition,
	} {
		if !meta.IsStatusConditionTrue(kcp.Status.Conditions, c) {
			return false
		}
	}
	return true
}

// addonsDone: KCP's last work after an upgrade, in the workload cluster,
// is done: kube-proxy runs the image of KCP's version (KCP updates it only
// once every Machine is up to date, in a reconcile that a pause set too
// early would never let run). A cluster without kube-proxy has nothing to
// wait for; one that cannot be reached yet is not done.
func (r *Reconciler) addonsDone(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) bool {
	if r.Workloads == nil {
		return true
	}
	wl, err := r.Workloads.Client(ctx, cluster.Namespace, cluster.Name)
	if err != nil {
		return false
	}
	ds := &appsv1.DaemonSet{}
	if err := wl.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kube-proxy"}, ds); err != nil {
		return apierrors.IsNotFound(err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "kube-proxy" && !strings.HasSuffix(c.Image, ":"+kcp.Spec.Version) {
			return false
		}
	}
	return true
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// upToDate asks KCP's own package whether m matches the KCP's spec, and
// what the desired objects are.
func (r *Reconciler) upToDate(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane, m *clusterv1.Machine) (bool, *pkg.UpToDateResult, error) {
	mapping, err := r.Client.RESTMapper().RESTMapping(m.Spec.InfrastructureRef.GroupKind())
	if err != nil {
		return false, nil, fmt.Errorf("machine %s: infrastructure kind: %w", m.Name, err)
	}
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, infra); err != nil {
		return false, nil, err
	}
	kc := &bootstrapv1.KubeadmConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, kc); err != nil {
		return false, nil, err
	}
	now := metav1.Now()
	return pkg.UpToDate(ctx, r.Client, cluster, m, kcp, &now,
		map[string]*unstructured.Unstructured{m.Name: infra}, map[string]*bootstrapv1.KubeadmConfig{m.Name: kc})
}

// trigger does what KCP does to start an in-place update: mark the
// Machine, apply the desired InfraMachine, KubeadmConfig and Machine,
// and mark the UpdateMachine hook pending.
func (r *Reconciler) trigger(ctx context.Context, m *clusterv1.Machine, res *pkg.UpToDateResult) error {
	if res.DesiredInfraMachine == nil || res.DesiredKubeadmConfig == nil || res.DesiredMachine == nil {
		return fmt.Errorf("machine %s: desired objects not computed", m.Name)
	}
	orig := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
	if err := r.Client.Patch(ctx, m, client.MergeFrom(orig)); err != nil {
		return err
	}
	infra := res.DesiredInfraMachine
	infra.SetLabels(nil)
	infra.SetAnnotations(map[string]string{
		clusterv1.TemplateClonedFromNameAnnotation:      infra.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation],
		clusterv1.TemplateClonedFromGroupKindAnnotation: infra.GetAnnotations()[clusterv1.TemplateClonedFromGroupKindAnnotation],
		clusterv1.UpdateInProgressAnnotation:            "",
	})
	if err := r.apply(ctx, infra); err != nil {
		return fmt.Errorf("machine %s: infrastructure machine: %w", m.Name, err)
	}
	kc := res.DesiredKubeadmConfig
	kc.Labels = nil
	kc.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	kc.SetGroupVersionKind(bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))
	if err := r.apply(ctx, kc); err != nil {
		return fmt.Errorf("machine %s: KubeadmConfig: %w", m.Name, err)
	}
	if kc.Spec.InitConfiguration.IsDefined() {
		before := kc.DeepCopy()
		kc.Spec.InitConfiguration = bootstrapv1.InitConfiguration{}
		if err := r.Client.Patch(ctx, kc, client.MergeFrom(before)); err != nil {
			return err
		}
	}
	desired := res.DesiredMachine
	desired.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Machine"))
	if err := r.apply(ctx, desired); err != nil {
		return fmt.Errorf("machine %s: %w", m.Name, err)
	}
	latest := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), latest); err != nil {
		return err
	}
	before := latest.DeepCopy()
	hooks := strings.Split(latest.Annotations[runtimev1.PendingHooksAnnotation], ",")
	for _, h := range hooks {
		if h == "UpdateMachine" {
			return nil
		}
	}
	latest.Annotations[runtimev1.PendingHooksAnnotation] = strings.Trim(strings.Join(append(hooks, "UpdateMachine"), ","), ",")
	return r.Client.Patch(ctx, latest, client.MergeFrom(before))
}

func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return r.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(kcpManager), client.ForceOwnership) //nolint:staticcheck // typed apply configurations do not exist for CAPI's kinds
}

// hold pauses the KCP (marking the pause as ours), only as it was read:
// a paused KCP writes no status, so pausing it just after it wrote one
// this reconcile has not seen (a Machine unavailable a moment ago) would
// freeze that status for good. The optimistic lock turns that into a
// Conflict, and the next reconcile judges the fresh KCP.
func (r *Reconciler) hold(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
	if _, paused := kcp.Annotations[clusterv1.PausedAnnotation]; paused {
		return nil
	}
	before := kcp.DeepCopy()
	if kcp.Annotations == nil {
		kcp.Annotations = map[string]string{}
	}
	kcp.Annotations[clusterv1.PausedAnnotation] = ""
	kcp.Annotations[PausedByAnnotation] = "true"
	return r.Client.Patch(ctx, kcp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// release lifts a pause this controller set (never one a user set).
func (r *Reconciler) release(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
	if kcp.Annotations[PausedByAnnotation] == "" {
		return nil
	}
	before := kcp.DeepCopy()
	delete(kcp.Annotations, clusterv1.PausedAnnotation)
	delete(kcp.Annotations, PausedByAnnotation)
	return r.Client.Patch(ctx, kcp, client.MergeFrom(before))
}
