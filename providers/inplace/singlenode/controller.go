package singlenode

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
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

	"github.com/upgradelab/upgradelab/internal/failpoint"
	"github.com/upgradelab/upgradelab/providers/inplace/askcp"
)

// Annotations on the KubeadmControlPlane.
const (
	// Annotation opts a one-replica KCP in ("true").
	Annotation = "inplace.upgradelab.dev/single-node"
	// PausedByAnnotation marks a pause this package set (and may lift).
	PausedByAnnotation = "inplace.upgradelab.dev/paused-by-single-node"
	// DeclinedAnnotation holds the KCP generation (its spec) the
	// extension could not make in place: that change is KCP's to roll out,
	// and is not paused again.
	DeclinedAnnotation = "inplace.upgradelab.dev/declined-generation"
)

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

// preflightRecheck is how soon a failed preflight check is tried again:
// KCP's preflightFailedRequeueAfter.
const preflightRecheck = 15 * time.Second

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
		// A Cluster unpaused (spec.paused false after a clusterctl move)
		// lets its control plane go on.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ref := o.(*clusterv1.Cluster).Spec.ControlPlaneRef
			if ref.Kind != "KubeadmControlPlane" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
		})).
		Named("singlenode").
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Concurrency, DefaultConcurrency)}).
		Complete(r)
}

// facts are what one reconcile decides on.
type facts struct {
	optedIn bool // annotation, one replica, not deleting
	// paused: the Cluster is paused (spec.paused, as during a clusterctl
	// move) or someone else paused the KCP: nothing is started, lifted or
	// completed, as KCP does nothing for a paused object.
	paused     bool
	pausedByUs bool
	oneMachine bool // exactly one Machine, with a Node
	updating   bool // the Machine carries update-in-progress
	// hookPending: the Machine's UpdateMachine hook is marked pending, the
	// trigger's last write. Updating without it is a trigger cut short.
	hookPending bool
	upToDate    bool // KCP's UpToDate: the Machine matches the spec
	eligible    bool // KCP's EligibleForInPlaceUpdate
	// declined: the extension could not make this spec in place and
	// handed it to KCP. Paused again, KCP would never get to roll it out
	// (it reconciles an object at most once a second, and the pause came
	// back within that: a run saw a minute of it).
	declined bool
}

// action is what the controller does about them.
type action string

const (
	// none: nothing to do (KCP runs).
	none action = "none"
	// release: lift this package's pause, KCP takes over.
	release action = "release"
	// waitPaused: touch nothing (the Cluster or the KCP is paused by someone
	// else).
	waitPaused action = "wait"
	// hold: keep the pause (an update is running).
	hold action = "hold"
	// completeTrigger: an earlier trigger stopped after marking the
	// Machine (an error, a crash): write the rest, as KCP does for
	// MachinesToCompleteTriggerInPlaceUpdate. Once the Machine is marked
	// the update is committed to; nothing falls back to a rollout.
	completeTrigger action = "complete-trigger"
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
	case f.paused:
		return waitPaused
	case !f.optedIn || !f.oneMachine:
		return release // not ours to drive, or provisioning
	case f.updating && !f.hookPending:
		return completeTrigger
	case f.updating:
		return hold // CAPI's Machine controller runs UpdateMachine
	case f.upToDate:
		return release // done, or nothing to do: KCP runs unpaused
	case !f.eligible, f.declined:
		return release // rolloutAfter, expiring certificates, a change not possible in place: KCP's own rollout
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
	// A KCP whose Cluster is gone is not paused by it: one no longer
	// opted in still has any pause of ours lifted.
	cluster := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: kcp.Namespace, Name: kcp.Labels[clusterv1.ClusterNameLabel]}, cluster)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	clusterGone := err != nil
	f := facts{
		optedIn:    OptedIn(kcp) && kcp.DeletionTimestamp.IsZero(),
		pausedByUs: kcp.Annotations[PausedByAnnotation] == "true",
		declined:   kcp.Annotations[DeclinedAnnotation] == strconv.FormatInt(kcp.Generation, 10),
		paused:     ptr.Deref(cluster.Spec.Paused, false),
	}
	if _, paused := kcp.Annotations[clusterv1.PausedAnnotation]; paused && !f.pausedByUs {
		f.paused = true
	}
	switch {
	case !f.optedIn || f.paused:
		return r.act(ctx, decide(f), kcp, nil, nil, nil)
	case clusterGone:
		return ctrl.Result{}, nil // nothing to drive without its Cluster
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(kcp.Namespace), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var res *pkg.UpToDateResult
	var m *clusterv1.Machine
	if f.oneMachine = len(machines.Items) == 1 && machines.Items[0].Status.NodeRef.IsDefined(); f.oneMachine {
		m = &machines.Items[0]
		_, f.updating = m.Annotations[clusterv1.UpdateInProgressAnnotation]
		f.hookPending = hookPending(m)
		if f.upToDate, res, err = askcp.UpToDate(ctx, r.Client, cluster, kcp, m); err != nil {
			return ctrl.Result{}, err
		}
		f.eligible = res.EligibleForInPlaceUpdate
	}
	a := decide(f)
	log.FromContext(ctx).V(4).Info("single-node decision", "facts", fmt.Sprintf("%+v", f), "action", a)
	return r.act(ctx, a, kcp, cluster, m, res)
}

// act carries out decide's action.
func (r *Reconciler) act(ctx context.Context, a action, kcp *controlplanev1.KubeadmControlPlane, cluster *clusterv1.Cluster, m *clusterv1.Machine, res *pkg.UpToDateResult) (ctrl.Result, error) {
	switch a {
	case waitPaused:
		log.FromContext(ctx).V(2).Info("the Cluster or the KubeadmControlPlane is paused: waiting")
		return ctrl.Result{}, nil
	case release:
		return ctrl.Result{}, r.release(ctx, kcp)
	case hold:
		return ctrl.Result{RequeueAfter: holdRecheck}, nil
	case completeTrigger:
		log.FromContext(ctx).Info("completing an in-place update trigger cut short", "machine", m.Name)
		return ctrl.Result{}, r.trigger(ctx, m, res)
	case pauseLate:
		log.FromContext(ctx).Info("the spec changed while KCP ran unpaused (is the webhook installed?); pausing it now", "why", strings.Join(res.LogMessages, "; "))
		return ctrl.Result{RequeueAfter: time.Second}, r.pause(ctx, kcp)
	}
	return r.update(ctx, cluster, kcp, m, res)
}

// hookPending says whether the Machine's UpdateMachine hook is marked
// pending (runtime.cluster.x-k8s.io/pending-hooks).
func hookPending(m *clusterv1.Machine) bool {
	return slices.Contains(strings.Split(m.Annotations[runtimev1.PendingHooksAnnotation], ","), "UpdateMachine")
}

// OptedIn says whether a KCP is one this package drives.
func OptedIn(kcp *controlplanev1.KubeadmControlPlane) bool {
	return kcp.Annotations[Annotation] == "true" && kcp.Spec.Replicas != nil && *kcp.Spec.Replicas == 1
}

// update runs while the KCP is paused by this package and its Machine
// needs an update that may be made in place.
func (r *Reconciler) update(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane, m *clusterv1.Machine, res *pkg.UpToDateResult) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("machine", m.Name)
	failed, err := r.preflight(ctx, cluster, kcp, m)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("preflight checks: %w", err)
	}
	if failed != "" {
		logger.Info("waiting for the control plane to pass preflight checks", "failures", failed)
		r.event(kcp, corev1.EventTypeWarning, "ControlPlaneUnhealthy", "waiting for the control plane to pass preflight checks before updating in place: "+failed)
		return ctrl.Result{RequeueAfter: preflightRecheck}, nil
	}
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
		return ctrl.Result{}, r.decline(ctx, kcp)
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

// prepareWorkload moves the workload cluster's kubeadm-config and RBAC as
// KCP's rollout would (askcp.MoveKubeadmConfig).
func (r *Reconciler) prepareWorkload(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) error {
	wl, err := r.Workloads.Client(ctx, cluster.Namespace, cluster.Name)
	if err != nil {
		return err
	}
	return askcp.MoveKubeadmConfig(ctx, wl, kcp)
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
	return r.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(askcp.FieldManager), client.ForceOwnership, client.DryRunAll) //nolint:staticcheck // typed apply configurations do not exist for CAPI's kinds
}

// trigger does what KCP does to start an in-place update
// (inplace_trigger.go), under KCP's field manager: mark the Machine,
// apply the desired InfraMachine, KubeadmConfig and Machine, and mark the
// UpdateMachine hook pending. It is re-entrant: a trigger cut short after
// the mark is completed by the next reconcile (completeTrigger), with the
// desired objects of the spec as it is then, as KCP completes one. Each
// mark is waited for in the cache, so the next reconcile cannot read the
// Machine from before it and start again.
func (r *Reconciler) trigger(ctx context.Context, m *clusterv1.Machine, res *pkg.UpToDateResult) error {
	if _, ok := m.Annotations[clusterv1.UpdateInProgressAnnotation]; !ok {
		orig := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
		if err := r.Client.Patch(ctx, m, client.MergeFrom(orig)); err != nil {
			return err
		}
		if err := r.waitForCache(ctx, m, func(m *clusterv1.Machine) bool {
			_, ok := m.Annotations[clusterv1.UpdateInProgressAnnotation]
			return ok
		}); err != nil {
			return err
		}
	}
	failpoint.Crash(FailpointMarked)
	if err := askcp.ApplyDesired(ctx, r.Client, m, res); err != nil {
		return err
	}
	latest := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), latest); err != nil {
		return err
	}
	if !hookPending(latest) {
		orig := latest.DeepCopy()
		hooks := strings.Split(latest.Annotations[runtimev1.PendingHooksAnnotation], ",")
		latest.Annotations[runtimev1.PendingHooksAnnotation] = strings.Trim(strings.Join(append(hooks, "UpdateMachine"), ","), ",")
		if err := r.Client.Patch(ctx, latest, client.MergeFrom(orig)); err != nil {
			return err
		}
	}
	return r.waitForCache(ctx, latest, hookPending)
}

// cacheWait bounds waitForCache; KCP's own wait allows 10 s.
const cacheWait = 10 * time.Second

// waitForCache waits until the client's cache holds m as written (ok
// says so), as KCP's WaitForCacheToBeUpToDate does after the trigger's
// marks.
func (r *Reconciler) waitForCache(ctx context.Context, m *clusterv1.Machine, ok func(*clusterv1.Machine) bool) error {
	var seen *clusterv1.Machine
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, cacheWait, true, func(ctx context.Context) (bool, error) {
		seen = &clusterv1.Machine{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), seen); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return ok(seen), nil
	})
	if err != nil {
		return fmt.Errorf("machine %s: the cache did not show the in-place update's mark within %s: %w", m.Name, cacheWait, err)
	}
	return nil
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

// decline marks the KCP's spec as one the extension cannot make in place
// and lifts the pause in the same write: KCP rolls it out.
func (r *Reconciler) decline(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
	before := kcp.DeepCopy()
	if kcp.Annotations == nil {
		kcp.Annotations = map[string]string{}
	}
	kcp.Annotations[DeclinedAnnotation] = strconv.FormatInt(kcp.Generation, 10)
	if kcp.Annotations[PausedByAnnotation] != "" {
		delete(kcp.Annotations, clusterv1.PausedAnnotation)
		delete(kcp.Annotations, PausedByAnnotation)
	}
	return r.Client.Patch(ctx, kcp, client.MergeFrom(before))
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
