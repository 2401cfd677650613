package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/upgradelab/upgradelab/internal/queue"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

const (
	metadataNS     = "https://upgradelab.dev/xmlns/lab/v1"
	metadataPrefix = "upgradelab"
)

// startEventLoop runs libvirt's default event loop. libvirt keeps one per
// process, registered before the first connection that wants events, so
// every backend in the process shares it.
var startEventLoop = sync.OnceValue(func() error {
	if err := libvirt.EventRegisterDefaultImpl(); err != nil {
		return fmt.Errorf("libvirt event loop: %w", err)
	}
	go func() {
		for {
			if err := libvirt.EventRunDefaultImpl(); err != nil {
				return
			}
		}
	}()
	return nil
})

// LibvirtBackend drives domains through libvirt.org/go/libvirt.
type LibvirtBackend struct {
	conn     *libvirt.Connect
	callback int
	// domainXML makes a machine's definition: the test driver's by
	// default, a real VM's on the qemu backend (qemu.go).
	domainXML     func(DomainSpec) (string, error)
	undefineFlags libvirt.DomainUndefineFlagsValues

	queue  *queue.Unbounded[DomainEvent]
	closed sync.Once
}

// TestDriverURI makes a private libvirt test driver for one lab: a node
// file in stateDir, so two labs in one process never see each other's
// domains (test:///default is shared by the whole process).
func TestDriverURI(stateDir string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(stateDir, "libvirt-test-node.xml"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(abs, []byte("<node/>\n"), 0o644); err != nil {
		return "", err
	}
	return "test://" + abs, nil
}

// machine is the lab's model: libvirt holds the power, the lab runs the
// boot and the disk.
func (b *LibvirtBackend) machine(h *Host) machine { return modelled{h} }

// NewLibvirtBackend connects to uri and subscribes to lifecycle events.
func NewLibvirtBackend(uri string) (*LibvirtBackend, error) {
	if err := startEventLoop(); err != nil {
		return nil, err
	}
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, fmt.Errorf("libvirt %s: %w", uri, err)
	}
	b := &LibvirtBackend{conn: conn, queue: queue.New[DomainEvent](), domainXML: testDomainXML}
	b.callback, err = conn.DomainEventLifecycleRegister(nil, b.onLifecycle)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("libvirt %s: lifecycle events: %w", uri, err)
	}
	return b, nil
}

func (b *LibvirtBackend) onLifecycle(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
	name, err := d.GetName()
	if err != nil {
		return
	}
	if kind, ok := lifecycleKind(ev.Event); ok {
		b.queue.Push(DomainEvent{Domain: name, Kind: kind, Detail: ev.String()})
	}
}

// lifecycleKind is what a libvirt lifecycle event means to the lab.
// SHUTDOWN is not a power-off: QEMU sends it when the guest has shut
// down, and the domain stays active until QEMU has exited and libvirt
// sends STOPPED. Taken as the power-off, it let a reboot power on a
// domain that was still running ("domain is already running"), and a
// reset host of make e2e-vm stayed off for good.
func lifecycleKind(e libvirt.DomainEventType) (DomainEventKind, bool) {
	switch e {
	case libvirt.DOMAIN_EVENT_STARTED, libvirt.DOMAIN_EVENT_RESUMED:
		return DomainStarted, true
	case libvirt.DOMAIN_EVENT_STOPPED, libvirt.DOMAIN_EVENT_CRASHED:
		return DomainStopped, true
	case libvirt.DOMAIN_EVENT_DEFINED:
		return DomainDefined, true
	case libvirt.DOMAIN_EVENT_UNDEFINED:
		return DomainRemoved, true
	}
	return "", false
}

// Define implements Backend.
func (b *LibvirtBackend) Define(spec DomainSpec) error {
	xml, err := b.domainXML(spec)
	if err != nil {
		return fmt.Errorf("domain %s: %w", spec.Name, err)
	}
	d, err := b.conn.DomainDefineXML(xml)
	if err != nil {
		return fmt.Errorf("define domain %s: %w", spec.Name, err)
	}
	return d.Free()
}

// testDomainXML is a test-driver domain: nothing runs in it.
func testDomainXML(spec DomainSpec) (string, error) {
	dom := &libvirtxml.Domain{
		Type:   "test",
		Name:   spec.Name,
		Memory: &libvirtxml.DomainMemory{Value: uint(spec.MemoryMiB), Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: uint(spec.CPUs)},
		OS:     &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"}},
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/upgradelab/" + spec.Name + "/system.img"}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}},
		},
	}
	for _, n := range spec.NICs {
		dom.Devices.Interfaces = append(dom.Devices.Interfaces, libvirtxml.DomainInterface{
			MAC:    &libvirtxml.DomainInterfaceMAC{Address: n.MAC},
			Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: n.Network}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		})
	}
	return dom.Marshal()
}

func (b *LibvirtBackend) withDomain(name string, fn func(*libvirt.Domain) error) error {
	d, err := b.conn.LookupDomainByName(name)
	if err != nil {
		return fmt.Errorf("domain %s: %w", name, err)
	}
	defer d.Free()
	return fn(d)
}

// Undefine implements Backend.
func (b *LibvirtBackend) Undefine(name string) error {
	return b.withDomain(name, func(d *libvirt.Domain) error {
		if active, _ := d.IsActive(); active {
			if err := d.Destroy(); err != nil {
				return err
			}
		}
		return d.UndefineFlags(b.undefineFlags)
	})
}

// Start implements Backend.
func (b *LibvirtBackend) Start(name string) error {
	return b.withDomain(name, func(d *libvirt.Domain) error { return d.Create() })
}

// Stop implements Backend.
func (b *LibvirtBackend) Stop(name string) error {
	return b.withDomain(name, func(d *libvirt.Domain) error { return d.Destroy() })
}

// State implements Backend.
func (b *LibvirtBackend) State(name string) (PowerState, error) {
	state := PoweredOff
	err := b.withDomain(name, func(d *libvirt.Domain) error {
		active, err := d.IsActive()
		if active {
			state = PoweredOn
		}
		return err
	})
	return state, err
}

// SetMetadata implements Backend.
func (b *LibvirtBackend) SetMetadata(name, xml string) error {
	return b.withDomain(name, func(d *libvirt.Domain) error {
		return d.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, xml, metadataPrefix, metadataNS, libvirt.DOMAIN_AFFECT_CONFIG)
	})
}

// Metadata implements Backend.
func (b *LibvirtBackend) Metadata(name string) (string, error) {
	var xml string
	err := b.withDomain(name, func(d *libvirt.Domain) error {
		var err error
		xml, err = d.GetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, metadataNS, libvirt.DOMAIN_AFFECT_CONFIG)
		return err
	})
	return xml, err
}

// Events implements Backend.
func (b *LibvirtBackend) Events() <-chan DomainEvent { return b.queue.Out() }

// Close implements Backend.
func (b *LibvirtBackend) Close() error {
	var err error
	b.closed.Do(func() {
		_ = b.conn.DomainEventDeregister(b.callback)
		_, err = b.conn.Close()
		b.queue.Close()
	})
	return err
}
