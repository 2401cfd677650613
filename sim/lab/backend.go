package lab

// PowerState is a domain's power as the hypervisor reports it.
type PowerState string

const (
	PoweredOn  PowerState = "On"
	PoweredOff PowerState = "Off"
)

// DomainSpec is what a backend needs to create one host's machine.
type DomainSpec struct {
	Name      string
	CPUs      int
	MemoryMiB int
	DiskGiB   int
	NICs      []DomainNIC
}

// DomainNIC is one network port of a domain.
type DomainNIC struct {
	MAC     string
	Network string
}

// DomainEventKind is a lifecycle change of a domain.
type DomainEventKind string

const (
	DomainStarted DomainEventKind = "Started"
	DomainStopped DomainEventKind = "Stopped"
	DomainDefined DomainEventKind = "Defined"
	DomainRemoved DomainEventKind = "Undefined"
)

// DomainEvent is one lifecycle event the hypervisor reported.
type DomainEvent struct {
	Domain string
	Kind   DomainEventKind
	Detail string
}

// Backend is the hypervisor that holds the lab's machines. The lab does
// not poll it: power changes arrive as events, whoever caused them.
//
// The libvirt backend implements it for any libvirt URI: the in-process
// test:/// driver by default, and qemu:///system of a private libvirtd
// for real VMs (qemu.go), whose init is sim/vm/guest.
type Backend interface {
	// Define creates a powered-off machine, or replaces the definition of
	// one with the same name.
	Define(spec DomainSpec) error
	Undefine(name string) error
	// Start powers a machine on; Stop cuts its power.
	Start(name string) error
	Stop(name string) error
	State(name string) (PowerState, error)
	// SetMetadata stores the lab's view of the hardware in the domain, so
	// `virsh dumpxml` shows it beside the machine.
	SetMetadata(name, xml string) error
	Metadata(name string) (string, error)
	// Events delivers every lifecycle event in order, until Close.
	Events() <-chan DomainEvent
	Close() error
	// machine is what runs the boot and disk of a host whose domain this
	// backend defined (machine.go).
	machine(h *Host) machine
}
