package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/statefile"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// Phase is where a host is in its power and boot cycle.
type Phase string

const (
	PhaseOff          Phase = "Off"
	PhasePOST         Phase = "POST"
	PhaseBooting      Phase = "Booting"
	PhaseRunning      Phase = "Running"
	PhaseNoBootDevice Phase = "NoBootDevice"
	// PhaseFirmwareSetup: the boot override sent the host into its
	// firmware's setup screen, where it waits; no OS runs.
	PhaseFirmwareSetup Phase = "FirmwareSetup"
	// PhaseHung is an OS that froze while running (a kernel panic that
	// does not reboot, a hung kernel): the power stays on, nothing on the
	// host answers, and only a power cycle brings it back.
	PhaseHung Phase = "Hung"
	// PhaseShuttingDown is an OS in its graceful shutdown: its services
	// stop, an OSTree host finalises its staged deployment last, then the
	// power goes. The host's agent still answers (systemd's "stopping"
	// state), so an updater can tell a slow clean shutdown from a reboot
	// request that never reached the host.
	PhaseShuttingDown Phase = "ShuttingDown"
)

// OverrideMode is Redfish's BootSourceOverrideEnabled.
type OverrideMode string

const (
	OverrideDisabled   OverrideMode = "Disabled"
	OverrideOnce       OverrideMode = "Once"
	OverrideContinuous OverrideMode = "Continuous"
)

// BootOverride is a one-time or standing choice of boot device.
type BootOverride struct {
	Target BootTarget   `json:"target,omitempty"`
	Mode   OverrideMode `json:"mode"`
	// BootMode is the firmware mode the override boots in (Redfish's
	// BootSourceOverrideMode, IPMI's EFI boot flag); "" is the firmware
	// setting's (the BootMode attribute).
	BootMode BootMode `json:"bootMode,omitempty"`
	// HTTPBootURI is what a UefiHttp override loads (Redfish's
	// Boot.HttpBootUri); without one UEFI HTTP boot asks DHCP.
	HTTPBootURI string `json:"httpBootURI,omitempty"`
}

// BootMode is how the firmware loads a boot device's loader.
type BootMode string

const (
	BootModeUEFI   BootMode = "UEFI"
	BootModeLegacy BootMode = "Legacy"
)

// OSSource says where the running OS was loaded from.
type OSSource string

const (
	FromDisk         OSSource = vocab.LabSourceDisk
	FromRecovery     OSSource = "recovery-partition"
	FromVirtualMedia OSSource = "virtual-media"
	// FromNetwork: PXE, then the boot script of the provisioning
	// network's boot server (netboot.go).
	FromNetwork OSSource = "network"
)

// RunningOS is what booted: read from the bytes it booted from.
type RunningOS struct {
	Source OSSource `json:"source"`
	// Root is the slot or deployment a FromDisk OS booted from.
	Root  disk.RootID      `json:"root,omitempty"`
	Trial bool             `json:"trial,omitempty"`
	Image imagev1.Manifest `json:"image"`
	// Media is the image URL a FromVirtualMedia or FromNetwork OS booted
	// from; its query is what a kernel command line carries (a deploy
	// ramdisk finds its provisioner there).
	Media string `json:"media,omitempty"`
	// KernelArgs is the kernel command line a boot loader on the medium
	// gave (an ISO's GRUB configuration); empty when the medium is the
	// image itself.
	KernelArgs string     `json:"kernelArgs,omitempty"`
	Links      []PortLink `json:"links"`
	// BootID is new on every boot, as the kernel's boot_id is; BootedAt is
	// when the OS came up (the lab's clock: an agent reports the uptime).
	BootID   string    `json:"bootID"`
	BootedAt time.Time `json:"bootedAt"`
}

// DeployRamdisk says whether the OS is a deploy ramdisk booted from a
// boot medium (virtual media or the network), not installed on the disk.
func (r *RunningOS) DeployRamdisk() bool {
	return r != nil && (r.Source == FromVirtualMedia || r.Source == FromNetwork) && r.Image.Role == imagev1.RoleDeploy
}

// PortLink is one port's link under the running OS's driver, with the
// NVM the driver found at probe time (what `ethtool -i` and the driver's
// "fw 9.20 api 1.15" log line tell on a real host).
type PortLink struct {
	Port     string             `json:"port"`
	Firmware string             `json:"firmware"`
	API      imagev1.APIVersion `json:"api"`
	// Recovery is set when the NIC runs its recovery firmware.
	Recovery bool `json:"recovery,omitempty"`
	nic.Link
}

// HostStatus is a snapshot of a host, also written as host.json.
type HostStatus struct {
	Name      string       `json:"name"`
	Power     PowerState   `json:"power"`
	Phase     Phase        `json:"phase"`
	Override  BootOverride `json:"override"`
	Media     string       `json:"media,omitempty"`
	OS        *RunningOS   `json:"os,omitempty"`
	Ports     []nic.Port   `json:"ports"`
	Disk      disk.Disk    `json:"disk"`
	BootCount int          `json:"bootCount"`
	LastError string       `json:"lastError,omitempty"`
	// PowerSupplyFailed: the host cannot be powered on (FailPowerSupply).
	PowerSupplyFailed bool `json:"powerSupplyFailed,omitempty"`
	// Firmware is the system firmware's settings (firmware.go).
	Firmware FirmwareSettings `json:"firmware"`
}

// Errors callers can act on.
var (
	ErrNotRunning = errors.New("no OS is running on the host")
	ErrPowerLost  = errors.New("power was lost")
	ErrMediaBusy  = errors.New("virtual media is already inserted")
	ErrNoMedia    = errors.New("no virtual media is inserted")
	// ErrLegacyBoot: a boot in legacy (BIOS) mode finds no loader.
	ErrLegacyBoot = errors.New("legacy boot: no boot sector (the image has only an EFI loader)")
	ErrLabDown    = errors.New("the lab is down")
	// ErrHung is a graceful request (shutdown, restart) a hung OS never
	// acts on.
	ErrHung = errors.New("the OS does not respond")
	// ErrPowerSupplyFailed refuses a power-on after FailPowerSupply.
	ErrPowerSupplyFailed = errors.New("the power supply has failed")
)

// Host is one simulated server. Its methods are what a BMC and an OS agent
// can do to real hardware; every change is persisted in the state folder
// and announced as an Event.
type Host struct {
	spec HostSpec
	lab  *Lab
	dir  string

	mu        sync.Mutex
	power     PowerState
	phase     Phase
	override  BootOverride
	media     string
	disk      *disk.Disk
	ports     []*nic.Port
	os        *RunningOS
	bootCount int
	lastError string
	psuFailed bool
	firmware  FirmwareSettings
	// cycle lives from power-on to power loss; waits and writes of one
	// power cycle end with it.
	cycle       context.Context
	cancelCycle context.CancelFunc
	// powerChanged is closed (and replaced) at every power change, and
	// powerChanges counts them: a wait that began before a change sees
	// it even when the host has changed again since (a boot script that
	// powers the host off moments after its power-on).
	powerChanged chan struct{}
	powerChanges map[PowerState]uint64
	// detached is set when the lab goes down: from then on nothing of this
	// host is written, whatever goroutine still acts on it.
	detached bool
	// machine runs the boot and the disk: the lab's model, or a real VM
	// (machine.go).
	machine machine
	// shutdownTime, when set, is how long this host's graceful shutdowns
	// take instead of the lab's timing (SetShutdownTime).
	shutdownTime time.Duration
}

// Guest is the agent API URL of the OS inside a qemu-backend host's VM and
// its console log; ok is false on the test backend, where the lab's
// agents (sim/agent) are the hosts' OS.
func (h *Host) Guest() (url, console string, ok bool) { return h.machine.guest() }

func newHost(l *Lab, spec HostSpec) (*Host, error) {
	h := &Host{spec: spec, lab: l, dir: filepath.Join(l.stateDir, "hosts", spec.Name),
		power: PoweredOff, phase: PhaseOff, override: BootOverride{Mode: OverrideDisabled}, powerChanged: make(chan struct{}), powerChanges: map[PowerState]uint64{}}
	h.machine = l.backend.machine(h)
	h.cycle, h.cancelCycle = context.WithCancel(context.Background())
	h.cancelCycle()
	var saved HostStatus
	switch err := statefile.Read(filepath.Join(h.dir, "host.json"), &saved); {
	case err == nil:
		// A restarted lab keeps what the hardware held; power starts off.
		h.override, h.media, h.bootCount, h.psuFailed = saved.Override, saved.Media, saved.BootCount, saved.PowerSupplyFailed
		h.firmware = saved.Firmware
		if h.firmware.Attributes == nil {
			h.firmware = defaultFirmware(spec)
		}
		d := saved.Disk
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("host %s: saved disk: %w", spec.Name, err)
		}
		if kind := d.OSKind(); kind != spec.OS.Kind {
			return nil, fmt.Errorf("host %s: its saved disk is %s but the lab file says os.kind %s (start from an empty state folder)", spec.Name, kind, spec.OS.Kind)
		}
		h.disk = &d
		for i := range saved.Ports {
			p := saved.Ports[i]
			h.ports = append(h.ports, &p)
		}
		h.disk.Shutdown()
	case os.IsNotExist(err):
		d, err := disk.New(spec.OS.Kind, l.def.Spec.RecoveryImage, spec.OS.KeepDeployments)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", spec.Name, err)
		}
		d.RootMiB = spec.OS.RootMiB()
		h.disk = d
		h.firmware = defaultFirmware(spec)
		for _, n := range spec.NICs {
			h.ports = append(h.ports, &nic.Port{Name: n.Name, MAC: n.MAC, Model: n.Model, Flash: nic.FlashIdle, Active: l.def.NVMImages[n.NVM]})
		}
	default:
		return nil, fmt.Errorf("host %s: %w", spec.Name, err)
	}
	return h, h.saveLocked()
}

// detach stops every write of the host's state; Lab.Down calls it.
func (h *Host) detach() {
	h.mu.Lock()
	h.detached = true
	h.cancelCycle()
	h.mu.Unlock()
}

// Name is the host's name.
func (h *Host) Name() string { return h.spec.Name }

// Spec is the host's definition.
func (h *Host) Spec() HostSpec { return h.spec }

// PortAddress is the address port is leased on its network, with the
// network's prefix length (192.168.111.10/24).
func (h *Host) PortAddress(port string) (netip.Prefix, bool) {
	for _, n := range h.spec.NICs {
		if n.Name != port {
			continue
		}
		for _, nw := range h.lab.def.Spec.Networks {
			if nw.Name != n.Network {
				continue
			}
			p, err1 := netip.ParsePrefix(nw.CIDR)
			a, err2 := netip.ParseAddr(n.IP)
			if err1 != nil || err2 != nil {
				return netip.Prefix{}, false
			}
			return netip.PrefixFrom(a, p.Bits()), true
		}
	}
	return netip.Prefix{}, false
}

// Status returns a snapshot.
func (h *Host) Status() HostStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.statusLocked()
}

func (h *Host) statusLocked() HostStatus {
	s := HostStatus{Name: h.spec.Name, Power: h.power, Phase: h.phase, Override: h.override, Media: h.media,
		BootCount: h.bootCount, LastError: h.lastError, PowerSupplyFailed: h.psuFailed, Disk: h.disk.Clone(), Firmware: h.firmware.clone()}
	if h.os != nil {
		osCopy := *h.os
		s.OS = &osCopy
	}
	for _, p := range h.ports {
		s.Ports = append(s.Ports, *p)
	}
	return s
}

// saveLocked persists the host and mirrors it into the domain's metadata.
func (h *Host) saveLocked() error {
	if h.detached {
		return ErrLabDown
	}
	s := h.statusLocked()
	_ = h.lab.backend.SetMetadata(h.spec.Name, metadataXML(h.lab.def.Spec.Name, s))
	return statefile.Write(filepath.Join(h.dir, "host.json"), s)
}

func (h *Host) emit(kind EventKind, reason, msg string, data map[string]string) {
	h.lab.events.emit(Event{Host: h.spec.Name, Kind: kind, Reason: reason, Message: msg, Data: data})
}

// PowerOn powers the host on and returns once the hypervisor reports the
// domain started; the boot runs from there. Powering on a host that is on
// does nothing.
func (h *Host) PowerOn() error {
	st := h.Status()
	if st.Power == PoweredOn {
		return nil
	}
	if st.PowerSupplyFailed {
		return fmt.Errorf("host %s: power on: %w", h.spec.Name, ErrPowerSupplyFailed)
	}
	if err := h.machine.prepareBoot(context.Background()); err != nil {
		return fmt.Errorf("host %s: power on: %w", h.spec.Name, err)
	}
	since := h.powerChangesTo(PoweredOn)
	if err := h.lab.backend.Start(h.spec.Name); err != nil {
		return fmt.Errorf("host %s: power on: %w", h.spec.Name, err)
	}
	return h.waitPower(PoweredOn, since)
}

// PowerOff cuts power at once: writes and flashes under way are lost. It
// returns once the hypervisor reports the domain stopped.
func (h *Host) PowerOff() error {
	if h.Status().Power == PoweredOff {
		return nil
	}
	since := h.powerChangesTo(PoweredOff)
	if err := h.lab.backend.Stop(h.spec.Name); err != nil {
		return fmt.Errorf("host %s: power off: %w", h.spec.Name, err)
	}
	return h.waitPower(PoweredOff, since)
}

// powerEventTimeout bounds the wait for the hypervisor's event of a power
// change the lab asked for (wall time: libvirt answers in real time).
const powerEventTimeout = 30 * time.Second

// powerChangesTo is how many times the host's power has changed to
// state: what a wait for that state counts from.
func (h *Host) powerChangesTo(state PowerState) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.powerChanges[state]
}

// waitPower waits until the hypervisor's events have brought the host to
// want, or did so since the count since (powerChangesTo) was read. Power
// changes only through events, so a late event can never undo a newer
// change.
func (h *Host) waitPower(want PowerState, since uint64) error {
	timeout := time.After(powerEventTimeout)
	for {
		h.mu.Lock()
		now, changed, n := h.power, h.powerChanged, h.powerChanges[want]
		h.mu.Unlock()
		if now == want || n > since {
			return nil
		}
		select {
		case <-changed:
		case <-timeout:
			return fmt.Errorf("host %s: the hypervisor did not report power %s within %s", h.spec.Name, want, powerEventTimeout)
		}
	}
}

// Shutdown is a graceful shutdown: the OS stops within the modelled time,
// an OSTree host finalises its staged deployment last (boot.go:
// finalise), then the power goes off. A request while a shutdown is
// under way starts nothing (the OS ignores a second ACPI power-button
// event) and returns once that shutdown has powered the host off, so a
// restart asked meanwhile still powers it on again.
func (h *Host) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	phase, offs := h.phase, h.powerChanges[PoweredOff]
	if phase == PhaseRunning {
		h.phase = PhaseShuttingDown
		h.saveLocked()
	}
	h.mu.Unlock()
	switch phase {
	case PhaseHung:
		return fmt.Errorf("host %s: shutdown: %w", h.spec.Name, ErrHung)
	case PhaseShuttingDown:
		return h.untilOff(ctx, offs)
	case PhaseRunning:
		h.emit(EventBoot, EventOSShuttingDown, "the OS is shutting down", nil)
		err := h.machine.shutdown(ctx)
		if err != nil {
			h.mu.Lock()
			if h.phase == PhaseShuttingDown { // it did not get as far as the power-off
				h.phase = PhaseRunning
				h.saveLocked()
			}
			h.mu.Unlock()
		}
		return err
	}
	return h.PowerOff()
}

// untilOff waits, as long as ctx allows, for the power to go off, or
// to have gone off since the count since (powerChangesTo) was read: a
// restart may have powered the host on again already.
func (h *Host) untilOff(ctx context.Context, since uint64) error {
	for {
		h.mu.Lock()
		off, changed, n := h.power == PoweredOff, h.powerChanged, h.powerChanges[PoweredOff]
		h.mu.Unlock()
		if off || n > since {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// EventOSShuttingDown is the boot event a graceful shutdown starts with.
const EventOSShuttingDown = vocab.LabOSShuttingDown

// SetShutdownTime makes this host's graceful shutdowns take d of lab
// time (a service that is slow to stop, up to systemd's 90 s stop
// timeout per unit) instead of the lab's shutdownSeconds; 0 goes back to
// those. Not persisted: it lasts as long as this lab process.
func (h *Host) SetShutdownTime(d time.Duration) {
	h.mu.Lock()
	h.shutdownTime = d
	h.mu.Unlock()
}

// modelShutdown is the modelled OS's shutdown: it takes the modelled time,
// an OSTree host finalises its staged deployment last, then the power
// goes off. Once begun it goes on whether or not its requester still
// waits (an OS does not stop shutting down); only a power cut ends it
// (ErrPowerLost).
func (h *Host) modelShutdown(context.Context) error {
	h.mu.Lock()
	cycle, took, still := h.cycle, h.shutdownTime, h.phase == PhaseShuttingDown
	h.mu.Unlock()
	if !still { // a power cut came between the request and here
		return fmt.Errorf("host %s: shutdown: %w", h.spec.Name, ErrPowerLost)
	}
	if took == 0 {
		took = timescale.Seconds(h.lab.def.Spec.Timing.ShutdownSeconds)
	}
	if h.lab.scale.Sleep(cycle, took) != nil || !h.finalise(cycle) {
		return fmt.Errorf("host %s: shutdown: %w", h.spec.Name, ErrPowerLost)
	}
	h.emit(EventBoot, vocab.LabOSShutdown, "the OS shut down", nil)
	return h.PowerOff()
}

// Reboot is a graceful restart (what `systemctl reboot` and a BMC's
// GracefulRestart do): Shutdown, then power on.
func (h *Host) Reboot(ctx context.Context) error {
	if err := h.Shutdown(ctx); err != nil {
		return err
	}
	return h.PowerOn()
}

// Reset is a hard reset: power cut and restored, no shutdown (an OSTree
// host's activated staged deployment is lost).
func (h *Host) Reset() error {
	if err := h.PowerOff(); err != nil {
		return err
	}
	return h.PowerOn()
}

// onDomainEvent applies what the hypervisor reported, whoever caused it:
// the lab, a BMC, or `virsh` by hand.
func (h *Host) onDomainEvent(e DomainEvent) {
	switch e.Kind {
	case DomainStarted:
		h.poweredOn("Domain" + string(e.Kind))
	case DomainStopped:
		h.poweredOff("Domain" + string(e.Kind))
	}
}

// poweredOn starts a power cycle unless one is running. A host whose
// power supply failed has no power, whoever started its domain: a power
// on that checked the supply before it failed (a reboot's, racing the
// failure) is undone at once.
func (h *Host) poweredOn(reason string) {
	h.mu.Lock()
	if h.power == PoweredOn {
		h.mu.Unlock()
		return
	}
	if h.psuFailed {
		h.mu.Unlock()
		go func() { _ = h.lab.backend.Stop(h.spec.Name) }() // not from within the hypervisor's event
		return
	}
	h.power, h.phase, h.lastError = PoweredOn, PhasePOST, ""
	h.powerChanges[PoweredOn]++
	close(h.powerChanged)
	h.powerChanged = make(chan struct{})
	h.cycle, h.cancelCycle = context.WithCancel(context.Background())
	ctx := h.cycle
	// The NIC loads a pending NVM image at power-on.
	for _, p := range h.ports {
		p.Reset()
	}
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventPower, reason, "power on", map[string]string{"power": string(PoweredOn)})
	go h.machine.run(ctx)
}

// poweredOff ends the power cycle: everything in flight is lost.
func (h *Host) poweredOff(reason string) {
	h.mu.Lock()
	if h.power == PoweredOff {
		h.mu.Unlock()
		return
	}
	h.cancelCycle()
	h.power, h.phase, h.os = PoweredOff, PhaseOff, nil
	h.powerChanges[PoweredOff]++
	close(h.powerChanged)
	h.powerChanged = make(chan struct{})
	lost := h.disk.PowerLoss()
	for _, p := range h.ports {
		if p.Flash == nic.FlashWriting {
			lost = append(lost, disk.Loss{Reason: "WriteInterrupted", Message: "power lost during the flash of the NVM of " + p.Name})
		}
		p.PowerLoss()
	}
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventPower, reason, "power off", map[string]string{"power": string(PoweredOff)})
	for _, l := range lost {
		h.emit(EventDisk, l.Reason, l.Message, nil)
	}
}

// SerialNumber is the system's serial, what its BMC and dmidecode read.
func SerialNumber(host string) string { return "UL-" + host }

// Inventory is the hardware as the running OS finds it (what in-band
// inspection reads): the lab file's facts, each port's DHCP lease while
// it has link, and the NVM version its driver probed at boot.
type Inventory struct {
	// Hostname is what the site's DHCP names the host (its lab name).
	Hostname  string         `json:"hostname"`
	CPUs      int            `json:"cpus"`
	MemoryMiB int            `json:"memoryMiB"`
	DiskGiB   int            `json:"diskGiB"`
	Serial    string         `json:"serial"`
	NICs      []InventoryNIC `json:"nics"`
}

// InventoryNIC is one port in an Inventory.
type InventoryNIC struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
	IP   string `json:"ip,omitempty"`
	// Driver is the kernel driver bound to the port (the NIC's model).
	Driver   string `json:"driver,omitempty"`
	Firmware string `json:"firmware,omitempty"`
	Up       bool   `json:"up"`
}

// Inventory reads the hardware in band; with no OS running nothing reads
// it, and the NICs show no lease and no probed firmware.
func (h *Host) Inventory() Inventory {
	st := h.Status()
	inv := Inventory{Hostname: h.spec.Name, CPUs: h.spec.CPUs, MemoryMiB: h.spec.MemoryMiB, DiskGiB: h.spec.DiskGiB, Serial: SerialNumber(h.spec.Name)}
	links := map[string]PortLink{}
	if st.OS != nil {
		for _, l := range st.OS.Links {
			links[l.Port] = l
		}
	}
	for _, n := range h.spec.NICs {
		l := links[n.Name]
		nic := InventoryNIC{Name: n.Name, MAC: n.MAC, Driver: n.Model, Firmware: l.Firmware, Up: l.Up}
		if p, ok := h.PortAddress(n.Name); ok && l.Up {
			nic.IP = p.Addr().String()
		}
		inv.NICs = append(inv.NICs, nic)
	}
	return inv
}

// Subscribe returns this host's events from now on, until cancel (what
// its BMC's event service forwards).
func (h *Host) Subscribe() (<-chan Event, func()) { return h.lab.events.subscribeHost(h.spec.Name) }
