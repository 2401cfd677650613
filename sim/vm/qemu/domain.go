package qemu

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// Accel is how QEMU runs guest code.
type Accel string

const (
	// TCG emulates the CPU in software: slow, and works everywhere.
	TCG Accel = "tcg"
	// KVM runs the guest on the CPU; it needs a working /dev/kvm.
	KVM Accel = "kvm"
)

// VMSpec is one VM.
type VMSpec struct {
	Name      string
	CPUs      int
	MemoryMiB int
	// Disk is a raw sim/vm/diskimage image.
	Disk string
	// Dir holds the VM's own files: its UEFI variables and console log.
	Dir string
	// AgentPort is the host loopback port QEMU forwards to the guest's
	// agent API (sim/vm/guest.Port).
	AgentPort, GuestPort int
	MAC                  string
	Accel                Accel
	// CDROM is an ISO in the VM's virtual CD drive ("" for an empty
	// drive); BootFromCD puts the drive before the disk in the boot order.
	CDROM      string
	BootFromCD bool
	// UUID keeps a redefined VM the same domain ("" for a new one).
	UUID string
}

// ConsoleLog is where the VM's serial console is written (appended across
// boots and power cycles).
func (s VMSpec) ConsoleLog() string { return filepath.Join(s.Dir, "console.log") }

// Hypervisor is a connection to one lab's daemon.
type Hypervisor struct {
	conn *libvirt.Connect
}

// Connect opens the daemon's URI.
func Connect(uri string) (*Hypervisor, error) {
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: %w", uri, err)
	}
	return &Hypervisor{conn: conn}, nil
}

// Close closes the connection.
func (h *Hypervisor) Close() error {
	_, err := h.conn.Close()
	return err
}

// DomainXML is a VM's libvirt definition: a q35 machine under OVMF with a
// virtio disk, a SATA CD drive (the BMC's virtual media; only OVMF reads
// it, the guest's kernel has no SATA driver and needs none), the serial console in a file, and a user network whose
// agent port is forwarded to loopback (as a <qemu:commandline>, at a PCI address of its own that libvirt does
// not assign: libvirt
// 9.0's user interfaces forward ports only through passt).
func DomainXML(s VMSpec) (string, error) {
	port := uint(0)
	typ := "qemu"
	if s.Accel == KVM {
		typ = "kvm"
	}
	diskBoot, cdBoot := uint(1), uint(2)
	if s.BootFromCD && s.CDROM != "" {
		diskBoot, cdBoot = 2, 1
	}
	cd := libvirtxml.DomainDisk{
		Device:   "cdrom",
		Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
		ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		Boot:     &libvirtxml.DomainDeviceBoot{Order: cdBoot},
	}
	if s.CDROM != "" {
		cd.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.CDROM}}
	}
	dom := &libvirtxml.Domain{
		Type:   typ,
		Name:   s.Name,
		UUID:   s.UUID,
		Memory: &libvirtxml.DomainMemory{Value: uint(s.MemoryMiB), Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: uint(s.CPUs)},
		OS: &libvirtxml.DomainOS{
			Type:   &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
			Loader: &libvirtxml.DomainLoader{Path: ovmfCode, Readonly: "yes", Type: "pflash"},
			NVRam:  &libvirtxml.DomainNVRam{NVRam: filepath.Join(s.Dir, "OVMF_VARS.fd")},
		},
		Features:   features(s.Accel),
		OnPoweroff: "destroy", OnReboot: "restart", OnCrash: "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Emulator: "/usr/bin/qemu-system-x86_64",
			Disks: []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw", Cache: "writeback"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.Disk}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
				Boot:   &libvirtxml.DomainDeviceBoot{Order: diskBoot},
			}, cd},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: s.ConsoleLog(), Append: "on"}},
				Target: &libvirtxml.DomainSerialTarget{Port: &port},
			}},
			MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		},
		QEMUCommandline: &libvirtxml.DomainQEMUCommandline{Args: []libvirtxml.DomainQEMUCommandlineArg{
			{Value: "-netdev"}, {Value: fmt.Sprintf("user,id=un0,hostfwd=tcp:127.0.0.1:%d-:%d", s.AgentPort, s.GuestPort)},
			{Value: "-device"}, {Value: "virtio-net-pci,netdev=un0,bus=pcie.0,addr=0x10,mac=" + s.MAC},
		}},
	}
	return dom.Marshal()
}

// tbCacheMiB bounds TCG's translation cache. QEMU's default (1 GiB on a
// 64-bit host) is reserved, not used, but what a guest's boot fills of it
// counts in QEMU's RSS; a small guest boots as fast with a small cache.
const tbCacheMiB = 32

func features(a Accel) *libvirtxml.DomainFeatureList {
	f := &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}}
	if a != KVM {
		f.TCG = &libvirtxml.DomainFeatureTCG{TBCache: &libvirtxml.DomainFeatureTCGTBCache{Unit: "MiB", Size: tbCacheMiB}}
	}
	return f
}

// PrepareVM makes a VM's folder, with a fresh copy of OVMF's variable
// store, and answers its definition.
func PrepareVM(s VMSpec) (string, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return "", err
	}
	if err := copyFile(ovmfVars, filepath.Join(s.Dir, "OVMF_VARS.fd")); err != nil {
		return "", fmt.Errorf("vm %s: UEFI variables: %w", s.Name, err)
	}
	xml, err := DomainXML(s)
	if err != nil {
		return "", fmt.Errorf("vm %s: %w", s.Name, err)
	}
	return xml, nil
}

// Define creates (or redefines) a powered-off VM (PrepareVM).
func (h *Hypervisor) Define(s VMSpec) error {
	xml, err := PrepareVM(s)
	if err != nil {
		return err
	}
	// A definition left from an earlier run has another UUID, which
	// libvirt refuses to replace: remove it first.
	if d, err := h.conn.LookupDomainByName(s.Name); err == nil {
		d.Free()
		if err := h.Undefine(s.Name); err != nil {
			return err
		}
	}
	d, err := h.conn.DomainDefineXML(xml)
	if err != nil {
		return fmt.Errorf("define vm %s: %w", s.Name, err)
	}
	return d.Free()
}

func (h *Hypervisor) with(name string, fn func(*libvirt.Domain) error) error {
	d, err := h.conn.LookupDomainByName(name)
	if err != nil {
		return fmt.Errorf("vm %s: %w", name, err)
	}
	defer d.Free()
	if err := fn(d); err != nil {
		return fmt.Errorf("vm %s: %w", name, err)
	}
	return nil
}

// Start powers a VM on.
func (h *Hypervisor) Start(name string) error {
	return h.with(name, func(d *libvirt.Domain) error { return d.Create() })
}

// Destroy cuts a VM's power at once: QEMU is killed, so whatever the guest
// had not yet handed to the disk is lost, as on a power cut.
func (h *Hypervisor) Destroy(name string) error {
	return h.with(name, func(d *libvirt.Domain) error { return d.Destroy() })
}

// Reset is the reset button: the machine restarts without a power-off.
func (h *Hypervisor) Reset(name string) error {
	return h.with(name, func(d *libvirt.Domain) error { return d.Reset(0) })
}

// Running says whether a VM is powered on.
func (h *Hypervisor) Running(name string) (bool, error) {
	var on bool
	err := h.with(name, func(d *libvirt.Domain) error {
		var err error
		on, err = d.IsActive()
		return err
	})
	return on, err
}

// Undefine powers a VM off if it runs and removes it.
func (h *Hypervisor) Undefine(name string) error {
	return h.with(name, func(d *libvirt.Domain) error {
		if on, _ := d.IsActive(); on {
			if err := d.Destroy(); err != nil {
				return err
			}
		}
		return d.UndefineFlags(libvirt.DOMAIN_UNDEFINE_NVRAM)
	})
}

// ConsoleTail is the last n lines of a VM's console, for error messages.
func ConsoleTail(s VMSpec, n int) string {
	b, _ := os.ReadFile(s.ConsoleLog())
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// AccelFromEnv is UPGRADELAB_VM_ACCEL: "tcg" (the default) or "kvm". KVM is
// not the default even where /dev/kvm opens: on this project's CI machines
// it opens and answers its API version, yet a guest under it hangs (no
// kernel output in 20 s) or QEMU aborts setting an MSR with -cpu host, so
// a working /dev/kvm is the user's word, not a probe's.
func AccelFromEnv() (Accel, error) {
	switch v := os.Getenv("UPGRADELAB_VM_ACCEL"); v {
	case "", string(TCG):
		return TCG, nil
	case string(KVM):
		return KVM, nil
	default:
		return "", fmt.Errorf("UPGRADELAB_VM_ACCEL=%q: want tcg or kvm", v)
	}
}
