package inplace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
	"github.com/upgradelab/upgradelab/providers/inplace/askcp"
)

// Annotations the updater keeps on the BareMetalMachine, so an update
// survives a restart of the extension: the reboot into the new image (so
// it is not repeated, and a host back on its old image is known to have
// fallen back), the NIC flash (staged on the BMC, applied at the reset
// that followed) and a failure (answered again until its owner asks for
// something else and the Machine is pointed at it, or for good when it
// cannot be: see abandon).
const (
	RebootAnnotation   = "inplace.upgradelab.dev/rebooted-into"
	NICFlashAnnotation = "inplace.upgradelab.dev/nic-flashed"
	// NICFlashAttemptsAnnotation counts the flashes of one NVM
	// ("FIRMWARE:N"): one cut short is staged again, up to maxFlashes.
	NICFlashAttemptsAnnotation = "inplace.upgradelab.dev/nic-flash-attempts"
	FailedAnnotation           = "inplace.upgradelab.dev/failed"
	// StartedAnnotation is when an update began ("KEY@TIME"), for its
	// overall deadline.
	StartedAnnotation = "inplace.upgradelab.dev/started"
)

// WorkloadClients gives a client of a workload cluster.
type WorkloadClients interface {
	Client(ctx context.Context, namespace, cluster string) (client.Client, error)
}

// The updater's permissions (make generate writes the extension's
// config/rbac/role.yaml from these and the single-node controller's).
// CanUpdateMachine's dry runs are patches, so they need patch too.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machinesets;machinedeployments;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=patch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs;kubeadmconfigtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,verbs=patch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines;baremetalmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines,verbs=update;patch
// +kubebuilder:rbac:groups=infrastructure.upgradelab.dev,resources=baremetalmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// CAPI's contract helpers (the KCP code the extension reuses) read the
// CRDs' contract labels.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Updater performs one machine's update, a step per UpdateMachine call.
type Updater struct {
	// Client reads and annotates the management cluster.
	Client client.Client
	// AgentHTTP and BMCHTTP carry the extension's client certificate and
	// trust the site's CA.
	AgentHTTP, BMCHTTP *http.Client
	// ReadManifest and ReadFirmware tell the new image's i40e driver and
	// the wanted NVM's API version, which order the NIC flash.
	ReadManifest ManifestReader
	ReadFirmware FirmwareReader
	// ReadHost reads a Machine's host for CanUpdate (nil: through the
	// Machine's Node and its agent, HostStatus).
	ReadHost HostReader
	// Workloads reaches a cluster's API server (*Workloads, from CAPI's
	// kubeconfig secret).
	Workloads WorkloadClients
	// HealthGrace is how long a freshly booted image may fail its health
	// check before the update counts as failed.
	HealthGrace time.Duration
	// FlashTimeout is how long a staged NIC flash may take to show on the
	// NIC before the update counts as failed.
	FlashTimeout time.Duration
	// DrainTimeout bounds a node's drain: pods whose budgets refuse their
	// eviction that long fail the update (0: wait forever).
	DrainTimeout time.Duration
	// Retry is the RetryAfterSeconds of an update in progress.
	Retry time.Duration
	// Deadline bounds a whole update, from its first step: one still not
	// done after it fails, whatever step it is at (0: no deadline).
	Deadline time.Duration
	// RebootRetry is how long the old OS may go on running, not shutting
	// down, after the reboot into the new image was asked for: the
	// request never reached the host, and it is asked again, hard (0:
	// DefaultRebootRetry).
	RebootRetry time.Duration
	// ShutdownTimeout is how long an OS its agent reports shutting down
	// is left to finish (an OSTree host finalises its staged deployment
	// last, which a hard reset loses) before it is reset hard (0:
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// PowerThroughHost asks the machine's BareMetalHost for reboots
	// (baremetal-operator's reboot annotation) instead of the host's BMC:
	// where baremetal-operator and Ironic keep the hosts, Ironic's power
	// sync would otherwise fight a power change made behind its back.
	PowerThroughHost bool
	// Now is the clock (nil: time.Now); the tests move it.
	Now func() time.Time

	mu      sync.Mutex
	staging map[string]*staging
}

// staging is one machine's image write in the background, started by
// this process (a write another replica started shows in the host's
// status: see writing). attempts
// counts the writes of this checksum: one the host's restart cut short
// is started again, up to maxWrites.
type staging struct {
	checksum string
	// bootID is the boot of the host the write began under.
	bootID   string
	attempts int
	done     bool
	root     agentv1.RootID
	err      error
}

const maxWrites = 3

// The update's waits by default, the upgradelab-inplace flags'. A
// reboot request reaches a host in seconds; systemd gives each unit 90 s
// to stop (DefaultTimeoutStopSec) and Ironic a whole soft power-off 10
// minutes (soft_power_off_timeout). A harness running the lab's time
// scaled passes each of them scaled the same way.
const (
	DefaultHealthGrace     = 30 * time.Second
	DefaultFlashTimeout    = 15 * time.Minute
	DefaultDrainTimeout    = 5 * time.Minute
	DefaultDeadline        = time.Hour
	DefaultRebootRetry     = 30 * time.Second
	DefaultShutdownTimeout = 10 * time.Minute
)

func (u *Updater) rebootRetry() time.Duration {
	return cmp.Or(u.RebootRetry, DefaultRebootRetry)
}

func (u *Updater) shutdownTimeout() time.Duration {
	return cmp.Or(u.ShutdownTimeout, DefaultShutdownTimeout)
}

func (u *Updater) now() time.Time {
	if u.Now != nil {
		return u.Now()
	}
	return time.Now()
}

// progress is one step's outcome. abandoned: a failed update was given up
// because its owner was reverted (see abandon), and the update goes on to
// what the owner asks now.
type progress struct {
	done, failed, abandoned bool
	message                 string
}

func running(format string, args ...any) progress {
	return progress{message: fmt.Sprintf(format, args...)}
}

// DoUpdateMachine implements the UpdateMachine hook.
func (h *Handlers) DoUpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", req.Desired.Machine.Name)
	bmm := &infrav1.BareMetalMachine{}
	if err := h.decode(req.Desired.InfrastructureMachine, bmm); err != nil {
		fail(&resp.CommonResponse, "desired infrastructure machine: %v", err)
		return
	}
	kc := &bootstrapv1.KubeadmConfig{}
	if req.Desired.BootstrapConfig.Raw != nil || req.Desired.BootstrapConfig.Object != nil {
		if err := h.decode(req.Desired.BootstrapConfig, kc); err != nil {
			fail(&resp.CommonResponse, "desired bootstrap config: %v", err)
			return
		}
	}
	p, err := h.updater.step(ctx, &req.Desired.Machine, bmm, kc)
	switch {
	case err != nil:
		// A step that could not run (API server, agent unreachable) is
		// tried again; it is not the update failing.
		p = running("%v", err)
		fallthrough
	case !p.done && !p.failed:
		resp.Status = runtimehooksv1.ResponseStatusSuccess
		resp.RetryAfterSeconds = int32(max(h.updater.Retry/time.Second, 1))
	case p.failed:
		resp.Status = runtimehooksv1.ResponseStatusFailure
	default:
		resp.Status = runtimehooksv1.ResponseStatusSuccess
	}
	resp.Message = p.message
	if err == nil {
		h.updater.reportCondition(ctx, bmm, p)
	}
	log.Info("UpdateMachine", "status", resp.Status, "retryAfterSeconds", resp.RetryAfterSeconds, "message", resp.Message)
}

// step looks at the host and does the next thing: drain, stage the image,
// activate and reboot, health check and commit, uncordon. A failed update
// leaves the node as it found it once the host runs a committed image
// again (the old one it fell back to, or the one it never
// left): uncordoned, so the pods the drain moved may come back.
func (u *Updater) step(ctx context.Context, desired *clusterv1.Machine, desiredBMM *infrav1.BareMetalMachine, desiredKC *bootstrapv1.KubeadmConfig) (progress, error) {
	p, err := u.next(ctx, desired, desiredBMM, desiredKC)
	if err == nil && p.failed {
		u.uncordonWhenCommitted(ctx, desired)
	}
	return p, err
}

// reportCondition writes the BareMetalMachine's InPlaceUpdated condition
// for a step's outcome (best effort: the next call writes it again). An
// update in progress is written once, not at every message.
func (u *Updater) reportCondition(ctx context.Context, desiredBMM *infrav1.BareMetalMachine, p progress) {
	c := metav1.Condition{Type: infrav1.InPlaceUpdatedCondition, Status: metav1.ConditionFalse, Reason: infrav1.InPlaceUpdatingReason, Message: "in-place update in progress"}
	switch {
	case p.failed:
		c.Reason, c.Message = infrav1.InPlaceUpdateFailedReason, p.message
	case p.abandoned:
		c.Reason, c.Message = infrav1.InPlaceUpdateAbandonedReason, p.message
	case p.done:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, infrav1.InPlaceUpdatedReason, p.message
	}
	bmm := &infrav1.BareMetalMachine{}
	if err := u.Client.Get(ctx, client.ObjectKeyFromObject(desiredBMM), bmm); err != nil {
		return
	}
	if old := meta.FindStatusCondition(bmm.Status.Conditions, c.Type); old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return
	}
	before := bmm.DeepCopy()
	c.ObservedGeneration = bmm.Generation
	meta.SetStatusCondition(&bmm.Status.Conditions, c)
	_ = u.Client.Status().Patch(ctx, bmm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// uncordonWhenCommitted uncordons the Machine's node when its host runs a
// committed image; best effort (a failed update is answered again, and
// this with it).
func (u *Updater) uncordonWhenCommitted(ctx context.Context, desired *clusterv1.Machine) {
	h, failure, err := u.findHost(ctx, client.ObjectKeyFromObject(desired))
	if err != nil || failure != "" || !h.node.Spec.Unschedulable {
		return
	}
	st, err := h.agent.Status(ctx)
	if err != nil || !runsCommitted(st) {
		return
	}
	patch := client.MergeFrom(h.node.DeepCopy())
	h.node.Spec.Unschedulable = false
	_ = h.wl.Patch(ctx, h.node, patch)
}

// machineHost is a Machine as stored (the hook's request carries the
// desired spec; the node is in the stored status), its Node and the
// agent of its host.
type machineHost struct {
	machine *clusterv1.Machine
	wl      client.Client
	node    *corev1.Node
	agent   *hostagent.Client
}

// findHost follows a Machine to its host's agent: the Machine's nodeRef,
// the Node's agent-url annotation. failure says why a Machine has no host
// to update (no Node, no agent published); err is a read that may work
// next time.
func (u *Updater) findHost(ctx context.Context, key client.ObjectKey) (h machineHost, failure string, err error) {
	h.machine = &clusterv1.Machine{}
	if err := u.Client.Get(ctx, key, h.machine); err != nil {
		return h, "", err
	}
	if !h.machine.Status.NodeRef.IsDefined() {
		return h, "the Machine has no Node", nil
	}
	if h.wl, err = u.Workloads.Client(ctx, h.machine.Namespace, h.machine.Spec.ClusterName); err != nil {
		return h, "", err
	}
	h.node = &corev1.Node{}
	if err := h.wl.Get(ctx, client.ObjectKey{Name: h.machine.Status.NodeRef.Name}, h.node); err != nil {
		return h, "", fmt.Errorf("node %s: %w", h.machine.Status.NodeRef.Name, err)
	}
	url := h.node.Annotations[agentv1.AgentURLAnnotation]
	if url == "" {
		return h, "node " + h.node.Name + " publishes no host agent (annotation " + agentv1.AgentURLAnnotation + ")", nil
	}
	h.agent = hostagent.New(u.AgentHTTP, url)
	return h, "", nil
}

// readHost reads a Machine's host with ReadHost or HostStatus.
func (u *Updater) readHost(ctx context.Context, key client.ObjectKey) (agentv1.Status, error) {
	if u.ReadHost != nil {
		return u.ReadHost(ctx, key)
	}
	return u.HostStatus(ctx, key)
}

// HostStatus is the agent's report of the host behind a Machine (a
// HostReader).
func (u *Updater) HostStatus(ctx context.Context, key client.ObjectKey) (agentv1.Status, error) {
	h, failure, err := u.findHost(ctx, key)
	switch {
	case err != nil:
		return agentv1.Status{}, err
	case failure != "":
		return agentv1.Status{}, errors.New(failure)
	}
	return h.agent.Status(ctx)
}

// next is one step of the update (see step).
func (u *Updater) next(ctx context.Context, desired *clusterv1.Machine, desiredBMM *infrav1.BareMetalMachine, desiredKC *bootstrapv1.KubeadmConfig) (progress, error) {
	bmm := &infrav1.BareMetalMachine{}
	if err := u.Client.Get(ctx, client.ObjectKeyFromObject(desiredBMM), bmm); err != nil {
		return progress{}, err
	}
	want, fw := desiredBMM.Spec.Image, desiredBMM.Spec.NICFirmware
	key := updateKey(want, fw)
	// A failure recorded under another key than the one asked is a
	// retarget cut short (some of KCP's objects written, not all): it is
	// abandoned again, which writes them all.
	if failedKey, msg, ok := recordedFailure(bmm); ok {
		if p, abandoned, err := u.abandon(ctx, desired, key, bmm, failedKey, msg); err != nil || abandoned {
			return p, err
		}
		return progress{failed: true, message: msg}, nil
	}
	if started, ok := annotatedAt(bmm, StartedAnnotation, key); !ok {
		if err := u.annotate(ctx, bmm, StartedAnnotation, key+"@"+u.now().UTC().Format(time.RFC3339Nano)); err != nil {
			return progress{}, err
		}
	} else if u.Deadline > 0 && u.now().Sub(started) > u.Deadline {
		return u.recordFailure(ctx, bmm, key, fmt.Sprintf("the update to %s did not finish within %s (started %s)", want.URL, u.Deadline, started.Format(time.RFC3339)))
	}
	h, failure, err := u.findHost(ctx, client.ObjectKeyFromObject(desired))
	switch {
	case err != nil:
		return progress{}, err
	case failure != "":
		return progress{failed: true, message: failure}, nil
	}
	st, err := h.agent.Status(ctx)
	if err != nil {
		return running("host agent of %s not answering (rebooting?)", h.node.Name), nil
	}
	booted := st.Images.Booted
	if st.OS == nil || st.OS.Source != agentv1.FromDisk || booted == nil {
		return running("host of %s is booting", h.node.Name), nil
	}
	onNewImage := booted.Checksum == want.Checksum
	flash, refusal, err := u.nicWork(ctx, st, want, fw, onNewImage)
	f := &inFlight{machineHost: h, bmm: bmm, kc: desiredKC, st: st, want: want, flash: flash, key: key}
	switch {
	case err != nil:
		return progress{}, err
	case refusal != "":
		return u.recordFailure(ctx, bmm, key, refusal)
	case flash != nil && flash.plan.order == nicFirst:
		return u.flashNIC(ctx, bmm, h.wl, h.node, flash, key)
	case onNewImage:
		return u.afterReboot(ctx, f)
	}
	return u.beforeReboot(ctx, f)
}

// inFlight is an update as next found it on one pass: the Machine, its
// host (Node, workload client, agent) and the host's status, the
// BareMetalMachine as stored, the KubeadmConfig asked for, the image and
// NIC flash it brings and the key its failures are remembered under.
type inFlight struct {
	machineHost
	bmm   *infrav1.BareMetalMachine
	kc    *bootstrapv1.KubeadmConfig
	st    agentv1.Status
	want  infrav1.Image
	flash *nicFlash
	key   string
}

// abandon ends a failed update whose owner now asks for something else
// (the user reverted the KubeadmControlPlane or MachineDeployment), once
// the host runs a committed image. CAPI defines no way out of a failed
// UpdateMachine but remediation, and promises not to change the
// Machine's spec until the hook answers done, so done is answered only
// when the host runs what the Machine asks: never at the failed spec.
//
// A KubeadmControlPlane's Machine is pointed at what its KCP asks now
// (retarget): the update goes on, and is done only when the host runs
// that. A Machine nobody can point stays failed, saying what its owner
// asks and how it gets out (cannotPoint): a MachineDeployment's, since
// CAPI computes a MachineSet's desired objects only in its controller
// and moves a Machine to another MachineSet only when it is not
// updating; a KCP's that KCP computes no desired objects for.
//
// A retarget holds only once CAPI's call brings it (desired, and
// desiredKey, the update its infrastructure machine asks): until then
// the failure stays recorded and every call writes KCP's objects again.
// KCP applies its Machines under the same field manager from its own
// cache, and one reconcile whose cache had not seen the retarget put
// the failed version back. Once it holds, the failed update's
// annotations go, so a later update to the same image starts fresh.
func (u *Updater) abandon(ctx context.Context, desired *clusterv1.Machine, desiredKey string, bmm *infrav1.BareMetalMachine, key, failure string) (progress, bool, error) {
	asked, owner, err := u.ownerAsks(ctx, desired)
	if err != nil || owner == nil || updateKey(asked.Image, asked.NICFirmware) == key {
		return progress{}, false, err // the owner still asks for what failed
	}
	h, noHost, err := u.findHost(ctx, client.ObjectKeyFromObject(desired))
	if err != nil || noHost != "" {
		return progress{}, false, err
	}
	st, err := h.agent.Status(ctx)
	if err != nil || !runsCommitted(st) {
		return progress{}, false, nil
	}
	what := fmt.Sprintf("the in-place update failed (%s) and %s %s now asks for %s", failure, owner.kind, owner.name, describeAsk(asked))
	if owner.kcp == nil {
		return cannotPoint(what, "CAPI moves a MachineSet's Machine to another MachineSet only when it is not updating"), true, nil
	}
	if desired.Spec.Version != owner.kcp.Spec.Version || desiredKey != updateKey(asked.Image, asked.NICFirmware) {
		why, err := u.retarget(ctx, h.machine, owner.kcp)
		switch {
		case err != nil:
			return progress{}, false, fmt.Errorf("%s: pointing the update at it: %w", what, err)
		case why != "":
			return cannotPoint(what, why), true, nil
		}
		return progress{abandoned: true, message: what + ": pointing the Machine at it, in KCP's place, until CAPI's call brings it"}, true, nil
	}
	// CAPI's call brings what KCP asks: the update goes on to it.
	patch := client.MergeFrom(bmm.DeepCopy())
	for _, a := range []string{FailedAnnotation, RebootAnnotation, StartedAnnotation, OwnerAsksAnnotation} {
		delete(bmm.Annotations, a)
	}
	if err := u.Client.Patch(ctx, bmm, patch); err != nil {
		return progress{}, false, err
	}
	return progress{abandoned: true, message: fmt.Sprintf("%s: the Machine asks for it too, and the update goes on to it from %s, committed on %s", what, st.OS.Image.Name, h.node.Name)}, true, nil
}

// cannotPoint is the answer for a failed update whose owner asks for
// something else that the Machine cannot be pointed at: it stays failed,
// and says so, until the Machine is deleted and its owner replaces it
// (answering done would leave the Machine saying the failed version
// while its host runs another).
func cannotPoint(what, why string) progress {
	return progress{failed: true, message: fmt.Sprintf("%s; the Machine cannot be pointed at it (%s): it stays failed until it is deleted and its owner replaces it", what, why)}
}

// retarget writes, in KCP's place, what KCP would write to start an
// in-place update of m to its spec as it is now (askcp): the workload
// cluster's kubeadm-config at the KCP's version (KCP moves it only before
// it rolls a Machine, and a Machine made up to date here is not rolled),
// then the desired InfraMachine, KubeadmConfig and Machine, still marked
// update-in-progress. CAPI's next UpdateMachine call brings them. Every
// write is idempotent, so a retarget cut short is done again whole.
//
// why says why it wrote nothing: KCP computes no desired InfraMachine
// for one without its template's cloned-from annotations (adopted, or
// made by an older KCP), and a retarget without it would leave the
// Machine and its BareMetalMachine asking for different things.
func (u *Updater) retarget(ctx context.Context, m *clusterv1.Machine, kcp *controlplanev1.KubeadmControlPlane) (why string, err error) {
	cluster := &clusterv1.Cluster{}
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster); err != nil {
		return "", err
	}
	_, res, err := askcp.UpToDate(ctx, u.Client, cluster, kcp, m)
	if err != nil {
		return "", err
	}
	if res.DesiredMachine == nil || res.DesiredInfraMachine == nil || res.DesiredKubeadmConfig == nil {
		return fmt.Sprintf("KCP computes no desired objects for it: its %s %s lacks the %s annotations KCP's clone leaves",
			m.Spec.InfrastructureRef.Kind, m.Spec.InfrastructureRef.Name, clusterv1.TemplateClonedFromNameAnnotation), nil
	}
	wl, err := u.Workloads.Client(ctx, m.Namespace, m.Spec.ClusterName)
	if err != nil {
		return "", err
	}
	if err := askcp.MoveKubeadmConfig(ctx, wl, kcp); err != nil {
		return "", fmt.Errorf("kubeadm-config: %w", err)
	}
	return "", askcp.ApplyDesired(ctx, u.Client, m, res)
}

// describeAsk names an image and the NIC firmware that goes with it.
func describeAsk(spec infrav1.BareMetalMachineSpec) string {
	if spec.NICFirmware == nil {
		return spec.Image.URL
	}
	return spec.Image.URL + " with NIC firmware " + spec.NICFirmware.URL
}

// runsCommitted says whether the host runs an installed image that passed
// its health check (on whichever kind of disk).
func runsCommitted(st agentv1.Status) bool {
	return st.OS != nil && st.OS.Source == agentv1.FromDisk && st.Images.Booted != nil && st.Images.Booted.Committed
}

// machineOwner is the KubeadmControlPlane or MachineDeployment a Machine
// belongs to (kcp is set for the first).
type machineOwner struct {
	kind, name string
	kcp        *controlplanev1.KubeadmControlPlane
}

// ownerAsks is what a Machine's owner asks of its host now: the image and
// NIC firmware of its KubeadmControlPlane's or MachineDeployment's
// BareMetalMachineTemplate (no owner when the Machine has neither, or
// another kind of template). A revert of the firmware alone changes what
// it asks as much as a revert of the image.
func (u *Updater) ownerAsks(ctx context.Context, m *clusterv1.Machine) (infrav1.BareMetalMachineSpec, *machineOwner, error) {
	var ref clusterv1.ContractVersionedObjectReference
	var owner *machineOwner
	switch {
	case m.Labels[clusterv1.MachineControlPlaneNameLabel] != "":
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := u.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Labels[clusterv1.MachineControlPlaneNameLabel]}, kcp); err != nil {
			return infrav1.BareMetalMachineSpec{}, nil, client.IgnoreNotFound(err)
		}
		ref, owner = kcp.Spec.MachineTemplate.Spec.InfrastructureRef, &machineOwner{kind: "KubeadmControlPlane", name: kcp.Name, kcp: kcp}
	case m.Labels[clusterv1.MachineDeploymentNameLabel] != "":
		md := &clusterv1.MachineDeployment{}
		if err := u.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Labels[clusterv1.MachineDeploymentNameLabel]}, md); err != nil {
			return infrav1.BareMetalMachineSpec{}, nil, client.IgnoreNotFound(err)
		}
		ref, owner = md.Spec.Template.Spec.InfrastructureRef, &machineOwner{kind: "MachineDeployment", name: md.Name}
	default:
		return infrav1.BareMetalMachineSpec{}, nil, nil
	}
	if ref.Kind != "BareMetalMachineTemplate" || ref.APIGroup != infrav1.GroupVersion.Group {
		return infrav1.BareMetalMachineSpec{}, nil, nil
	}
	t := &infrav1.BareMetalMachineTemplate{}
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, t); err != nil {
		return infrav1.BareMetalMachineSpec{}, nil, client.IgnoreNotFound(err)
	}
	return t.Spec.Template.Spec, owner, nil
}

// updateKey names what an update brings, so a failure is remembered for
// it and forgotten when the desired image or firmware changes.
func updateKey(want infrav1.Image, fw *infrav1.FirmwarePackage) string {
	if fw == nil {
		return want.Checksum
	}
	return want.Checksum + "+" + fw.URL
}

// beforeReboot runs on the old image: drain, stage, activate, reboot. A
// host that already rebooted into the new image and runs the old one
// again, the new image still on its disk, fell back: the new image did
// not boot (or did not pass its health check in its one try). One whose
// disk no longer holds the new image never got to boot it (a power cut
// while an OSTree host finalised the staged deployment loses it): the
// image is staged again, as an updater starts over.
func (u *Updater) beforeReboot(ctx context.Context, f *inFlight) (progress, error) {
	bmm, node, ag, st, want, key := f.bmm, f.node, f.agent, f.st, f.want, f.key
	if m, ok := readMark(bmm, RebootAnnotation, want.Checksum); ok && st.OS.BootID != m.bootID {
		if !holds(st, want.Checksum) {
			if err := u.unannotate(ctx, bmm, RebootAnnotation); err != nil {
				return progress{}, err
			}
			return running("%s was lost before it booted (%s runs %s again, the image is gone from its disk): staging it again", want.URL, node.Name, st.OS.Image.Name), nil
		}
		msg := fmt.Sprintf("%s did not boot: the host fell back to %s", want.URL, st.OS.Image.Name)
		return u.recordFailure(ctx, bmm, key, msg)
	} else if ok {
		return u.awaitReboot(ctx, f, m)
	}
	if p, ok, err := u.drain(ctx, bmm, f.wl, node, key); err != nil || !ok {
		return p, err
	}
	var root agentv1.RootID
	if s := st.Images.Staged; s != nil && s.State == agentv1.RootWritten && s.Checksum == want.Checksum {
		root = s.ID
	} else {
		staged, done, err := u.stage(f.machine, ag, st, want)
		if err != nil {
			return u.recordFailure(ctx, bmm, key, fmt.Sprintf("staging %s: %v", want.URL, err))
		}
		if !done {
			return running("staging %s on %s", want.URL, node.Name), nil
		}
		root = staged
	}
	// One try: an image that does not pass its health check on its first
	// boot is given up, and the next boot is the old one.
	if err := ag.Activate(ctx, root, 1); err != nil {
		return progress{}, err
	}
	if err := u.markReboot(ctx, bmm, want.Checksum, st.OS.BootID); err != nil {
		return progress{}, err
	}
	if err := u.reboot(ctx, bmm, ag, false); err != nil {
		return progress{}, err
	}
	return running("rebooting %s into %s", node.Name, want.URL), nil
}

// awaitReboot waits for the old OS to go after the reboot into the new
// image was asked for (m). One still running, not shutting down,
// RebootRetry later never got the request (a BMC that did not answer):
// it is asked again, hard. One its agent reports shutting down is doing
// so cleanly and is left ShutdownTimeout: a hard reset would lose an
// OSTree host's staged deployment (staged again: see beforeReboot) and
// cut an A/B host's services, etcd among them, mid-stop.
func (u *Updater) awaitReboot(ctx context.Context, f *inFlight, m mark) (progress, error) {
	waited := u.now().Sub(m.at)
	stopping := f.st.Phase == agentv1.PhaseShuttingDown
	switch {
	case stopping && waited <= u.shutdownTimeout():
		return running("%s is shutting down into the new image (%s since the reboot was asked)", f.node.Name, waited.Round(time.Second)), nil
	case !stopping && waited <= u.rebootRetry():
		return running("rebooting %s into the new image", f.node.Name), nil
	}
	if err := u.reboot(ctx, f.bmm, f.agent, true); err != nil {
		return progress{}, err
	}
	if err := u.markReboot(ctx, f.bmm, f.want.Checksum, f.st.OS.BootID); err != nil {
		return progress{}, err
	}
	if stopping {
		return running("%s did not finish shutting down in %s: reset it", f.node.Name, u.shutdownTimeout()), nil
	}
	return running("%s still runs the old OS %s after the reboot was asked: reset it", f.node.Name, waited.Round(time.Second)), nil
}

// afterReboot runs on the new image: health check (commit), the NIC
// flash when it comes after the image, uncordon, wait for the Node to
// report the new kubelet.
func (u *Updater) afterReboot(ctx context.Context, f *inFlight) (progress, error) {
	machine, bmm, desiredKC, wl, node, ag, st, key := f.machine, f.bmm, f.kc, f.wl, f.node, f.agent, f.st, f.key
	if !st.Images.Booted.Committed {
		h, err := ag.Health(ctx)
		if err != nil {
			return progress{}, err
		}
		if !h.Healthy {
			if uptime(st) < u.HealthGrace {
				return running("health check of %s: %s", st.OS.Image.Name, h.Reason), nil
			}
			msg := fmt.Sprintf("health check of %s failed: %s; rebooting to fall back to %s", st.OS.Image.Name, h.Reason, fallbackName(st))
			p, err := u.recordFailure(ctx, bmm, key, msg)
			if err == nil {
				err = u.reboot(ctx, bmm, ag, false)
			}
			return p, err
		}
	}
	if f.flash != nil {
		return u.flashNIC(ctx, bmm, wl, node, f.flash, key)
	}
	if msg := linksDown(st.OS.Links); msg != "" && bmm.Spec.NICFirmware != nil {
		return u.recordFailure(ctx, bmm, key, fmt.Sprintf("after the NVM update of %s: %s", node.Name, msg))
	}
	if write := filesToWrite(st, desiredKC); len(write) > 0 {
		// The KubeadmConfig's files changed in place: write them as
		// cloud-init's write_files did, and judge what the host reports.
		sums, err := ag.WriteFiles(ctx, write)
		if err != nil {
			return progress{}, err
		}
		st.Files = sums
		if still := filesToWrite(st, desiredKC); len(still) > 0 {
			return u.recordFailure(ctx, bmm, key, fmt.Sprintf("host of %s does not report the files written: %s", node.Name, strings.Join(slices.Sorted(maps.Keys(still)), ", ")))
		}
	}
	if _, cp := machine.Labels[clusterv1.MachineControlPlaneLabel]; cp {
		if kubeadmDiffers(st, desiredKC) != "" {
			// The host's kubeadm is not what the KubeadmConfig claims (it
			// ran this image since before the update, as after a revert
			// to the image it fell back to, or its agent lost what it
			// applied): run kubeadm upgrade node against the cluster's
			// current kubeadm-config, once, and judge what it applied.
			k, err := ag.KubeadmUpgrade(ctx)
			if err != nil {
				return progress{}, err
			}
			st.Kubeadm = &k
			if msg := kubeadmDiffers(st, desiredKC); msg != "" {
				return u.recordFailure(ctx, bmm, key, msg)
			}
		}
	}
	if node.Spec.Unschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = false
		if err := wl.Patch(ctx, node, patch); err != nil {
			return progress{}, err
		}
	}
	if node.Status.NodeInfo.KubeletVersion != machine.Spec.Version || !nodeReady(node) {
		return running("waiting for node %s to be Ready at %s (kubelet %s)", node.Name, machine.Spec.Version, node.Status.NodeInfo.KubeletVersion), nil
	}
	return progress{done: true, message: fmt.Sprintf("%s runs %s (%s root %s)", node.Name, st.OS.Image.Name, st.Images.Kind, st.OS.Root)}, nil
}

// fallbackName names the image the bootloader falls back to.
func fallbackName(st agentv1.Status) string {
	if fb := st.Images.Fallback; fb != nil {
		return fb.Image
	}
	return "the recovery partition"
}

// filesToWrite are the KubeadmConfig's files the host does not have with
// their content (path to content); files CanUpdate never claims
// (plainFile) are left to a rollout.
func filesToWrite(st agentv1.Status, kc *bootstrapv1.KubeadmConfig) map[string]string {
	if kc == nil {
		return nil
	}
	out := map[string]string{}
	for _, f := range kc.Spec.Files {
		if plainFile(f) == "" && st.Files[f.Path] != agentv1.FileSum(f.Content) {
			out[f.Path] = f.Content
		}
	}
	return out
}

// stage writes want in the background, into whichever root the host
// stages into, and reports whether it is written and where. A write cut
// short (see cutShort) is started again, up to maxWrites; a failure the
// agent reported is returned.
func (u *Updater) stage(machine *clusterv1.Machine, ag *hostagent.Client, st agentv1.Status, want infrav1.Image) (root agentv1.RootID, done bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.staging == nil {
		u.staging = map[string]*staging{}
	}
	key := string(machine.UID)
	attempts := 0
	s, ours := u.staging[key]
	ours = ours && s.checksum == want.Checksum
	if ours && !s.done || writing(st, want.Checksum) {
		// A write is under way: this process's, or one it did not
		// start (another replica's, this one's before it restarted, or
		// one whose call failed while the host went on), which the host
		// refuses to run twice at once. The host says how it ends.
		return "", false, nil
	}
	if ours {
		switch {
		case s.err == nil && staged(st, s.root, want.Checksum):
			delete(u.staging, key)
			return s.root, true, nil
		case s.err == nil:
			// Written, but gone from the disk since (the power went
			// before the image booted): write it again.
		case !cutShort(s, st) || s.attempts >= maxWrites:
			delete(u.staging, key)
			return "", false, s.err
		}
		attempts = s.attempts // cut short by a restart: write again
	}
	s = &staging{checksum: want.Checksum, bootID: st.OS.BootID, attempts: attempts + 1}
	u.staging[key] = s
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		root, err := ag.Stage(ctx, want.URL, want.Checksum)
		u.mu.Lock()
		s.done, s.root, s.err = true, root, err
		u.mu.Unlock()
	}()
	return "", false, nil
}

// cutShort says whether a failed write was cut off rather than refused:
// the host restarted under it (another boot runs than the one it began
// under: power lost, a reset), or the call got no reply at all (the agent or
// the host went away mid-call).
func cutShort(s *staging, st agentv1.Status) bool {
	var refused *hostagent.Error
	return st.OS.BootID != s.bootID || !errors.As(s.err, &refused)
}

// reboot restarts the host through its BareMetalHost (PowerThroughHost),
// its BMC, or its OS when it has none (a registered host): gracefully,
// so the OS shuts down first (an OSTree host finalises its staged
// deployment then; a hard reset would lose it), or with force a hard
// restart. ag may be nil where the host's OS is not to be asked (a reset
// that applies a staged NIC flash).
func (u *Updater) reboot(ctx context.Context, bmm *infrav1.BareMetalMachine, ag *hostagent.Client, force bool) error {
	if u.PowerThroughHost {
		return u.askHostReboot(ctx, bmm, force)
	}
	bmc, err := u.dialBMC(ctx, bmm)
	if err != nil {
		return err
	}
	if bmc == nil {
		if ag == nil {
			return errors.New("its host has no BMC")
		}
		return ag.Reboot(ctx)
	}
	defer bmc.Close()
	if force {
		return bmc.PowerOn() // ForceRestart when on
	}
	return bmc.Restart()
}

// askHostReboot asks the machine's BareMetalHost for a reboot with
// baremetal-operator's annotation: soft (the OS shuts down first), or
// hard with force. The inventory powers the host off, removes the
// annotation and powers it on again.
func (u *Updater) askHostReboot(ctx context.Context, bmm *infrav1.BareMetalMachine, force bool) error {
	host := &metal3.BareMetalHost{}
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: bmm.Namespace, Name: bmm.Status.Host}, host); err != nil {
		return err
	}
	patch := client.MergeFrom(host.DeepCopy())
	if host.Annotations == nil {
		host.Annotations = map[string]string{}
	}
	mode := metal3.RebootModeSoft
	if force {
		mode = metal3.RebootModeHard
	}
	host.Annotations[metal3.RebootAnnotationPrefix] = fmt.Sprintf(`{"mode":%q}`, mode)
	return u.Client.Patch(ctx, host, patch)
}

// dialBMC connects to the BMC of the machine's host; nil when the host
// has none.
func (u *Updater) dialBMC(ctx context.Context, bmm *infrav1.BareMetalMachine) (*redfish.Client, error) {
	host := &metal3.BareMetalHost{}
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: bmm.Namespace, Name: bmm.Status.Host}, host); err != nil {
		return nil, err
	}
	if host.Spec.BMC.Address == "" {
		return nil, nil
	}
	addr, err := redfish.ParseAddress(host.Spec.BMC.Address)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := u.Client.Get(ctx, client.ObjectKey{Namespace: host.Namespace, Name: host.Spec.BMC.CredentialsName}, secret); err != nil {
		return nil, err
	}
	return redfish.Dial(addr, string(secret.Data["username"]), string(secret.Data["password"]), u.BMCHTTP)
}

// markReboot records that the reboot into the image with checksum was
// asked for now, under the boot bootID.
func (u *Updater) markReboot(ctx context.Context, bmm *infrav1.BareMetalMachine, checksum, bootID string) error {
	return u.annotate(ctx, bmm, RebootAnnotation, markValue(checksum, u.now(), bootID))
}

// uptime is how long the host's OS has run, by the host's own clock.
func uptime(st agentv1.Status) time.Duration {
	return time.Duration(st.OS.UptimeSeconds * float64(time.Second))
}

// staged says whether root holds a whole copy of the image with checksum.
func staged(st agentv1.Status, root agentv1.RootID, checksum string) bool {
	r := st.Images.Root(root)
	return r != nil && r.State == agentv1.RootWritten && r.Checksum == checksum
}

// writing says whether an image write of checksum is under way on the
// host's disk.
func writing(st agentv1.Status, checksum string) bool {
	for _, r := range st.Images.Roots {
		if r.Checksum == checksum && r.State == agentv1.RootWriting {
			return true
		}
	}
	return false
}

// holds says whether the host's disk holds a whole copy of the image with
// checksum, in any root.
func holds(st agentv1.Status, checksum string) bool {
	for _, r := range st.Images.Roots {
		if r.Checksum == checksum && r.State == agentv1.RootWritten {
			return true
		}
	}
	return false
}

// mark is what a "WHAT@TIME[@BOOTID]" annotation records: when the
// extension did something, by its own clock, and which boot of the host
// ran then. Time is only ever compared with the extension's clock (how
// long ago); whether the host restarted since is a different boot ID in
// its status, never a comparison of the host's clock with ours (clocks
// of real hosts drift).
type mark struct {
	at     time.Time
	bootID string
}

func markValue(what string, at time.Time, bootID string) string {
	v := what + "@" + at.UTC().Format(time.RFC3339Nano)
	if bootID != "" {
		v += "@" + bootID
	}
	return v
}

// readMark reads a mark annotation for what.
func readMark(bmm *infrav1.BareMetalMachine, annotation, what string) (mark, bool) {
	v, ok := strings.CutPrefix(bmm.Annotations[annotation], what+"@")
	if !ok {
		return mark{}, false
	}
	at, bootID, _ := strings.Cut(v, "@")
	t, err := time.Parse(time.RFC3339Nano, at)
	return mark{at: t, bootID: bootID}, err == nil
}

// annotatedAt reads when a mark annotation for what was made.
func annotatedAt(bmm *infrav1.BareMetalMachine, annotation, what string) (time.Time, bool) {
	m, ok := readMark(bmm, annotation, what)
	return m.at, ok
}

func (u *Updater) recordFailure(ctx context.Context, bmm *infrav1.BareMetalMachine, key, msg string) (progress, error) {
	if err := u.annotate(ctx, bmm, FailedAnnotation, key+" "+msg); err != nil {
		return progress{}, err
	}
	return progress{failed: true, message: msg}, nil
}

// recordedFailure is the failure the BareMetalMachine records, whatever
// update it was for: its key and message.
func recordedFailure(bmm *infrav1.BareMetalMachine) (key, msg string, ok bool) {
	v, found := bmm.Annotations[FailedAnnotation]
	if !found {
		return "", "", false
	}
	key, msg, _ = strings.Cut(v, " ")
	return key, msg, true
}

func (u *Updater) annotate(ctx context.Context, bmm *infrav1.BareMetalMachine, key, value string) error {
	patch := client.MergeFrom(bmm.DeepCopy())
	if bmm.Annotations == nil {
		bmm.Annotations = map[string]string{}
	}
	bmm.Annotations[key] = value
	return u.Client.Patch(ctx, bmm, patch)
}

func (u *Updater) unannotate(ctx context.Context, bmm *infrav1.BareMetalMachine, key string) error {
	if _, ok := bmm.Annotations[key]; !ok {
		return nil
	}
	patch := client.MergeFrom(bmm.DeepCopy())
	delete(bmm.Annotations, key)
	return u.Client.Patch(ctx, bmm, patch)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kubeadmDiffers says how the control-plane host's kubeadm differs from
// what the KubeadmConfig claims ("": it does not): `kubeadm upgrade node`
// on the running image applied the cluster's kubeadm-config, whose
// kubernetesVersion and feature gates KCP updates before it updates a
// Machine. Another version (a control plane the kubelet does not match)
// or other gates mean the kubeadm-config was not updated, which no
// reboot changes.
func kubeadmDiffers(st agentv1.Status, desiredKC *bootstrapv1.KubeadmConfig) string {
	want := desiredKC.Spec.ClusterConfiguration.FeatureGates
	switch {
	case st.Kubeadm == nil:
		return "kubeadm on " + st.Host + " reports nothing applied"
	case st.Kubeadm.KubernetesVersion != st.OS.Image.KubernetesVersion:
		return fmt.Sprintf("kubeadm on %s last wrote the control plane at %s (the cluster's kubeadm-config kubernetesVersion); the host's kubelet is %s", st.Host, st.Kubeadm.KubernetesVersion, st.OS.Image.KubernetesVersion)
	case !maps.Equal(st.Kubeadm.FeatureGates, want):
		return fmt.Sprintf("kubeadm upgrade node on %s applied feature gates %v from the cluster's kubeadm-config; the KubeadmConfig wants %v", st.Host, st.Kubeadm.FeatureGates, want)
	}
	return ""
}
