package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// Finalizer holds a BareMetalMachine until its host is released and
// deprovisioned.
const Finalizer = "baremetalmachine.infrastructure.upgradelab.dev"

// Reconciler drives BareMetalMachines.
type Reconciler struct {
	Client client.Client
	// Reader reads straight from the API server. Claims are decided on
	// it, never on the cache, so a claim just made (by this process or
	// one before a restart) is always seen.
	Reader client.Reader
	// Poll is how often a machine looks at its host's progress again; one
	// that found no free host looks every ten (waitForHost), unless a host
	// becoming available wakes it first.
	Poll time.Duration
	// Concurrency is how many BareMetalMachines are reconciled at once
	// (default DefaultConcurrency). Two claiming at once is safe: a claim
	// is an Update of the host at the version read, and the loser gets a
	// conflict and looks again.
	Concurrency int
}

// DefaultConcurrency is how many BareMetalMachines are reconciled at
// once unless told. One, before: a 55-cluster fleet waited minutes for
// its hosts to be claimed, while the hosts stood available (docs/FLEET.md).
// CAPI v1.14's own managers and CAPD default to 100; each reconcile here
// reads the hosts straight from the API server, so fewer.
const DefaultConcurrency = 10

// SetupWithManager registers the controller; a host's changes wake the
// machine it is bound to.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Poll == 0 {
		r.Poll = time.Second
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.BareMetalMachine{}).
		Watches(&metal3.BareMetalHost{}, handler.EnqueueRequestsFromMapFunc(r.hostWakes)).
		// The Machine getting its bootstrap data (or being paused) wakes
		// its BareMetalMachine.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("BareMetalMachine")))).
		// A Cluster paused or unpaused wakes its machines (only then:
		// a Cluster's status changes at every step of a rollout).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), mgr.GetLogger()))).
		Named("baremetalmachine").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Complete(r)
}

// clusterMachines are the BareMetalMachines of a Cluster (by CAPI's
// cluster-name label).
func (r *Reconciler) clusterMachines(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &infrav1.BareMetalMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: obj.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, m := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
	}
	return reqs
}

// hostWakes maps a host's change to the machines it concerns: the one it
// is bound to, or, while it stands available and unbound, every machine of
// its namespace that names no host yet. A waiting machine is woken so, and
// otherwise looks again only every waitForHost: each look lists the
// namespace's hosts from the API server, and in a 300-host fleet those
// lists were the API server's most frequent request after CAPI's own
// writes.
func (r *Reconciler) hostWakes(ctx context.Context, obj client.Object) []reconcile.Request {
	if reqs := consumerOf(ctx, obj); len(reqs) > 0 {
		return reqs
	}
	host, ok := obj.(*metal3.BareMetalHost)
	if !ok || host.Spec.ConsumerRef != nil || !host.DeletionTimestamp.IsZero() || host.Status.Provisioning.State != metal3.StateAvailable {
		return nil
	}
	list := &infrav1.BareMetalMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(host.Namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, m := range list.Items {
		if m.Status.Host == "" && m.DeletionTimestamp.IsZero() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return reqs
}

// waitForHost is how long a machine that found no free host waits before
// it looks again, unless a host becoming available wakes it first
// (hostWakes): ten polls, so a lost wake-up costs seconds.
func (r *Reconciler) waitForHost() time.Duration { return 10 * r.Poll }

func consumerOf(_ context.Context, obj client.Object) []reconcile.Request {
	host, ok := obj.(*metal3.BareMetalHost)
	if !ok || host.Spec.ConsumerRef == nil || host.Spec.ConsumerRef.Kind != "BareMetalMachine" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: host.Namespace, Name: host.Spec.ConsumerRef.Name}}}
}

// The provider's permissions are these markers (make generate writes
// config/rbac/role.yaml from them); a run enforces them.
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch

// Reconcile loads the machine and its owners, defers the status patch and
// hands over to reconcileNormal or reconcileDelete.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	bmm := &infrav1.BareMetalMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, bmm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, bmm.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	if machine == nil {
		return ctrl.Result{}, nil // CAPI sets the owner reference; that wakes us
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	// CAPI's contract: a Paused condition says whether the cluster or
	// the object is paused, and nothing else is done while it is.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, bmm); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	before := bmm.DeepCopy()
	defer func() {
		summarize(bmm)
		// Optimistic: the conditions list is replaced whole by a merge
		// patch, and the in-place extension writes one of them too. The
		// lock is against others' writes since this reconcile's last
		// one (its own patches above moved the resourceVersion).
		if apiequality.Semantic.DeepEqual(before.Status, bmm.Status) {
			return // nothing to write: a waiting machine costs no request
		}
		before.ResourceVersion = bmm.ResourceVersion
		if err := r.Client.Status().Patch(ctx, bmm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil && reterr == nil {
			reterr = err
		}
	}()
	if !bmm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, bmm, machine)
	}
	if !controllerutil.ContainsFinalizer(bmm, Finalizer) {
		patch := client.MergeFrom(bmm.DeepCopy())
		controllerutil.AddFinalizer(bmm, Finalizer)
		if err := r.Client.Patch(ctx, bmm, patch); err != nil {
			return ctrl.Result{}, err
		}
		before.Finalizers = bmm.Finalizers
		before.ResourceVersion = bmm.ResourceVersion
	}
	return r.reconcileNormal(ctx, bmm, machine)
}

// reconcileNormal binds a host, then reports its provisioning.
func (r *Reconciler) reconcileNormal(ctx context.Context, bmm *infrav1.BareMetalMachine, machine *clusterv1.Machine) (ctrl.Result, error) {
	host, err := r.boundHost(ctx, bmm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if host == nil {
		if machine.Spec.Bootstrap.DataSecretName == nil {
			setCondition(bmm, infrav1.HostProvisionedCondition, false, infrav1.WaitingForBootstrapDataReason, "waiting for the bootstrap provider to write the Machine's data secret")
			return ctrl.Result{}, nil
		}
		if host, err = r.claim(ctx, bmm, machine); err != nil || host == nil {
			if errors.Is(err, errClaimLost) {
				return ctrl.Result{RequeueAfter: r.Poll}, nil // another host may be free: look again soon
			}
			return ctrl.Result{RequeueAfter: r.waitForHost()}, err
		}
	}
	bmm.Status.Host = host.Name
	setCondition(bmm, infrav1.HostAssociatedCondition, true, infrav1.HostAssociatedReason, "bound to BareMetalHost "+host.Name)
	if err := r.setProviderID(ctx, bmm, host); err != nil {
		return ctrl.Result{}, err
	}
	recordImage(bmm, host)
	return r.reportProvisioning(bmm, host), nil
}

// setProviderID gives the machine the ID its kubelet reports (the host's
// meta data carries the same, see providerID).
func (r *Reconciler) setProviderID(ctx context.Context, bmm *infrav1.BareMetalMachine, host *metal3.BareMetalHost) error {
	if bmm.Spec.ProviderID != "" {
		return nil
	}
	patch := client.MergeFrom(bmm.DeepCopy())
	bmm.Spec.ProviderID = providerID(host, bmm)
	return r.Client.Patch(ctx, bmm, patch)
}

// providerID is upgradelab://HOST/MACHINE: the host's name and the
// machine's, so a host that carries one machine after another (node
// reuse, spares) never gives two Nodes the same ID, as CAPM3's
// metal3://NAMESPACE/HOST/MACHINE does not.
func providerID(host *metal3.BareMetalHost, bmm *infrav1.BareMetalMachine) string {
	name := host.Name
	if host.Status.HardwareDetails != nil && host.Status.HardwareDetails.Hostname != "" {
		name = host.Status.HardwareDetails.Hostname
	}
	return infrav1.ProviderIDScheme + name + "/" + bmm.Name
}

// reportProvisioning mirrors the host's state into the contract fields.
func (r *Reconciler) reportProvisioning(bmm *infrav1.BareMetalMachine, host *metal3.BareMetalHost) ctrl.Result {
	switch {
	case host.Status.Provisioning.State == metal3.StateProvisioned:
		bmm.Status.Initialization.Provisioned = ptrTo(true)
		bmm.Status.Addresses = addresses(host)
		setCondition(bmm, infrav1.HostProvisionedCondition, true, infrav1.ProvisionedReason, "")
		return ctrl.Result{}
	case host.Status.ErrorType != "":
		setCondition(bmm, infrav1.HostProvisionedCondition, false, infrav1.ProvisioningErrorReason,
			fmt.Sprintf("BareMetalHost %s: %s: %s", host.Name, host.Status.ErrorType, host.Status.ErrorMessage))
	default:
		setCondition(bmm, infrav1.HostProvisionedCondition, false, infrav1.ProvisioningReason,
			fmt.Sprintf("BareMetalHost %s is %s", host.Name, orNone(host.Status.Provisioning.State)))
	}
	return ctrl.Result{RequeueAfter: r.Poll}
}

// addresses are the host's name and its NICs' IPs, as CAPM3 reports a
// Metal3Machine's (hostname, internal DNS name, one InternalIP per NIC
// address in status.hardware).
func addresses(host *metal3.BareMetalHost) []clusterv1.MachineAddress {
	hw := host.Status.HardwareDetails
	if hw == nil {
		return nil
	}
	out := []clusterv1.MachineAddress{{Type: clusterv1.MachineHostName, Address: hw.Hostname}, {Type: clusterv1.MachineInternalDNS, Address: hw.Hostname}}
	for _, n := range hw.NIC {
		if n.IP != "" {
			out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: n.IP})
		}
	}
	return out
}

// recordImage keeps in the machine's status the image its host runs: the
// one the host was provisioned with, then, once the in-place extension
// reports an update done for the machine's current spec (InPlaceUpdated
// True at its generation), the spec's; none while the host is not
// provisioned (a wiped host is provisioned again from its spec.image). The host itself is not touched:
// its spec.image keeps the image it was provisioned with, since
// baremetal-operator deprovisions a provisioned host whose spec.image
// changes.
func recordImage(bmm *infrav1.BareMetalMachine, host *metal3.BareMetalHost) {
	c := meta.FindStatusCondition(bmm.Status.Conditions, infrav1.InPlaceUpdatedCondition)
	switch {
	case host.Status.Provisioning.State != metal3.StateProvisioned:
		bmm.Status.Image = nil // being (re)provisioned or wiped: it runs nothing of ours
	case c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == bmm.Generation:
		bmm.Status.Image = bmm.Spec.Image.DeepCopy()
	case bmm.Status.Image == nil:
		img := host.Status.Provisioning.Image
		bmm.Status.Image = &infrav1.Image{URL: img.URL, Checksum: img.Checksum}
	}
}

func orNone(s metal3.ProvisioningState) string {
	if s == "" {
		return "new"
	}
	return string(s)
}

func ptrTo[T any](v T) *T { return &v }

func setCondition(bmm *infrav1.BareMetalMachine, t string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&bmm.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: bmm.Generation})
}

// summarize sets Ready from the other conditions.
func summarize(bmm *infrav1.BareMetalMachine) {
	for _, t := range []string{infrav1.HostAssociatedCondition, infrav1.HostProvisionedCondition} {
		c := meta.FindStatusCondition(bmm.Status.Conditions, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			reason, msg := "Waiting", t+" is not reported yet"
			if c != nil {
				reason, msg = c.Reason, c.Message
			}
			setCondition(bmm, infrav1.ReadyCondition, false, reason, msg)
			return
		}
	}
	setCondition(bmm, infrav1.ReadyCondition, true, "Ready", "")
}
