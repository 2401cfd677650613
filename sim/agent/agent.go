package agent

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// Timing is the modelled duration of the agent's steps.
type Timing struct {
	KubeadmInit, KubeadmJoin time.Duration
	// NodeGracePeriod is how long a silent kubelet stays Ready (the
	// controller manager's --node-monitor-grace-period: 50 s since
	// kubernetes/kubernetes#126287, five of the kubelet's 10 s status
	// updates).
	NodeGracePeriod time.Duration
}

// DefaultTiming follows kubeadm and the controller manager's defaults.
var DefaultTiming = Timing{KubeadmInit: 25 * time.Second, KubeadmJoin: 20 * time.Second, NodeGracePeriod: 50 * time.Second}

// Machine is the hardware and disks the agent's OS runs on; *lab.Host is
// one. A VM running the agent as its init would implement it over the
// lab's hardware model from inside the guest.
type Machine interface {
	Name() string
	Status() lab.HostStatus
	// Inventory is the hardware as the running OS finds it.
	Inventory() lab.Inventory
	UserData() []byte
	WriteConfigDrive(userData []byte, metaData map[string]string) error
	MetaData() map[string]string
	// The update contract (sim/disk): stage, activate, commit, roll back,
	// and the running OS's /etc.
	WriteImage(ctx context.Context, url, sha256 string) (disk.RootID, error)
	Activate(root disk.RootID, tries int) error
	Commit() error
	Rollback() error
	Etc() map[string]string
	WriteEtc(path, content string) error
	RequestRecoveryBoot() error
	// Reboot is a graceful restart, as the OS's own reboot is; Shutdown
	// the OS's own poweroff.
	Reboot(ctx context.Context) error
	Shutdown(ctx context.Context) error
	WipeData() error
	EraseDisk() error
	SetPersistent(name, content string) error
	Persistent() map[string]string
	Record(kind lab.EventKind, reason, message string, data map[string]string)
}

// Workload is what kubeadm and the kubelet reach of their cluster;
// *workload.Clusters is one.
type Workload interface {
	ByEndpoint(hostPort string) (string, bool)
	JoinControlPlane(ctx context.Context, cluster, node string, rel workload.Release, args workload.StaticPodArgs, clusterCA, etcdCA workload.CA) error
	InitObjects(ctx context.Context, cluster string, rel workload.Release, clusterConfiguration string) error
	SetNode(ctx context.Context, cluster string, n workload.NodeInfo) error
	SetNodeNotReady(ctx context.Context, cluster, name, reason string) error
	NodeReady(ctx context.Context, cluster, name string) (bool, string, error)
	// StopNode: the host went off; its kubelet, static pods and etcd
	// member stop with it.
	StopNode(ctx context.Context, cluster, node string) error
	// MemberDataLost: the host's disk was erased; the etcd data of its
	// member (if it has one) is gone.
	MemberDataLost(ctx context.Context, cluster, node string) error
	// ClusterConfiguration is the kubeadm-config ConfigMap's
	// ClusterConfiguration, which kubeadm join and kubeadm upgrade node
	// read from the cluster ("" when there is none).
	ClusterConfiguration(ctx context.Context, cluster string) (string, error)
}

// Agent is the OS of one host. It acts on each boot the lab reports.
type Agent struct {
	host     Machine
	clusters Workload
	scale    timescale.Scale
	timing   Timing

	mu sync.Mutex
	// joined is the node this host became, once kubeadm ran.
	joined  *Bootstrap
	cluster string
	// joinedWith is the user data kubeadm ran with; other user data (the
	// host was provisioned again) means a new node.
	joinedWith []byte
	// boot counts power cycles, so a late NotReady never hits a newer boot.
	boot int
	// down is set from a shutdown's start, a hang or a power-off until the
	// next boot: the node's processes are stopped already.
	down bool
	// resetPending is set by a reset request: the next recovery boot wipes.
	resetPending bool
	// lastKubeadm is what kubeadm last did on this control-plane host.
	lastKubeadm kubeadmRun
	// files are the files written on the host (path to content): the
	// user data's write_files at its first boot, then each WriteFiles.
	// They live where /etc does on an image-based OS, kept across A/B
	// image updates and lost with a wipe.
	files map[string]string
	// prov is how the agent reaches its provisioner, apiURL where its own
	// API answers (reported to the provisioner).
	prov   Provisioner
	apiURL string

	// nodeStatus orders the two writers of the Node's Ready condition:
	// the node lifecycle's NotReady after a power loss and the kubelet's
	// Ready after a boot. A NotReady decided for an earlier boot is
	// written before the next boot's kubelet reports, never after it: a
	// real kubelet keeps posting its status, so a stale NotReady would
	// not outlive its next post, and this kubelet posts once a boot.
	nodeStatus sync.Mutex
}

// New makes the agent of host; Run starts it.
func New(host Machine, clusters Workload, scale timescale.Scale, timing Timing) *Agent {
	return &Agent{host: host, clusters: clusters, scale: scale, timing: timing}
}

// Run follows the lab's events for this host until ctx ends.
func (a *Agent) Run(ctx context.Context, events <-chan lab.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Host != a.host.Name() {
				continue
			}
			switch {
			case e.Kind == lab.EventBoot && e.Reason == "OSRunning":
				a.mu.Lock()
				a.boot++
				a.down = false
				boot := a.boot
				a.mu.Unlock()
				go a.booted(ctx, boot)
			case e.Kind == lab.EventPower && e.Data["power"] == string(lab.PoweredOff),
				e.Kind == lab.EventBoot && e.Reason == lab.EventOSHung,
				e.Kind == lab.EventBoot && e.Reason == lab.EventOSShuttingDown:
				// Shutting down, off or frozen, the node's processes are
				// gone alike: a graceful shutdown stops the kubelet and
				// the containers among its first units, so the grace
				// period runs from its start, not from the power-off
				// that ends it.
				a.mu.Lock()
				if a.down {
					a.mu.Unlock()
					continue
				}
				a.boot++
				a.down = true
				boot := a.boot
				a.mu.Unlock()
				// In the event loop, so it is done before the next
				// boot's kubelet starts anything.
				a.stopNode(ctx)
				go a.poweredOff(ctx, boot)
			}
		}
	}
}

func (a *Agent) record(reason, msg string) {
	a.host.Record(lab.EventAgent, reason, msg, nil)
}

func (a *Agent) current(boot int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.boot == boot
}

// booted runs kubeadm on the first boot with bootstrap data, and on every
// later boot brings the node back with the versions of what booted.
func (a *Agent) booted(ctx context.Context, boot int) {
	status := a.host.Status()
	if status.OS != nil && status.OS.Source == lab.FromRecovery {
		a.recovered()
		a.register(ctx, boot, status.OS)
		return
	}
	if isDeployRamdisk(status.OS) {
		a.deployRamdisk(ctx, boot, status.OS)
		return
	}
	if status.OS == nil || status.OS.Source != lab.FromDisk {
		return // other media runs no kubelet
	}
	data := a.host.UserData()
	a.mu.Lock()
	if a.joined != nil && !bytes.Equal(a.joinedWith, data) {
		a.forget()
	}
	joined := a.joined
	a.mu.Unlock()
	if joined == nil {
		if len(data) == 0 {
			a.record("NoBootstrapData", "no user data on the config drive: the OS runs without a kubelet")
			a.commitInstall(status)
			return
		}
		meta := maps.Clone(a.host.MetaData())
		if meta == nil {
			meta = map[string]string{}
		}
		if meta[MetaHostname] == "" {
			meta[MetaHostname] = a.host.Name()
		}
		b, err := ParseBootstrap(data, meta)
		if err == nil && b.ProviderID == "" {
			b.ProviderID = meta[MetaProviderID]
			if b.ProviderID == "" {
				b.ProviderID = ProviderIDScheme + a.host.Name()
			}
		}
		if err != nil {
			a.record("BootstrapFailed", err.Error())
			return
		}
		if err := a.kubeadm(ctx, b, status, data); err != nil {
			a.record("KubeadmFailed", err.Error())
			return
		}
		a.commitInstall(status)
		return
	}
	if !a.current(boot) {
		return
	}
	a.startKubelet(ctx, boot, joined, status)
}

// kubeletRetry is how long the kubelet waits before it tries again to
// bring its node back after the cluster refused it (lab time).
const kubeletRetry = 10 * time.Second

// startKubelet brings the node back on this boot, and, as a real kubelet
// does, keeps trying while the cluster refuses (an etcd election, a lost
// quorum): every failure is recorded, and it tries again kubeletRetry
// later until it succeeds or the host boots again.
func (a *Agent) startKubelet(ctx context.Context, boot int, b *Bootstrap, status lab.HostStatus) {
	for a.current(boot) {
		err := a.rejoin(ctx, b, status)
		if err == nil {
			return
		}
		a.record("KubeletFailed", err.Error())
		if a.scale.Sleep(ctx, kubeletRetry) != nil {
			return
		}
	}
}

// commitInstall marks a fresh installation good once its first boot came
// up (kubeadm done, when it had bootstrap data), as installers do. An
// update, which has a committed image to fall back to, waits for its
// health check instead.
func (a *Agent) commitInstall(status lab.HostStatus) {
	if !status.OS.Trial {
		return
	}
	if status.Disk.Images().Fallback != nil {
		return
	}
	if err := a.host.Commit(); err != nil {
		a.record("CommitFailed", err.Error())
		return
	}
	a.record("InstallCommitted", "first boot of the installation ("+string(status.OS.Root)+") came up: committed")
}

// recovered is the recovery OS: after a reset request it wipes the
// persistent and OEM partitions and the config drive and reinstalls
// (erases both slots), and the host forgets the node it was; it then
// registers anew when it belongs to a registration pool.
func (a *Agent) recovered() {
	a.mu.Lock()
	pending := a.resetPending
	a.resetPending = false
	joined, cluster := a.joined, a.cluster
	if pending {
		a.forget()
	}
	a.mu.Unlock()
	if !pending {
		return
	}
	if err := a.host.WipeData(); err != nil {
		a.record("ResetFailed", err.Error())
		return
	}
	a.record("ResetWiped", "recovery wiped the persistent and OEM partitions and the config drive")
	a.dataLost(joined, cluster)
}

// erased is the disk erased by cleaning: the host forgets the node it
// was, whose data went with the disk.
func (a *Agent) erased() {
	a.mu.Lock()
	joined, cluster := a.joined, a.cluster
	a.forget()
	a.mu.Unlock()
	a.dataLost(joined, cluster)
}

// forget is the host forgetting the node it was, with what kubeadm and
// cloud-init wrote (a.mu held).
func (a *Agent) forget() {
	a.joined, a.cluster, a.joinedWith, a.files, a.lastKubeadm = nil, "", nil, nil, kubeadmRun{}
}

// dataLost tells the workload that the disk of the node this host was is
// gone, with its etcd member's data (a node that ran no member loses
// nothing the cluster counts).
func (a *Agent) dataLost(joined *Bootstrap, cluster string) {
	if joined == nil || joined.Action == JoinWorker {
		return
	}
	if err := a.clusters.MemberDataLost(context.Background(), cluster, joined.NodeName); err != nil {
		a.record("DataLossUnreported", err.Error())
	}
}

// RequestReset reboots into recovery, which wipes the host's data.
func (a *Agent) RequestReset() error {
	a.mu.Lock()
	a.resetPending = true
	a.mu.Unlock()
	if err := a.host.RequestRecoveryBoot(); err != nil {
		return err
	}
	go func() {
		if err := a.host.Reboot(context.Background()); err != nil {
			a.record("RebootFailed", "the reboot into recovery failed: "+err.Error())
		}
	}()
	return nil
}

// kubeadm performs a simulated kubeadm init or join.
func (a *Agent) kubeadm(ctx context.Context, b *Bootstrap, status lab.HostStatus, data []byte) error {
	cluster, ok := a.clusters.ByEndpoint(b.Endpoint)
	if !ok {
		return fmt.Errorf("kubeadm %s: no API server answers at %s", b.Action, b.Endpoint)
	}
	wait := a.timing.KubeadmJoin
	if b.Action == Init {
		wait = a.timing.KubeadmInit
	}
	a.record("Kubeadm", fmt.Sprintf("kubeadm %s of node %s into %s at %s", b.Action, b.NodeName, cluster, b.Endpoint))
	if err := a.scale.Sleep(ctx, wait); err != nil {
		return err
	}
	var run kubeadmRun
	switch b.Action {
	case Init:
		run = kubeadmRan(status.OS.Image, b.ClusterConfiguration, workload.Release{})
	case JoinControlPlane:
		// kubeadm join reads the cluster's ClusterConfiguration, not the
		// user data's: its version and extraArgs are what KCP synced there.
		cc, err := a.clusters.ClusterConfiguration(ctx, cluster)
		if err != nil {
			return fmt.Errorf("kubeadm join of %s: reading kubeadm-config: %w", b.NodeName, err)
		}
		run = kubeadmRan(status.OS.Image, cc, workload.Release{})
	}
	if b.Action != JoinWorker {
		if err := a.clusters.JoinControlPlane(ctx, cluster, b.NodeName, run.pods, run.args, *b.ClusterCA, *b.EtcdCA); err != nil {
			return err
		}
	}
	if b.Action == Init {
		if err := a.clusters.InitObjects(ctx, cluster, run.pods, b.ClusterConfiguration); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.joined, a.cluster, a.joinedWith, a.lastKubeadm = b, cluster, data, run
	a.files = maps.Clone(b.Files)
	a.mu.Unlock()
	return a.rejoin(ctx, b, status)
}

// rejoin is the kubelet starting on a booted OS: the Node reports the
// booted image's versions, Ready only when every port has link.
func (a *Agent) rejoin(ctx context.Context, b *Bootstrap, status lab.HostStatus) error {
	ready, reason := true, ""
	var down []string
	for _, l := range status.OS.Links {
		if !l.Up {
			down = append(down, l.Port+": "+l.Message)
		}
	}
	if len(down) > 0 {
		ready, reason = false, "network plugin not ready: link down on "+strings.Join(down, "; ")
	}
	img := status.OS.Image
	if b.Action != JoinWorker {
		// The kubelet starts the static pods from their manifests (and
		// the etcd member with them, which kubeadm's read of the
		// cluster needs), then, on a host whose kubelet is another
		// version than kubeadm last ran under, kubeadm upgrade node
		// rewrites them from the cluster's kubeadm-config.
		a.mu.Lock()
		run := a.lastKubeadm
		a.mu.Unlock()
		if err := a.clusters.JoinControlPlane(ctx, a.cluster, b.NodeName, run.pods, run.args, *b.ClusterCA, *b.EtcdCA); err != nil {
			return err
		}
		if err := a.upgradeNode(ctx, img, false); err != nil {
			return err
		}
	}
	var annotations map[string]string
	if _, apiURL := a.provisioner(); apiURL != "" {
		annotations = map[string]string{agentv1.AgentURLAnnotation: apiURL}
	}
	a.nodeStatus.Lock()
	defer a.nodeStatus.Unlock()
	err := a.clusters.SetNode(ctx, a.cluster, workload.NodeInfo{
		Name: b.NodeName, ProviderID: b.ProviderID, ControlPlane: b.Action != JoinWorker, Labels: b.Labels, Annotations: annotations,
		KubeletVersion: img.KubernetesVersion, ContainerRuntime: "containerd://" + img.Containerd,
		KernelVersion: img.Kernel, OSImage: img.OSImage, Ready: ready, NotReadyReason: reason,
	})
	if err == nil {
		a.record("KubeletRunning", fmt.Sprintf("node %s: kubelet %s, ready=%v %s", b.NodeName, img.KubernetesVersion, ready, reason))
	}
	return err
}

// WriteFiles writes files on the running OS (path to content, as
// cloud-init's write_files does) and answers every file the host has,
// path to the SHA-256 of its content. A host that runs no OS refuses.
func (a *Agent) WriteFiles(files map[string]string) (map[string]string, error) {
	st := a.host.Status()
	if st.OS == nil || st.OS.Source != lab.FromDisk {
		return nil, fmt.Errorf("write files: %s runs no installed OS: %w", st.Name, lab.ErrNotRunning)
	}
	a.mu.Lock()
	if a.files == nil {
		a.files = map[string]string{}
	}
	var paths []string
	for path, content := range files {
		a.files[path] = content
		paths = append(paths, path)
	}
	out := fileSums(a.files)
	a.mu.Unlock()
	sort.Strings(paths)
	a.record("FilesWritten", fmt.Sprintf("wrote %s", strings.Join(paths, ", ")))
	return out, nil
}

// fileSums is path to the hex SHA-256 of each file's content.
func fileSums(files map[string]string) map[string]string {
	if len(files) == 0 {
		return nil
	}
	out := make(map[string]string, len(files))
	for path, content := range files {
		out[path] = agentv1.FileSum(content)
	}
	return out
}

// KubeadmUpgrade runs `kubeadm upgrade node` on a joined control-plane
// host, whatever kubeadm did before: the control plane at the cluster's
// kubeadm-config version.
func (a *Agent) KubeadmUpgrade(ctx context.Context) (*agentv1.Kubeadm, error) {
	a.mu.Lock()
	b := a.joined
	a.mu.Unlock()
	st := a.host.Status()
	if b == nil || b.Action == JoinWorker || st.OS == nil {
		return nil, fmt.Errorf("kubeadm upgrade node: %s runs no control-plane node", st.Name)
	}
	if err := a.upgradeNode(ctx, st.OS.Image, true); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastKubeadm.status(), nil
}

// upgradeNode is `kubeadm upgrade node` on a control-plane host whose
// kubelet is another Kubernetes version than kubeadm last ran under (or,
// forced, on any): it reads the cluster's ClusterConfiguration (which KCP
// updates before an upgrade) and applies it, feature gates included, and
// rewrites the static pods' manifests at its kubernetesVersion with its
// extraArgs (kubeadmRan). A reboot into the same kubelet changes nothing.
func (a *Agent) upgradeNode(ctx context.Context, img imagev1.Manifest, force bool) error {
	a.mu.Lock()
	before, cluster, b := a.lastKubeadm, a.cluster, a.joined
	a.mu.Unlock()
	if !force && before.kubelet == img.KubernetesVersion {
		return nil
	}
	cc, err := a.clusters.ClusterConfiguration(ctx, cluster)
	if err != nil {
		return fmt.Errorf("kubeadm upgrade node: reading kubeadm-config: %w", err)
	}
	run := kubeadmRan(img, cc, before.pods)
	a.mu.Lock()
	a.lastKubeadm = run
	a.mu.Unlock()
	a.record("KubeadmUpgrade", fmt.Sprintf("kubeadm upgrade node to %s (etcd %s) with feature gates %v on kubelet %s", run.pods.Kubernetes, run.pods.Etcd, run.gates, img.KubernetesVersion))
	return a.clusters.JoinControlPlane(ctx, cluster, b.NodeName, run.pods, run.args, *b.ClusterCA, *b.EtcdCA)
}

// stopNode is the host gone off: what its node ran (kubelet, static
// pods, etcd member) stops with it.
func (a *Agent) stopNode(ctx context.Context) {
	a.mu.Lock()
	b, cluster := a.joined, a.cluster
	a.mu.Unlock()
	if b == nil {
		return
	}
	if err := a.clusters.StopNode(ctx, cluster, b.NodeName); err != nil {
		a.record("NodeStopFailed", err.Error())
	}
}

// poweredOff marks the Node NotReady once the grace period passes
// without a new boot, as the node lifecycle controller does (a write the
// cluster refuses when it has lost its quorum). A hung host goes the same
// way: its kubelet posts no status either.
func (a *Agent) poweredOff(ctx context.Context, boot int) {
	a.mu.Lock()
	b, cluster := a.joined, a.cluster
	a.mu.Unlock()
	if b == nil {
		return
	}
	if a.scale.Sleep(ctx, a.timing.NodeGracePeriod) != nil {
		return
	}
	a.nodeStatus.Lock()
	defer a.nodeStatus.Unlock()
	if !a.current(boot) {
		return
	}
	if err := a.clusters.SetNodeNotReady(ctx, cluster, b.NodeName, "Kubelet stopped posting node status."); err == nil {
		a.record("NodeNotReady", "node "+b.NodeName+": its kubelet posts no status (the host is off or hung)")
	}
}

// CheckHealth checks what an update agent checks after booting a new
// image (kubelet up, every port with link, the Node Ready; greenboot's
// checks) and commits the running root when all pass; a failure leaves it
// uncommitted, so the bootloader falls back once its tries run out.
func (a *Agent) CheckHealth(ctx context.Context) (agentv1.Health, error) {
	status := a.host.Status()
	if status.OS == nil || status.OS.Source != lab.FromDisk {
		return agentv1.Health{}, fmt.Errorf("health check: %w", lab.ErrNotRunning)
	}
	h := agentv1.Health{Healthy: true}
	fail := func(reason string) {
		if h.Healthy {
			h.Healthy, h.Reason = false, reason
		}
	}
	a.mu.Lock()
	b, cluster := a.joined, a.cluster
	a.mu.Unlock()
	if b == nil {
		fail("kubelet: not joined to a cluster")
	} else {
		h.Checks = append(h.Checks, "kubelet running as "+b.NodeName)
	}
	for _, l := range status.OS.Links {
		if !l.Up {
			fail(fmt.Sprintf("NIC %s: link down: %s", l.Port, l.Message))
		} else {
			h.Checks = append(h.Checks, "NIC "+l.Port+" link up")
		}
	}
	if b != nil {
		ready, msg, err := a.clusters.NodeReady(ctx, cluster, b.NodeName)
		switch {
		case err != nil:
			fail("node " + b.NodeName + ": " + err.Error())
		case !ready:
			fail("node " + b.NodeName + " not Ready: " + msg)
		default:
			h.Checks = append(h.Checks, "node "+b.NodeName+" Ready")
		}
	}
	if h.Healthy {
		if err := a.host.Commit(); err != nil {
			return h, err
		}
		a.record("HealthCheckPassed", string(status.OS.Root)+" committed: "+strings.Join(h.Checks, ", "))
	} else {
		a.record("HealthCheckFailed", h.Reason)
	}
	return h, nil
}
