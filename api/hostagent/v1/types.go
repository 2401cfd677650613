package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
)

// The agent's endpoints, relative to its base URL (the Node's
// AgentURLAnnotation, a heartbeat's or registration's AgentURL).
const (
	// PathStatus: GET, answers Status.
	PathStatus = "/v1/status"
	// PathInventory: GET, answers Inventory (in-band inspection, as
	// Ironic's agent collects it for hosts whose BMC cannot tell).
	PathInventory = "/v1/inventory"
	// PathStage: POST a StageRequest, answers a StageResult (507 when the
	// disk has no room for the image).
	PathStage = "/v1/stage"
	// PathActivate: POST an ActivateRequest.
	PathActivate = "/v1/activate"
	// PathRollback: POST, answers Images (409 when there is no fallback).
	PathRollback = "/v1/rollback"
	// PathEtc: GET answers the running OS's /etc (path to content); PUT an
	// EtcEdit, answers the whole /etc.
	PathEtc = "/v1/etc"
	// PathHealth: POST runs the post-boot health check and commits the
	// booted root when it passes; answers Health (503 when unhealthy).
	PathHealth = "/v1/health"
	// PathReset: POST, reboots into recovery, which wipes the persistent
	// and OEM partitions (reset-based reprovisioning).
	PathReset = "/v1/reset"
	// PathConfigDrive: PUT a ConfigDrive.
	PathConfigDrive = "/v1/configdrive"
	// PathClean: POST, metadata cleaning from a deploy ramdisk.
	PathClean = "/v1/clean"
	// PathReboot: POST, a graceful reboot from the OS.
	PathReboot = "/v1/reboot"
	// PathKubeadmUpgrade: POST, runs `kubeadm upgrade node`; answers
	// Kubeadm.
	PathKubeadmUpgrade = "/v1/kubeadm/upgrade"
	// PathFiles: PUT a FilesRequest, answers Status.Files.
	PathFiles = "/v1/files"
	// PathPersistent: GET answers the persistent partition's files; PUT
	// PathPersistent+"/NAME" writes one.
	PathPersistent = "/v1/persistent"
	// PathHeartbeat is where a deploy ramdisk posts its Heartbeat,
	// relative to the URL in its media's DeployCallbackParam.
	PathHeartbeat = "/v1/heartbeat"
)

// AgentURLAnnotation on a Node says where its host's agent answers, so
// an updater that knows the Node finds the agent (as node agents publish
// their endpoints).
const AgentURLAnnotation = "upgradelab.dev/agent-url"

// DeployCallbackParam is the query parameter of a deploy ramdisk's media
// URL that names its provisioner's heartbeat endpoint (Ironic puts
// ipa-api-url on the kernel command line).
const DeployCallbackParam = "ipa-api-url"

// Phase is where the host is in its power and boot cycle.
type Phase string

const (
	PhaseOff          Phase = "Off"
	PhasePOST         Phase = "POST"
	PhaseBooting      Phase = "Booting"
	PhaseRunning      Phase = "Running"
	PhaseNoBootDevice Phase = "NoBootDevice"
	// PhaseFirmwareSetup: the host waits in its firmware's setup screen.
	PhaseFirmwareSetup Phase = "FirmwareSetup"
	// PhaseShuttingDown: the OS is in its graceful shutdown (systemd's
	// "stopping"); the agent, stopped last, still answers. An updater
	// waiting for a reboot tells a slow clean shutdown by it from a
	// request that never reached the host.
	PhaseShuttingDown Phase = "ShuttingDown"
)

// Status is what GET PathStatus answers.
type Status struct {
	Host  string     `json:"host"`
	Phase Phase      `json:"phase"`
	OS    *RunningOS `json:"os,omitempty"`
	// Images are the disk's OS images in the update contract's terms,
	// whatever kind of disk the host has.
	Images  Images `json:"images"`
	Node    string `json:"node,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// Kubeadm is what kubeadm last configured a control-plane host with.
	Kubeadm *Kubeadm `json:"kubeadm,omitempty"`
	// Files are the files written on the host by its bootstrap data and
	// by PUT PathFiles: path to FileSum of the content.
	Files map[string]string `json:"files,omitempty"`
}

// OSSource says where the running OS was loaded from.
type OSSource string

const (
	FromDisk         OSSource = "disk"
	FromRecovery     OSSource = "recovery-partition"
	FromVirtualMedia OSSource = "virtual-media"
	// FromNetwork: PXE and the provisioning network's boot script.
	FromNetwork OSSource = "network"
)

// RunningOS is the OS that booted, as it reads itself.
type RunningOS struct {
	Source OSSource `json:"source"`
	// Root is the slot or deployment a FromDisk OS booted from; Trial is
	// set when that root is not committed yet (this boot spent a try).
	Root  RootID           `json:"root,omitempty"`
	Trial bool             `json:"trial,omitempty"`
	Image imagev1.Manifest `json:"image"`
	// Media is the image URL a FromVirtualMedia or FromNetwork OS booted
	// from.
	Media string `json:"media,omitempty"`
	// BootID is new on every boot (the kernel's
	// /proc/sys/kernel/random/boot_id): a caller that remembers it knows
	// whether the host restarted since, whatever the clocks say.
	BootID string `json:"bootID"`
	// UptimeSeconds is how long this boot has run, by the host's own
	// monotonic clock (/proc/uptime).
	UptimeSeconds float64    `json:"uptimeSeconds"`
	Links         []PortLink `json:"links"`
}

// PortLink is one NIC port as the running OS's driver found it (what
// `ethtool -i` and the driver's log tell on a real host).
type PortLink struct {
	Port string `json:"port"`
	// Firmware and API are the NVM the driver found at probe time.
	Firmware string             `json:"firmware"`
	API      imagev1.APIVersion `json:"api"`
	Up       bool               `json:"up"`
	// Recovery is set when the NIC runs its recovery firmware (a flash was
	// cut short); only a complete flash brings it back.
	Recovery bool `json:"recovery,omitempty"`
	// Level and Message are what the driver logged ("" when nothing).
	Level   string `json:"level,omitempty"`
	Message string `json:"message,omitempty"`
}

// DiskKind is how a host's disk holds OS images.
type DiskKind string

const (
	// DiskAB has two slots, A and B, with boot counting and fallback.
	DiskAB DiskKind = "ab"
	// DiskOSTree holds OSTree deployments, finalised at shutdown.
	DiskOSTree DiskKind = "ostree"
)

// RootID names one root an image lives in: "A" or "B" on an A/B disk, a
// deployment's serial on an OSTree disk. Callers take it from a
// StageResult or Images and hand it back; they never make one up.
type RootID string

// RootState is what a root's bytes hold.
type RootState string

const (
	RootEmpty   RootState = "empty"
	RootWriting RootState = "writing" // an image write is under way
	RootWritten RootState = "written" // a whole image, checksum verified
	RootCorrupt RootState = "corrupt" // a write was cut off: unbootable
)

// Root is one root.
type Root struct {
	ID       RootID    `json:"id"`
	State    RootState `json:"state"`
	Image    string    `json:"image,omitempty"`
	Checksum string    `json:"checksum,omitempty"`
	// Committed is set once the root passed its health check.
	Committed bool `json:"committed"`
	// TriesLeft is how many more boots an activated, uncommitted root gets.
	TriesLeft int `json:"triesLeft"`
}

// Images is what a disk holds.
type Images struct {
	Kind DiskKind `json:"kind"`
	// Booted is the running root; Staged a root written (or being written)
	// that has not yet proven itself; Fallback the committed root the
	// bootloader falls back to.
	Booted   *Root `json:"booted,omitempty"`
	Staged   *Root `json:"staged,omitempty"`
	Fallback *Root `json:"fallback,omitempty"`
	// Roots are every root, in the kind's order.
	Roots []Root `json:"roots"`
}

// Root finds one root by id.
func (im Images) Root(id RootID) *Root {
	for i := range im.Roots {
		if im.Roots[i].ID == id {
			return &im.Roots[i]
		}
	}
	return nil
}

// Holds says whether a root holds a whole copy of the image with checksum.
func (im Images) Holds(checksum string) bool {
	for _, r := range im.Roots {
		if r.Checksum == checksum && r.State == RootWritten {
			return true
		}
	}
	return false
}

// StageRequest is POST PathStage: write an image into the root the host
// stages into (the inactive A/B slot, a new OSTree deployment), verified
// against SHA256 before a byte is written.
type StageRequest struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// Check refuses a StageRequest without its URL or its checksum: an image
// is never written unverified.
func (r StageRequest) Check() error {
	if r.URL == "" || r.SHA256 == "" {
		return errors.New("url and sha256 are required")
	}
	return nil
}

// StageResult names the root the image went into.
type StageResult struct {
	Root RootID `json:"root"`
}

// ActivateRequest is POST PathActivate: Root boots next, with Tries boots
// to pass its health check before the bootloader falls back.
type ActivateRequest struct {
	Root  RootID `json:"root"`
	Tries int    `json:"tries"`
}

// EtcEdit is PUT PathEtc: an admin's edit of one file in the running OS's
// /etc (an empty Content deletes it).
type EtcEdit struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// FileSum is how Status.Files names a file's content: its hex SHA-256.
func FileSum(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// FilesRequest is PUT PathFiles: files to write on the running OS, as
// cloud-init's write_files would (absolute path to content).
type FilesRequest struct {
	Files map[string]string `json:"files"`
}

// Kubeadm is the configuration kubeadm applied on a control-plane host:
// the Kubernetes version and the ClusterConfiguration's feature gates.
type Kubeadm struct {
	KubernetesVersion string          `json:"kubernetesVersion"`
	FeatureGates      map[string]bool `json:"featureGates,omitempty"`
}

// Health is the result of the post-boot health check.
type Health struct {
	Healthy bool     `json:"healthy"`
	Checks  []string `json:"checks"`
	Reason  string   `json:"reason,omitempty"`
}

// ConfigDrive is PUT PathConfigDrive: what cloud-init reads on the OS's
// first boot.
type ConfigDrive struct {
	UserData []byte            `json:"userData"`
	MetaData map[string]string `json:"metaData,omitempty"`
}

// Heartbeat is what a deploy ramdisk posts to its provisioner's
// PathHeartbeat until its boot ends.
type Heartbeat struct {
	Hostname string   `json:"hostname"`
	MACs     []string `json:"macs"`
	AgentURL string   `json:"agentURL"`
	Image    string   `json:"image"`
}

// Registration is what a recovery OS posts to its pool's registration
// URL whenever it boots. MachineID lives on the persistent partition, so
// a reset makes the host register under a new one.
type Registration struct {
	MachineID string   `json:"machineID"`
	Hostname  string   `json:"hostname"`
	MACs      []string `json:"macs"`
	AgentURL  string   `json:"agentURL"`
	Image     string   `json:"image"`
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
}

// Inventory is the hardware as the running OS reads it (/proc/cpuinfo,
// /proc/meminfo, the block devices, the NICs and their DHCP leases,
// dmidecode), what in-band inspection records.
type Inventory struct {
	Hostname  string         `json:"hostname"`
	CPUs      int            `json:"cpus"`
	MemoryMiB int            `json:"memoryMiB"`
	DiskGiB   int            `json:"diskGiB"`
	Serial    string         `json:"serial"`
	NICs      []InventoryNIC `json:"nics"`
}

// InventoryNIC is one port.
type InventoryNIC struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
	// IP is the port's DHCP lease ("" without link).
	IP string `json:"ip,omitempty"`
	// Firmware is the NIC's NVM version as its driver read it at probe.
	Firmware string `json:"firmware"`
	Up       bool   `json:"up"`
}
