package singlenode

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Annotations on the KubeadmControlPlane.
const (
	// Annotation opts a one-replica KCP in ("true").
	Annotation = "inplace.upgradelab.dev/single-node"
	// PausedByAnnotation marks a pause this package set (and may lift).
	PausedByAnnotation = "inplace.upgradelab.dev/paused-by-single-node"
)

// FieldManager is the field manager of what this controller writes: its
// own, so a Machine's managed fields say who changed it.
const FieldManager = "upgradelab-singlenode"

// CanUpdateMachine answers the hook in process (the extension's own
// handler, Handlers.DoCanUpdateMachine).
type CanUpdateMachine func(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse)

// Matches judges a CanUpdateMachine answer as KCP does
// (inplace.MatchesAfterPatches).
type Matches func(req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) (bool, []string, error)

// Reconciler drives opted-in KubeadmControlPlanes.
type Reconciler struct {
	Client client.Client
	// Workloads reaches a workload cluster (the kubeadm-config and RBAC
	// KCP's rollout would update).
	Workloads Workloads
	CanUpdate CanUpdateMachine
	Matches   Matches
	Recorder  events.EventRecorder
	// Concurrency is how many KCPs are reconciled at once (default
	// DefaultConcurrency). One at a time, a fleet of forty single-node
	// clusters updating together waited a minute or more for the pause to
	// be lifted after their Machines were done, and KCP moved their
	// add-ons that much later (docs/FLEET.md).
	Concurrency int
}

// DefaultConcurrency is KCP's own default (--kubeadmcontrolplane-concurrency).
const DefaultConcurrency = 10

// holdRecheck is how often a KCP whose Machine is being updated is looked
// at again without an event. The Machine's changes (its update-in-progress
// annotation going) wake the controller, as they wake KCP, which waits on
// them with no requeue at all; this only bounds a lost event, at KCP's own
// recheck interval for a control plane that is not ready.
const holdRecheck = 20 * time.Second

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
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Concurrency, DefaultConcurrency)}).
		Complete(r)
}

// facts are what one reconcile decides on.
type facts struct {
	optedIn    bool // annotation, one replica, not deleting
	pausedByUs bool
	oneMachine bool // exactly one Machine, with a Node
	updating   bool // the Machine carries update-in-progress
	upToDate   bool // KCP's UpToDate: the Machine matches the spec
	eligible   bool // KCP's EligibleForInPlaceUpdate
}

// action is what the controller does about them.
type action string

const (
	// none: nothing to do (KCP runs).
	none action = "none"
	// release: lift this package's pause, KCP takes over.
	release action = "release"
	// hold: keep the pause (an update is running).
	hold action = "hold"
	// pauseLate: the spec changed without the webhook's pause (it was
	// not installed, or the opt-in came after the change): pause now,
	// best effort: KCP may have surged already.
	pauseLate action = "pause-late"
	// update: prepare the workload cluster, ask CanUpdateMachine and
	// start the in-place update, or hand the change back to KCP.
	update action = "update"
)

// decide is the controller's decision table.
func decide(f facts) action {
	switch {
	case !f.optedIn || !f.oneMachine:
		return release // not ours to drive, or provisioning
	case f.updating:
		return hold // CAPI's Machine controller runs UpdateMachine
	case f.upToDate:
		return release // done, or nothing to do: KCP runs unpaused
	case !f.eligible:
		return release // rolloutAfter, expiring certificates: KCP's own rollout
	case !f.pausedByUs:
		return pauseLate
	}
	return update
}

// The single-node controller's permissions (with the updater's, in
// providers/inplace/update.go, the extension's config/rbac/role.yaml).
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile holds, updates, or releases one KCP.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, kcp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	f := facts{
		optedIn:    OptedIn(kcp) && kcp.DeletionTimestamp.IsZero(),
		pausedByUs: kcp.Annotations[PausedByAnnotation] == "true",
	}
	if !f.optedIn {
		return ctrl.Result{}, r.release(ctx, kcp)
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: kcp.Namespace, Name: kcp.Labels[clusterv1.ClusterNameLabel]}, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(kcp.Namespace), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var res *pkg.UpToDateResult
	if f.oneMachine = len(machines.Items) == 1 && machines.Items[0].Status.NodeRef.IsDefined(); f.oneMachine {
		m := &machines.Items[0]
		_, f.updating = m.Annotations[clusterv1.UpdateInProgressAnnotation]
		var err error
		if f.upToDate, res, err = r.upToDate(ctx, cluster, kcp, m); err != nil {
			return ctrl.Result{}, err
		}
		f.eligible = res.EligibleForInPlaceUpdate
	}
	a := decide(f)
	log.FromContext(ctx).V(4).Info("single-node decision", "facts", fmt.Sprintf("%+v", f), "action", a)
	switch a {
	case release:
		return ctrl.Result{}, r.release(ctx, kcp)
	case hold:
		return ctrl.Result{RequeueAfter: holdRecheck}, nil
	case pauseLate:
		log.FromContext(ctx).Info("the spec changed while KCP ran unpaused (is the webhook installed?); pausing it now", "why", strings.Join(res.LogMessages, "; "))
		return ctrl.Result{RequeueAfter: time.Second}, r.pause(ctx, kcp)
	}
	return r.update(ctx, cluster, kcp, &machines.Items[0], res)
}

// OptedIn says whether a KCP is one this package drives.
func OptedIn(kcp *controlplanev1.KubeadmControlPlane) bool {
	return kcp.Annotations[Annotation] == "true" && kcp.Spec.Replicas != nil && *kcp.Spec.Replicas == 1
}

// update runs while the KCP is paused by this package and its Machine
// needs an update that may be made in place.
func (r *Reconciler) update(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane, m *clusterv1.Machine, res *pkg.UpToDateResult) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("machine", m.Name)
	if err := r.prepareWorkload(ctx, cluster, kcp); err != nil {
		return ctrl.Result{}, fmt.Errorf("preparing the workload cluster for %s: %w", kcp.Spec.Version, err)
	}
	inPlace, why, err := r.canUpdate(ctx, m, res)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !inPlace {
		logger.Info("the extension cannot make the change in place; handing it back to KCP", "why", why)
		r.event(kcp, corev1.EventTypeWarning, "InPlaceUpdateNotPossible", "handing the change back to KCP (which needs a spare host for one replica): "+why)
		return ctrl.Result{}, r.release(ctx, kcp)
	}
	logger.Info("updating the single control-plane Machine in place", "why", strings.Join(res.LogMessages, "; "))
	if err := r.trigger(ctx, m, res); err != nil {
		return ctrl.Result{}, err
	}
	r.event(kcp, corev1.EventTypeNormal, "SuccessfulStartInPlaceUpdate", "Machine "+m.Name+" starting in-place update")
	return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
}

func (r *Reconciler) event(obj *controlplanev1.KubeadmControlPlane, kind, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, kind, reason, "SingleNodeInPlaceUpdate", "%s", msg)
	}
}

// prepareWorkload is what KCP's updateControlPlane does in the workload
// cluster before it rolls a Machine (KCP v1.14,
// reconcilers/kubeadmcontrolplane/update.go), with the same functions of
// KCP's package: the ClusterRoles and bindings kubeadm of the new version
// needs, and the kubeadm-config ClusterConfiguration (version, image
// repository, feature gates, API server, controller manager, scheduler,
// certificate validity, encryption algorithm, etcd), which the host's
// `kubeadm upgrade node` reads. Both are idempotent.
func (r *Reconciler) prepareWorkload(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) error {
	wl, err := r.Workloads.Client(ctx, cluster.Namespace, cluster.Name)
	if err != nil {
		return err
	}
	w := &pkg.Workload{Client: wl}
	version, err := semver.ParseTolerant(kcp.Spec.Version)
	if err != nil {
		return err
	}
	if err := w.EnsureKubeadmPermissions(ctx, version); err != nil {
		return err
	}
	var mutators []func(*bootstrapv1.ClusterConfiguration)
	if cc := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration; cc.IsDefined() {
		mutators = append(mutators,
			w.UpdateImageRepositoryInKubeadmConfigMap(pkg.ImageRepositoryFromClusterConfig(cc)),
			w.UpdateFeatureGatesInKubeadmConfigMap(kcp.Spec.KubeadmConfigSpec, version),
			w.UpdateAPIServerInKubeadmConfigMap(cc.APIServer),
			w.UpdateControllerManagerInKubeadmConfigMap(cc.ControllerManager),
			w.UpdateSchedulerInKubeadmConfigMap(cc.Scheduler),
			w.UpdateCertificateValidityPeriodDays(cc.CertificateValidityPeriodDays),
			w.UpdateEncryptionAlgorithm(cc.EncryptionAlgorithm))
		if cc.Etcd.External.IsDefined() {
			mutators = append(mutators, w.UpdateEtcdExternalInKubeadmConfigMap(cc.Etcd.External))
		} else {
			mutators = append(mutators, w.UpdateEtcdLocalInKubeadmConfigMap(cc.Etcd.Local))
		}
	}
	return w.UpdateClusterConfiguration(ctx, version, mutators...)
}

// canUpdate builds the CanUpdateMachine request as KCP does
// (inplace_canupdatemachine.go: createRequest): the desired Machine and
// both InfraMachines through a server-side-apply dry run, so defaulting
// and fields other controllers set make no difference; the KubeadmConfigs
// through KCP's PrepareKubeadmConfigsForDiff; then each object cut to
// name, namespace, labels, annotations and spec. The answer is judged as
// KCP judges it: the patches must make current equal desired.
func (r *Reconciler) canUpdate(ctx context.Context, m *clusterv1.Machine, res *pkg.UpToDateResult) (bool, string, error) {
	if res.DesiredMachine == nil || res.CurrentInfraMachine == nil || res.DesiredInfraMachine == nil ||
		res.CurrentKubeadmConfig == nil || res.DesiredKubeadmConfig == nil {
		return false, "KCP's UpToDate did not give every current and desired object", nil
	}
	desiredMachine := res.DesiredMachine.DeepCopy()
	desiredMachine.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Machine"))
	currentInfra, desiredInfra := res.CurrentInfraMachine.DeepCopy(), res.DesiredInfraMachine.DeepCopy()
	desiredKC, currentKC := res.DesiredKubeadmConfig.DeepCopy(), res.CurrentKubeadmConfig.DeepCopy()
	currentInfra.SetLabels(desiredInfra.GetLabels())
	currentInfra.SetAnnotations(desiredInfra.GetAnnotations())
	currentKC.SetLabels(desiredKC.GetLabels())
	currentKC.SetAnnotations(desiredKC.GetAnnotations())
	for _, obj := range []client.Object{desiredMachine, currentInfra, desiredInfra} {
		if err := r.dryRunApply(ctx, obj); err != nil {
			return false, "", fmt.Errorf("dry run of %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	desiredKC, currentKC = pkg.PrepareKubeadmConfigsForDiff(desiredKC, currentKC, true)
	req := &runtimehooksv1.CanUpdateMachineRequest{
		Current: runtimehooksv1.CanUpdateMachineRequestObjects{Machine: cutMachine(m)},
		Desired: runtimehooksv1.CanUpdateMachineRequestObjects{Machine: cutMachine(desiredMachine)},
	}
	var err error
	for _, o := range []struct {
		into *runtime.RawExtension
		obj  client.Object
	}{
		{&req.Current.BootstrapConfig, cutKubeadmConfig(currentKC)},
		{&req.Desired.BootstrapConfig, cutKubeadmConfig(desiredKC)},
		{&req.Current.InfrastructureMachine, cutUnstructured(currentInfra)},
		{&req.Desired.InfrastructureMachine, cutUnstructured(desiredInfra)},
	} {
		if *o.into, err = toRaw(o.obj); err != nil {
			return false, "", err
		}
	}
	resp := &runtimehooksv1.CanUpdateMachineResponse{}
	r.CanUpdate(ctx, req, resp)
	if resp.Status != runtimehooksv1.ResponseStatusSuccess {
		return false, "", fmt.Errorf("CanUpdateMachine for %s: %s", m.Name, resp.Message)
	}
	match, diffs, err := r.Matches(req, resp)
	if err != nil {
		return false, "", err
	}
	if !match {
		why := strings.TrimSpace(resp.Message + " " + strings.Join(diffs, "; "))
		return false, why, nil
	}
	return true, "", nil
}

func (r *Reconciler) dryRunApply(ctx context.Context, obj client.Object) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return r.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll) //nolint:staticcheck // typed apply configurations do not exist for CAPI's kinds
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

// trigger does what KCP does to start an in-place update
// (inplace_trigger.go): mark the Machine, apply the desired InfraMachine,
// KubeadmConfig and Machine, and mark the UpdateMachine hook pending.
func (r *Reconciler) trigger(ctx context.Context, m *clusterv1.Machine, res *pkg.UpToDateResult) error {
	orig := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
	if err := r.Client.Patch(ctx, m, client.MergeFrom(orig)); err != nil {
		return err
	}
	infra := res.DesiredInfraMachine.DeepCopy()
	infra.SetLabels(nil)
	infra.SetAnnotations(map[string]string{
		clusterv1.TemplateClonedFromNameAnnotation:      infra.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation],
		clusterv1.TemplateClonedFromGroupKindAnnotation: infra.GetAnnotations()[clusterv1.TemplateClonedFromGroupKindAnnotation],
		clusterv1.UpdateInProgressAnnotation:            "",
	})
	if err := r.apply(ctx, infra); err != nil {
		return fmt.Errorf("machine %s: infrastructure machine: %w", m.Name, err)
	}
	// The KubeadmConfig's spec is patched to the desired one, not
	// applied: an apply by this field manager could change what KCP's
	// manager owns but never remove it (a feature gate KCP set for the
	// old version, which the new version's KubeadmConfig drops, would
	// stay), and a merge patch from the current spec removes it.
	kc := &bootstrapv1.KubeadmConfig{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(res.DesiredKubeadmConfig), kc); err != nil {
		return fmt.Errorf("machine %s: KubeadmConfig: %w", m.Name, err)
	}
	before := kc.DeepCopy()
	kc.Spec = *res.DesiredKubeadmConfig.Spec.DeepCopy()
	kc.Spec.InitConfiguration = bootstrapv1.InitConfiguration{}
	if kc.Annotations == nil {
		kc.Annotations = map[string]string{}
	}
	kc.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
	if err := r.Client.Patch(ctx, kc, client.MergeFrom(before), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("machine %s: KubeadmConfig: %w", m.Name, err)
	}
	desired := res.DesiredMachine.DeepCopy()
	desired.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Machine"))
	if err := r.apply(ctx, desired); err != nil {
		return fmt.Errorf("machine %s: %w", m.Name, err)
	}
	latest := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), latest); err != nil {
		return err
	}
	orig = latest.DeepCopy()
	hooks := strings.Split(latest.Annotations[runtimev1.PendingHooksAnnotation], ",")
	for _, h := range hooks {
		if h == "UpdateMachine" {
			return nil
		}
	}
	latest.Annotations[runtimev1.PendingHooksAnnotation] = strings.Trim(strings.Join(append(hooks, "UpdateMachine"), ","), ",")
	return r.Client.Patch(ctx, latest, client.MergeFrom(orig))
}

func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return r.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership) //nolint:staticcheck // typed apply configurations do not exist for CAPI's kinds
}

// pause pauses the KCP (marking the pause as ours), only as it was read,
// so a status KCP wrote since is never frozen under a stale read (the
// optimistic lock turns that into a Conflict; the next reconcile judges
// the fresh KCP).
func (r *Reconciler) pause(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
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

// release lifts a pause this package set (never one a user set).
func (r *Reconciler) release(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
	if kcp.Annotations[PausedByAnnotation] == "" {
		return nil
	}
	before := kcp.DeepCopy()
	delete(kcp.Annotations, clusterv1.PausedAnnotation)
	delete(kcp.Annotations, PausedByAnnotation)
	return r.Client.Patch(ctx, kcp, client.MergeFrom(before))
}
