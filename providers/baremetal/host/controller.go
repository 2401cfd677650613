package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/upgradelab/upgradelab/providers/baremetal/callback"
	"github.com/upgradelab/upgradelab/providers/baremetal/netboot"
)

// Finalizer keeps a host until it is powered off. It is our own name, not
// baremetal-operator's ("baremetalhost.metal3.io"), so a real BMO beside
// this controller would never take our finalizer for its own.
const Finalizer = "infrastructure.upgradelab.dev/baremetalhost"

// Reconciler drives BareMetalHosts. Every field is required except the
// durations, which default.
type Reconciler struct {
	Client client.Client
	// Reader reads straight from the API server: a host whose last
	// write by this reconciler the cache has not yet seen is read
	// through it (readHost). Nil reads every host from Client.
	Reader client.Reader
	// BMCHTTP trusts the BMCs' certificates.
	BMCHTTP *http.Client
	// IPMITool is ipmitool's path for ipmi:// hosts (default: on PATH).
	IPMITool string
	// NetBoot is the boot server ipmi:// hosts' deploy boots go through;
	// nil refuses to deploy them.
	NetBoot *netboot.Server
	// AgentHTTP presents the provider's client certificate to host agents.
	AgentHTTP  *http.Client
	Heartbeats *callback.Heartbeats
	// Recorder publishes each host error as a Warning event on the host,
	// as BMO does (reason PowerManagementError, ProvisioningError, ...).
	// Optional.
	Recorder events.EventRecorder
	// DeployImageURL is the deploy ramdisk's media URL; CallbackURL is the
	// heartbeat endpoint the ramdisk is told on it.
	DeployImageURL, CallbackURL string
	// Poll is how often a host waiting on hardware is looked at again.
	Poll time.Duration
	// DeployTimeout bounds a deploy boot before it is asked for again;
	// ResetTimeout bounds a reset before it is retried;
	// SoftPowerOffTimeout bounds a graceful shutdown before the power is
	// cut instead (Ironic's soft_power_off_timeout).
	DeployTimeout, ResetTimeout, SoftPowerOffTimeout time.Duration
	// PowerCheck is how often a host with nothing to do (available,
	// provisioned) has its power and what its BMC reports read again
	// (default DefaultPowerCheck; baremetal-operator's is a minute).
	PowerCheck time.Duration
	// Concurrency is how many hosts are reconciled at once (default as
	// baremetal-operator's: the CPUs, at least 2 and at most 8).
	Concurrency int

	// writes is the hosts this reconciler wrote that the cache may not
	// hold yet; Client records into it once SetupWithManager wrapped it.
	writes ownWrites
	mu     sync.Mutex
	// deployBoots is when each host was last booted into the deploy
	// ramdisk, softOffs when its OS was last asked to shut down. Memory
	// only: after a restart the host is booted or asked again.
	deployBoots, softOffs map[types.UID]time.Time
	// awaiting is the host each boot MAC's deploy boot belongs to, until
	// a heartbeat from that MAC wakes it (heartbeatWakes).
	awaiting map[string]types.NamespacedName
	wakes    chan event.TypedGenericEvent[*metal3.BareMetalHost]
}

// DefaultPowerCheck is the steady hosts' look at their BMC, shorter than
// baremetal-operator's minute so that what changes behind the
// controller's back in a time-scaled lab (an out-of-band power-off, a
// NIC's firmware after an in-place flash) reaches the host's status
// within seconds. Fleets of hundreds of hosts set BMO's minute
// (--power-check-interval=1m): every pass costs a read from the API
// server and a BMC connection with its reads.
const DefaultPowerCheck = 10 * time.Second

// The inventory's waits by default, the upgradelab-baremetal flags'. A
// harness running the lab's time scaled passes each of them scaled.
const (
	// DefaultDeployTimeout: a deploy ramdisk not heard from by then is
	// booted again.
	DefaultDeployTimeout = 5 * time.Minute
	// DefaultResetTimeout: a reset not reported done by then is asked
	// again.
	DefaultResetTimeout = 5 * time.Minute
	// DefaultSoftPowerOffTimeout is Ironic's soft_power_off_timeout.
	DefaultSoftPowerOffTimeout = 10 * time.Minute
	// MetalPowerCheck is baremetal-operator's look at a steady host.
	MetalPowerCheck = time.Minute
)

// steady is how long a host with nothing to do waits for its next look.
func (r *Reconciler) steady() time.Duration {
	if r.PowerCheck > 0 {
		return r.PowerCheck
	}
	return DefaultPowerCheck
}

// heartbeatWait is how long a host waiting for its deploy ramdisk's first
// heartbeat waits before it is looked at anyway: the heartbeat itself
// wakes it, so this only bounds a lost wake-up.
func (r *Reconciler) heartbeatWait() time.Duration { return min(10*r.Poll, r.DeployTimeout) }

// heartbeatWakes queues the host a heartbeat's MAC was awaited for. It
// never blocks the heartbeat: a wake-up that finds the queue full is
// dropped, and heartbeatWait's look comes instead.
func (r *Reconciler) heartbeatWakes(mac string) {
	r.mu.Lock()
	key, ok := r.awaiting[mac]
	delete(r.awaiting, mac)
	r.mu.Unlock()
	if !ok {
		return
	}
	host := &metal3.BareMetalHost{}
	host.Namespace, host.Name = key.Namespace, key.Name
	select {
	case r.wakes <- event.TypedGenericEvent[*metal3.BareMetalHost]{Object: host}:
	default:
	}
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Poll == 0 {
		r.Poll = 500 * time.Millisecond
	}
	if r.DeployTimeout == 0 {
		r.DeployTimeout = 5 * time.Minute
	}
	if r.ResetTimeout == 0 {
		r.ResetTimeout = 5 * time.Minute
	}
	if r.SoftPowerOffTimeout == 0 {
		r.SoftPowerOffTimeout = 10 * time.Minute
	}
	if r.Reader != nil {
		// Without a Reader every host is read from Client: nothing to
		// remember.
		r.writes.written = map[types.NamespacedName]string{}
		r.Client = r.writes.recording(r.Client)
	}
	r.deployBoots, r.softOffs = map[types.UID]time.Time{}, map[types.UID]time.Time{}
	r.awaiting, r.wakes = map[string]types.NamespacedName{}, make(chan event.TypedGenericEvent[*metal3.BareMetalHost], 1024)
	r.Heartbeats.Listen(r.heartbeatWakes)
	if r.Concurrency == 0 {
		r.Concurrency = min(max(runtime.NumCPU(), 2), 8)
	}
	// As baremetal-operator's update filter: a change of the status
	// alone (this controller's own writes) is no reason to reconcile, or
	// a failing host would be retried at once after each error it
	// records instead of after its backoff.
	return ctrl.NewControllerManagedBy(mgr).
		For(&metal3.BareMetalHost{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, deletionOrFinalizersChanged{}))).
		WatchesRawSource(source.Channel(r.wakes, &handler.TypedEnqueueRequestForObject[*metal3.BareMetalHost]{})).
		Named("baremetalhost").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).Complete(r)
}

// deletionOrFinalizersChanged passes updates that start a deletion or
// change the finalizers (a deleting host's metadata, not its spec).
type deletionOrFinalizersChanged struct{ predicate.Funcs }

func (deletionOrFinalizersChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
		!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}

// hostError is a failure the host's status shows (errorType/errorMessage)
// and that is retried with backoff.
type hostError struct {
	kind metal3.ErrorType
	err  error
}

func (e *hostError) Error() string { return string(e.kind) + ": " + e.err.Error() }

func failed(kind metal3.ErrorType, format string, args ...any) error {
	return &hostError{kind: kind, err: fmt.Errorf(format, args...)}
}

// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwarecomponents,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwarecomponents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile loads the host, runs the phase of its state and writes the
// status back.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	host := &metal3.BareMetalHost{}
	if err := r.readHost(ctx, req.NamespacedName, host); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, paused := host.Annotations[metal3.PausedAnnotation]; paused {
		return ctrl.Result{}, nil // BMO's pause: nothing is done until it goes
	}
	before := host.DeepCopy()
	deleting := !host.DeletionTimestamp.IsZero()
	if deleting && !cleanBeforeDelete(host) {
		return r.reconcileDelete(ctx, host)
	}
	if controllerutil.AddFinalizer(host, Finalizer) {
		if err := r.Client.Update(ctx, host); err != nil {
			return ctrl.Result{}, err
		}
		before = host.DeepCopy()
	}

	var res ctrl.Result
	var err error
	if deleting {
		// As baremetal-operator: a host deleted while provisioned (or on
		// the way) is deprovisioned, cleaned through the deploy ramdisk
		// unless cleaning is disabled, before it is let go.
		if host.Status.Provisioning.State != metal3.StateDeprovisioning {
			setState(host, metal3.StateDeprovisioning)
			host.Status.OperationHistory.Deprovision = metal3.OperationMetric{Start: metav1.Now()}
			res = ctrl.Result{Requeue: true}
		} else {
			res, err = r.deprovision(ctx, host)
		}
	} else if isDetached, _ := detached(host); isDetached {
		// BMO's detach: the host keeps its state and is left alone (no
		// power management, no provisioning) until the annotation goes.
		host.Status.OperationalStatus = metal3.OperationalStatusDetached
	} else {
		if host.Status.OperationalStatus == metal3.OperationalStatusDetached {
			host.Status.OperationalStatus = metal3.OperationalStatusOK
			if host.Status.ErrorType != "" {
				host.Status.OperationalStatus = metal3.OperationalStatusError
			}
		}
		res, err = r.phase(ctx, host)
	}
	var he *hostError
	switch {
	case errors.As(err, &he):
		log.FromContext(ctx).Info("host error", "state", host.Status.Provisioning.State, "error", he.Error())
		if r.Recorder != nil {
			r.Recorder.Eventf(host, nil, corev1.EventTypeWarning, eventReason(he.kind), string(host.Status.Provisioning.State), "%s", he.err.Error())
		}
		host.Status.ErrorType, host.Status.ErrorMessage = he.kind, he.err.Error()
		host.Status.ErrorCount++
		host.Status.OperationalStatus = metal3.OperationalStatusError
		res, err = ctrl.Result{RequeueAfter: backoff(host.Status.ErrorCount, r.Poll)}, nil
	case err == nil && host.Status.ErrorType != "":
		host.Status.ErrorType, host.Status.ErrorMessage, host.Status.ErrorCount = "", "", 0
		host.Status.OperationalStatus = metal3.OperationalStatusOK
	}
	if host.Status.OperationalStatus == "" {
		host.Status.OperationalStatus = metal3.OperationalStatusOK
	}
	if host.Status.Provisioning.ID == "" {
		host.Status.Provisioning.ID = string(host.UID) // Ironic's node ID in BMO
	}
	if !equalStatus(before, host) {
		now := metav1.Now()
		host.Status.LastUpdated = &now
		// A full update: the schema requires fields a merge patch of a
		// first status would leave out (poweredOn false, errorMessage "").
		if perr := r.Client.Status().Update(ctx, host); perr != nil && !apierrors.IsNotFound(perr) {
			return ctrl.Result{}, perr
		}
	}
	return res, err
}

// eventReason is an error type as an event reason: "power management
// error" is PowerManagementError, as BMO names its events.
func eventReason(kind metal3.ErrorType) string {
	var b strings.Builder
	for _, w := range strings.Fields(string(kind)) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// equalStatus compares everything but the time of the last write.
func equalStatus(a, b *metal3.BareMetalHost) bool {
	x, y := a.Status.DeepCopy(), b.Status.DeepCopy()
	x.LastUpdated, y.LastUpdated = nil, nil
	return apiequality.Semantic.DeepEqual(x, y)
}

// backoff doubles from the poll interval up to a minute.
func backoff(count int, base time.Duration) time.Duration {
	d := base
	for i := 1; i < count && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// phase runs the current state's step and moves the state on.
func (r *Reconciler) phase(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	switch host.Status.Provisioning.State {
	case metal3.StateNone, metal3.StateRegistering:
		return r.register(ctx, host)
	case metal3.StateInspecting:
		return r.inspect(ctx, host)
	case metal3.StateAvailable:
		return r.available(ctx, host)
	case metal3.StateProvisioning:
		return r.provision(ctx, host)
	case metal3.StateProvisioned:
		return r.provisioned(ctx, host)
	case metal3.StateDeprovisioning:
		return r.deprovision(ctx, host)
	}
	return ctrl.Result{}, fmt.Errorf("host %s: unknown provisioning state %q", host.Name, host.Status.Provisioning.State)
}

func setState(host *metal3.BareMetalHost, s metal3.ProvisioningState) {
	host.Status.Provisioning.State = s
}

// cleanBeforeDelete tells a host being deleted that must be deprovisioned
// first: one with a BMC, attached, provisioned or on the way there.
func cleanBeforeDelete(host *metal3.BareMetalHost) bool {
	if isDetached, _ := detached(host); isDetached || registered(host) || host.Spec.BMC.Address == "" {
		return false
	}
	switch host.Status.Provisioning.State {
	case metal3.StateProvisioned, metal3.StateProvisioning, metal3.StateDeprovisioning:
		return true
	}
	return false
}

// registered tells a host that registered itself (no BMC to drive).
func registered(host *metal3.BareMetalHost) bool {
	return host.Annotations[callback.MachineIDAnnotation] != ""
}

// reconcileDelete powers a BMC host off and lets it go (a provisioned one
// once deprovisioned: cleanBeforeDelete); a registered
// host's object is deleted by its re-registration, so it goes at once. A
// detached host is let go untouched, or, when its annotation says
// {"deleteAction": "delay"}, kept until it is attached again (BMO's).
func (r *Reconciler) reconcileDelete(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(host, Finalizer) {
		return ctrl.Result{}, nil
	}
	isDetached, delayed := detached(host)
	if delayed {
		return ctrl.Result{}, nil // the annotation's removal wakes us
	}
	if !isDetached && !registered(host) && host.Spec.BMC.Address != "" {
		if bmc, err := r.dialBMC(ctx, host); err == nil {
			_ = bmc.PowerOff()
			bmc.Close()
		}
	}
	controllerutil.RemoveFinalizer(host, Finalizer)
	return ctrl.Result{}, r.Client.Update(ctx, host)
}
