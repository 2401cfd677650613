package vocab

// Kinds the monitors watch, as timeline entries name them.
const (
	KindMachine           = "Machine"
	KindControlPlane      = "KubeadmControlPlane"
	KindMachineDeployment = "MachineDeployment"
	KindCluster           = "Cluster"
	KindHost              = "BareMetalHost"
	KindNode              = "Node"
	KindEtcdMember        = "EtcdMember"
	KindMachineSet        = "MachineSet"
	// KindAddon is a kubeadm add-on KCP keeps at the cluster's version:
	// the kube-proxy DaemonSet and the CoreDNS Deployment.
	KindAddon = "Addon"
	// KindStaticPod is a control-plane node's kube-apiserver,
	// kube-controller-manager or kube-scheduler (its mirror pod; etcd's
	// is KindEtcdMember).
	KindStaticPod = "StaticPod"
)

// PolledKinds are the kinds the recorder (e2e/monitor) reads at every
// poll, all of a poll's changes stamped with one time: a moment with a
// change of one of them is a poll.
var PolledKinds = []string{
	KindCluster, KindControlPlane, KindMachineDeployment, KindMachineSet, KindMachine, KindEtcdMember, KindStaticPod,
	KindNode, KindPod, KindBudget, KindApp, KindAddon, KindWorkloadAPI, KindHost,
}

// AddonKubeadmConfig names the kubeadm-config ConfigMap among the add-ons
// (KindAddon).
const AddonKubeadmConfig = "kubeadm-config"

// Kinds of the application a run deploys and of the workload API.
const (
	// KindPod is an application pod: its node, whether it is Ready or
	// terminating, its owner and labels.
	KindPod = "Pod"
	// KindBudget is a PodDisruptionBudget's status.
	KindBudget = "PodDisruptionBudget"
	// KindApp is the application's Deployment: replicas and ready.
	KindApp = "Deployment"
	// KindWorkloadAPI is the workload API as a client finds it at each
	// poll (name "api"): available or not, and why not.
	KindWorkloadAPI = "WorkloadAPI"
	// KindWorkloadEvent is something the lab's workload cluster did that
	// no object shows (sim/workload.Event): its name is the node, or the
	// cluster.
	KindWorkloadEvent = "WorkloadEvent"
	// KindIronicNode is a host's node in the lab's Ironic, when Metal3's
	// inventory keeps the hosts: its provision state (FieldState), target
	// and power state, and its last error. Its name is the host's.
	KindIronicNode = "IronicNode"
)

// Fields of the summaries, which the checks read. A boolean is "true" or
// absent; a condition is its status ("True", "False", "Unknown") or
// absent.
const (
	FieldPhase      = "phase"
	FieldVersion    = "version"
	FieldNode       = "node"
	FieldProviderID = "providerID"
	FieldUID        = "uid"
	FieldDeleting   = "deleting"
	FieldUpdating   = "updating"
	// FieldPaused: a Cluster's spec.paused (CAPI's controllers leave it
	// and everything of it alone).
	FieldPaused = "paused"
	// FieldUpdateFailed: CAPI's Updating condition says the in-place
	// update failed (the extension refused or the host fell back).
	FieldUpdateFailed = "updateFailed"
	FieldUpToDate     = "upToDate"
	FieldAvailable    = "available"
	FieldControlPlane = "controlPlane"
	FieldDeployment   = "deployment"
	FieldInfra        = "infra"

	FieldReplicas = "replicas"
	// FieldControlPlaneName is the KubeadmControlPlane a control-plane
	// Machine belongs to (its control-plane-name label).
	FieldControlPlaneName = "controlPlaneName"
	// FieldHealthCheck is a Machine's HealthCheckSucceeded condition (a
	// MachineHealthCheck's verdict; absent without one).
	FieldHealthCheck = "healthCheck"
	// FieldFeatureGates are a ClusterConfiguration's ("A=true,B=false").
	FieldFeatureGates   = "featureGates"
	FieldMaxSurge       = "maxSurge"
	FieldMaxUnavailable = "maxUnavailable"
	FieldUpToDateCount  = "upToDateReplicas"
	FieldAvailableCount = "availableReplicas"
	FieldTotal          = "totalReplicas"

	FieldState    = "state"
	FieldConsumer = "consumer"
	FieldSpare    = "spare"
	FieldPowered  = "poweredOn"

	FieldReady   = "ready"
	FieldKubelet = "kubelet"

	FieldRemoved = "removed"
	FieldImage   = "image"
	// FieldBlocked is why KCP holds its rollout, in its condition
	// messages (a preflight check that fails).
	FieldBlocked = "blocked"
	// FieldCrashLoop is a static pod's container waiting to restart
	// after it exited with an error: its last termination message.
	FieldCrashLoop = "crashLoop"
	// FieldPodImages are the images an add-on's live pods run (distinct,
	// sorted, comma-separated): what its rollout reached, beside the
	// template's FieldImage.
	FieldPodImages = "podImages"
	// FieldCoreDNS is KCP's clusterConfiguration.dns.imageTag: the CoreDNS
	// KCP is asked to run ("" leaves CoreDNS alone).
	FieldCoreDNS = "coreDNS"

	FieldCPUpToDate      = "controlPlaneMachinesUpToDate"
	FieldWorkersUpToDate = "workerMachinesUpToDate"
	FieldRollingOut      = "rollingOut"
	// Ready aggregates each Machine's Ready, which a failed in-place
	// update (Updating, negative polarity) makes False, while UpToDate
	// is about the spec and stays True.
	FieldCPMachinesReady     = "controlPlaneMachinesReady"
	FieldWorkerMachinesReady = "workerMachinesReady"
)

// Fields of the application kinds.
const (
	FieldOwner       = "owner"
	FieldLabels      = "labels"
	FieldTerminating = "terminating"
	FieldSelector    = "selector"
	FieldDesired     = "desiredHealthy"
	FieldHealthy     = "currentHealthy"
	FieldAllowed     = "disruptionsAllowed"
	FieldReadyCount  = "readyReplicas"
	// FieldAPIAvailable is "true" when the API answered the poll's read.
	FieldAPIAvailable = "available"
	FieldAPIError     = "error"
	// FieldAPIReadFrom is when the first read that found the API down
	// began (RFC 3339, nanoseconds), kept while it stays down: a read
	// hung on a dropped connection fails a poll stamped long after.
	FieldAPIReadFrom = "readFrom"
	FieldReason      = "reason"
	FieldMessage     = "message"
	// FieldDrainStarted and FieldDrainTimeout are a Machine's drain:
	// when CAPI began it and its nodeDrainTimeoutSeconds.
	FieldDrainStarted = "drainStarted"
	FieldDrainTimeout = "nodeDrainTimeoutSeconds"
)

// Reasons of the workload clusters' events (sim/workload.Event), recorded
// as KindWorkloadEvent entries with the reason in FieldReason.
const (
	EventAPIAvailable   = "APIAvailable"
	EventAPIUnavailable = "APIUnavailable"
	EventEtcdMember     = "EtcdMember"
	EventEtcdHealth     = "EtcdHealth"
	// EventEtcdElection: the leader stopped; the other members elect one
	// and etcd serves nothing until EventEtcdLeader.
	EventEtcdElection = "EtcdElection"
	// EventEtcdLeader: an election ended (a running member became etcd's
	// leader because the leader stopped, or none was needed any more).
	EventEtcdLeader     = "EtcdLeader"
	EventDataLost       = "DataLost"
	EventEvicted        = "Evicted"
	EventEvictionDenied = "EvictionRefused"
	EventPodDeleted     = "PodDeleted"
	// EventPodScaledDown: a ReplicaSet deleted a pod it no longer wants
	// (its Deployment's rollout or scale-down), which no budget governs.
	EventPodScaledDown = "PodScaledDown"
	EventPodScheduled  = "PodScheduled"
	// EventNodeStopped is a node's host going off; its data's "pods" lists
	// the pods a drain would have moved that were still on it then.
	EventNodeStopped = "NodeStopped"
	// EventStaticPodCrashLoop is a control-plane static pod whose binary
	// refuses its flags: it exits at start and its kubelet restarts it
	// for ever.
	EventStaticPodCrashLoop = "StaticPodCrashLoop"
	// EventNodeStarted is a node's kubelet starting after its host
	// booted: its pods start again.
	EventNodeStarted = "NodeStarted"
)

// Lab events the rules read (sim/lab emits them; the timeline keeps them
// as LabEvent entries with the event's kind in FieldLabKind, its reason
// in FieldReason and a power event's new state in FieldPower).
const (
	FieldLabKind = "kind"
	FieldPower   = "power"
	LabKindPower = "power"
	LabPowerOff  = "Off"
	// LabOSShuttingDown starts a host's graceful shutdown; LabOSShutdown
	// ends it, just before the power goes.
	LabOSShuttingDown = "OSShuttingDown"
	LabOSShutdown     = "OSShutdown"
	// LabOSRunning is a host's OS up: FieldLabSource says where it
	// booted from (LabSourceDisk: its installed image, not a ramdisk)
	// and FieldKubernetesVersion the version of the kubelet its image
	// ships.
	LabOSRunning           = "OSRunning"
	FieldLabSource         = "source"
	LabSourceDisk          = "disk"
	FieldKubernetesVersion = "kubernetesVersion"
	// LabWriteBusy is an image write a host's disk refused because
	// another was under way on it.
	LabWriteBusy = "WriteBusy"
)

// Etcd health values of an EventEtcdHealth event's "health" (what the
// cluster's members together can do).
const (
	EtcdHealthNoMembers = "no-members"
	EtcdHealthQuorum    = "quorum"
	EtcdHealthNoQuorum  = "no-quorum"
	EtcdHealthDataLost  = "data-lost"
)

// Host OS modes a run takes besides its lab file's own choice: a
// scenario's hostOS, the lab's WithHostOS and a result's host OS. The
// first two are the system disk kinds (sim/disk's A/B and OSTree).
const (
	HostOSAB     = "ab"
	HostOSOSTree = "ostree"
	// HostOSMixed is A/B and OSTree in turn, in the lab file's order.
	HostOSMixed = "mixed"
)

// HostOSModes are the host OS modes, in the order users read them.
var HostOSModes = []string{HostOSAB, HostOSOSTree, HostOSMixed}
