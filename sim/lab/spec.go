package lab

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/upgradelab/upgradelab/internal/specfile"
	"github.com/upgradelab/upgradelab/sim/disk"
)

// Spec is a lab file.
type Spec struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
	// Catalog, NVMImages and NICRules are files relative to the lab file.
	Catalog       string `yaml:"catalog"`
	NVMImages     string `yaml:"nvmImages"`
	NICRules      string `yaml:"nicRules"`
	RecoveryImage string `yaml:"recoveryImage"`
	// Backend is what runs the hosts: "test" (the default: libvirt's
	// test driver, the hardware modelled in Go) or "qemu" (real VMs that
	// boot GRUB, a kernel and the guest from a real A/B disk; qemu.go).
	Backend     string       `yaml:"backend"`
	Timing      Timing       `yaml:"timing"`
	Credentials []Credential `yaml:"credentials"`
	Networks    []Network    `yaml:"networks"`
	Hosts       []HostSpec   `yaml:"hosts"`

	// path is the file the spec came from; relative references resolve
	// against its folder.
	path string
}

// Timing is the modelled duration of each hardware step, before the run's
// time scale applies. The defaults are a rack server's: firmware POST
// takes one to three minutes on one (memory training, option ROMs, the
// BMC's checks); an OS boots in well under a minute; a graceful shutdown
// takes seconds to minutes, systemd allowing each unit 90 s to stop
// (DefaultTimeoutStopSec).
type Timing struct {
	PostSeconds     float64 `yaml:"postSeconds"`
	BootSeconds     float64 `yaml:"bootSeconds"`
	ShutdownSeconds float64 `yaml:"shutdownSeconds"`
	DiskWriteMBps   float64 `yaml:"diskWriteMBps"`
	// FinaliseSeconds is how long an OSTree host's graceful shutdown
	// takes at its end to write a staged deployment into the bootloader:
	// copy its kernel and initramfs to /boot, write the entry, sync
	// (default 15).
	FinaliseSeconds float64 `yaml:"finaliseSeconds"`
}

// Negative says whether a duration or speed of t is below zero.
func (t Timing) Negative() bool {
	return t.PostSeconds < 0 || t.BootSeconds < 0 || t.ShutdownSeconds < 0 || t.DiskWriteMBps < 0 || t.FinaliseSeconds < 0
}

// WithDefaults is t with each unset step at its default: POST 90 s, boot
// 40 s, shutdown 30 s, disk writes at 200 MB/s, an OSTree finalise 15 s.
func (t Timing) WithDefaults() Timing {
	if t.PostSeconds == 0 {
		t.PostSeconds = 90
	}
	if t.BootSeconds == 0 {
		t.BootSeconds = 40
	}
	if t.ShutdownSeconds == 0 {
		t.ShutdownSeconds = 30
	}
	if t.DiskWriteMBps == 0 {
		t.DiskWriteMBps = 200
	}
	if t.FinaliseSeconds == 0 {
		t.FinaliseSeconds = 15
	}
	return t
}

// Credential is a BMC account hosts refer to by name.
type Credential struct {
	Name     string `yaml:"name"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Network is a layer-2 segment ports attach to.
type Network struct {
	Name string `yaml:"name"`
	CIDR string `yaml:"cidr"`
}

// HostSpec is one server.
type HostSpec struct {
	Name      string            `yaml:"name"`
	CPUs      int               `yaml:"cpus"`
	MemoryMiB int               `yaml:"memoryMiB"`
	DiskGiB   int               `yaml:"diskGiB"`
	Labels    map[string]string `yaml:"labels"`
	BMC       HostBMC           `yaml:"bmc"`
	NICs      []NICSpec         `yaml:"nics"`
	// BootOrder is the firmware's order without an override (default Hdd, Pxe).
	BootOrder []BootTarget `yaml:"bootOrder"`
	// OS is how the host keeps its OS images (default A/B slots).
	OS HostOS `yaml:"os"`
}

// HostOS is how a host keeps its OS images (sim/disk): two A/B slots
// (kind ab, the default) or OSTree deployments in one root (kind ostree).
type HostOS struct {
	Kind disk.Kind `yaml:"kind"`
	// KeepDeployments bounds an OSTree host's deployments after an update
	// (default 2: the new default and its rollback).
	KeepDeployments int `yaml:"keepDeployments"`
	// RootGiB is each A/B slot's size; an OSTree host's root, which holds
	// every deployment, gets the same budget (twice RootGiB). Default: 8,
	// or what a smaller disk leaves after 4 GiB of data, halved.
	RootGiB int `yaml:"rootGiB"`
}

// DefaultRootGiB is a root's size on a disk of diskGiB when the lab file
// gives none: 8 GiB, or what a smaller disk leaves after 4 GiB of data,
// halved (two A/B slots).
func DefaultRootGiB(diskGiB int) int { return min(8, max(1, (diskGiB-4)/2)) }

// RootMiB is the space the host's disk gives OS images (disk.Disk.RootMiB).
func (o HostOS) RootMiB() int {
	if o.Kind == disk.OSTree {
		return 2 * o.RootGiB * 1024
	}
	return o.RootGiB * 1024
}

// HostBMC names the host's BMC account.
type HostBMC struct {
	Credentials string `yaml:"credentials"`
	// Protocols are what the BMC serves: redfish (HTTPS) and ipmi (IPMI
	// v2.0 over LAN, RMCP+); default both, as most BMCs shipped since
	// 2016 do. [ipmi] alone is an older fleet's BMC.
	Protocols []BMCProtocol `yaml:"protocols"`
}

// BMCProtocol is one management protocol a BMC serves.
type BMCProtocol string

const (
	ProtocolRedfish BMCProtocol = "redfish"
	ProtocolIPMI    BMCProtocol = "ipmi"
)

// Serves says whether the BMC speaks p.
func (b HostBMC) Serves(p BMCProtocol) bool { return slices.Contains(b.Protocols, p) }

// NICSpec is one port and the NVM image in its flash when the lab starts.
type NICSpec struct {
	Name    string `yaml:"name"`
	MAC     string `yaml:"mac"`
	Model   string `yaml:"model"`
	NVM     string `yaml:"nvm"`
	Network string `yaml:"network"`
	// IP is the port's IPv4 address on its network, as the site's DHCP
	// leases it to whatever OS runs (a fixed reservation per MAC). Empty:
	// the next free address of the network from its 10th on, in the lab
	// file's order.
	IP string `yaml:"ip"`
}

// BootTarget is a boot device, named as Redfish names them.
type BootTarget string

const (
	BootHdd      BootTarget = "Hdd"
	BootCd       BootTarget = "Cd"
	BootPxe      BootTarget = "Pxe"
	BootUefiHttp BootTarget = "UefiHttp"
	// BootBiosSetup stops in the firmware's setup screen (an override
	// only: Redfish's BiosSetup, IPMI's "force boot into BIOS setup").
	BootBiosSetup BootTarget = "BiosSetup"
)

// Path is the file the spec was read from.
func (s *Spec) Path() string { return s.path }

// Resolve gives a path relative to the lab file's folder.
func (s *Spec) Resolve(rel string) string {
	if filepath.IsAbs(rel) || s.path == "" {
		return rel
	}
	return filepath.Join(filepath.Dir(s.path), rel)
}

// Credential returns the named credential.
func (s *Spec) Credential(name string) (Credential, bool) {
	for _, c := range s.Credentials {
		if c.Name == name {
			return c, true
		}
	}
	return Credential{}, false
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ParseSpec reads and validates a lab file's content; name (the path) is
// used in errors and to resolve relative references.
func ParseSpec(name string, data []byte) (*Spec, error) {
	s := &Spec{}
	if err := specfile.Decode(name, data, s); err != nil {
		return nil, err
	}
	s.path = name
	s.defaults()
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// LoadSpec reads a lab file.
func LoadSpec(path string) (*Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSpec(path, raw)
}

func (s *Spec) defaults() {
	s.Timing = s.Timing.WithDefaults()
	for i := range s.Hosts {
		if len(s.Hosts[i].BootOrder) == 0 {
			s.Hosts[i].BootOrder = []BootTarget{BootHdd, BootPxe}
		}
		if len(s.Hosts[i].BMC.Protocols) == 0 {
			s.Hosts[i].BMC.Protocols = []BMCProtocol{ProtocolRedfish, ProtocolIPMI}
		}
		if s.Hosts[i].OS.Kind == "" {
			s.Hosts[i].OS.Kind = disk.AB
		}
		if s.Hosts[i].OS.RootGiB == 0 {
			s.Hosts[i].OS.RootGiB = DefaultRootGiB(s.Hosts[i].DiskGiB)
		}
	}
}

func (s *Spec) validate() error {
	if s.APIVersion != "upgradelab.dev/v1alpha1" || s.Kind != "Lab" {
		return fmt.Errorf("apiVersion/kind: want upgradelab.dev/v1alpha1 Lab, got %q %q", s.APIVersion, s.Kind)
	}
	if !dnsLabel.MatchString(s.Name) {
		return fmt.Errorf("name: %q must be a DNS label (lower-case letters, digits, '-')", s.Name)
	}
	for field, v := range map[string]string{"catalog": s.Catalog, "nvmImages": s.NVMImages, "nicRules": s.NICRules, "recoveryImage": s.RecoveryImage} {
		if v == "" {
			return fmt.Errorf("%s: required", field)
		}
	}
	switch s.Backend {
	case "", BackendTest, BackendQEMU:
	default:
		return fmt.Errorf("backend: %q is not one of %s, %s", s.Backend, BackendTest, BackendQEMU)
	}
	if s.Backend == BackendQEMU {
		for i, h := range s.Hosts {
			if h.OS.Kind != "" && h.OS.Kind != disk.AB {
				return fmt.Errorf("hosts[%d] (%s): os.kind: the qemu backend's disks are A/B; %s is modelled on the test backend only", i, h.Name, h.OS.Kind)
			}
		}
	}
	if s.Timing.Negative() {
		return fmt.Errorf("timing: durations and speeds must not be negative: %+v", s.Timing)
	}
	creds := map[string]bool{}
	for i, c := range s.Credentials {
		if c.Name == "" || c.Username == "" || c.Password == "" {
			return fmt.Errorf("credentials[%d]: name, username and password are required", i)
		}
		if creds[c.Name] {
			return fmt.Errorf("credentials[%d] (%s).name: duplicate", i, c.Name)
		}
		creds[c.Name] = true
	}
	nets := map[string]bool{}
	for i, n := range s.Networks {
		if !dnsLabel.MatchString(n.Name) {
			return fmt.Errorf("networks[%d].name: %q must be a DNS label", i, n.Name)
		}
		if _, _, err := net.ParseCIDR(n.CIDR); err != nil {
			return fmt.Errorf("networks[%d] (%s).cidr: %q is not a CIDR", i, n.Name, n.CIDR)
		}
		nets[n.Name] = true
	}
	if len(s.Hosts) == 0 {
		return fmt.Errorf("hosts: a lab needs at least one host")
	}
	names, macs := map[string]bool{}, map[string]string{}
	for i, h := range s.Hosts {
		at := fmt.Sprintf("hosts[%d]", i)
		if h.Name != "" {
			at += " (" + h.Name + ")"
		}
		if err := validateHost(h, creds, nets, names, macs); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if c, _ := s.Credential(h.BMC.Credentials); h.BMC.Serves(ProtocolIPMI) && (len(c.Username) > 16 || len(c.Password) > 20) {
			return fmt.Errorf("%s: bmc.protocols: ipmi needs credentials %q with a user name of at most 16 and a password of at most 20 characters (IPMI v2.0's limits)", at, c.Name)
		}
	}
	return s.assignIPs()
}

// assignIPs checks each port's address against its network and gives the
// ports without one the next free address of their network.
func (s *Spec) assignIPs() error {
	type network struct {
		prefix netip.Prefix
		next   netip.Addr
	}
	networks := map[string]*network{}
	for _, n := range s.Networks {
		p, _ := netip.ParsePrefix(n.CIDR)
		p = p.Masked()
		first := p.Addr()
		for range 10 {
			first = first.Next()
		}
		networks[n.Name] = &network{prefix: p, next: first}
	}
	taken := map[netip.Addr]string{}
	for i, h := range s.Hosts {
		for j, n := range h.NICs {
			if n.IP == "" {
				continue
			}
			at := fmt.Sprintf("hosts[%d] (%s).nics[%d].ip", i, h.Name, j)
			a, err := netip.ParseAddr(n.IP)
			if err != nil || !a.Is4() {
				return fmt.Errorf("%s: %q is not an IPv4 address", at, n.IP)
			}
			if nw := networks[n.Network]; !nw.prefix.Contains(a) {
				return fmt.Errorf("%s: %s is not in network %s (%s)", at, a, n.Network, nw.prefix)
			}
			if other, dup := taken[a]; dup {
				return fmt.Errorf("%s: %s is already %s's", at, a, other)
			}
			taken[a] = h.Name + "/" + n.Name
		}
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		for j := range h.NICs {
			n := &h.NICs[j]
			if n.IP != "" {
				continue
			}
			nw := networks[n.Network]
			for taken[nw.next] != "" {
				nw.next = nw.next.Next()
			}
			if !nw.prefix.Contains(nw.next) {
				return fmt.Errorf("hosts[%d] (%s).nics[%d]: network %s (%s) has no free address left", i, h.Name, j, n.Network, nw.prefix)
			}
			n.IP = nw.next.String()
			taken[nw.next] = h.Name + "/" + n.Name
			nw.next = nw.next.Next()
		}
	}
	return nil
}

func validProtocols(ps []BMCProtocol) error {
	seen := map[BMCProtocol]bool{}
	for _, p := range ps {
		if p != ProtocolRedfish && p != ProtocolIPMI {
			return fmt.Errorf("%q is not redfish or ipmi", p)
		}
		if seen[p] {
			return fmt.Errorf("%s is listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// Network finds a network by name.
func (s *Spec) Network(name string) (Network, bool) {
	for _, n := range s.Networks {
		if n.Name == name {
			return n, true
		}
	}
	return Network{}, false
}

func validateHost(h HostSpec, creds, nets, names map[string]bool, macs map[string]string) error {
	switch {
	case !dnsLabel.MatchString(h.Name):
		return fmt.Errorf("name: %q must be a DNS label", h.Name)
	case names[h.Name]:
		return fmt.Errorf("name: duplicate")
	case h.CPUs < 1:
		return fmt.Errorf("cpus: must be at least 1, got %d", h.CPUs)
	case h.MemoryMiB < 256:
		return fmt.Errorf("memoryMiB: must be at least 256, got %d", h.MemoryMiB)
	case h.DiskGiB < 8:
		return fmt.Errorf("diskGiB: must be at least 8 (two OS slots and data), got %d", h.DiskGiB)
	case !creds[h.BMC.Credentials]:
		return fmt.Errorf("bmc.credentials: %q is not in credentials", h.BMC.Credentials)
	case len(h.NICs) == 0:
		return fmt.Errorf("nics: a host needs at least one port")
	case validProtocols(h.BMC.Protocols) != nil:
		return fmt.Errorf("bmc.protocols: %w", validProtocols(h.BMC.Protocols))
	case !slices.Contains(disk.Kinds, h.OS.Kind):
		return fmt.Errorf("os.kind: %q is not one of %v", h.OS.Kind, disk.Kinds)
	case h.OS.KeepDeployments != 0 && h.OS.Kind != disk.OSTree:
		return fmt.Errorf("os.keepDeployments: only an ostree host has deployments (os.kind is %s)", h.OS.Kind)
	case h.OS.KeepDeployments < 0 || h.OS.KeepDeployments == 1:
		return fmt.Errorf("os.keepDeployments: must be at least 2 (the default and its rollback), got %d", h.OS.KeepDeployments)
	case h.OS.RootGiB < 1 || 2*h.OS.RootGiB > h.DiskGiB:
		return fmt.Errorf("os.rootGiB: two roots' worth (%d GiB) must fit the %d GiB disk, and a root at least 1 GiB", 2*h.OS.RootGiB, h.DiskGiB)
	}
	names[h.Name] = true
	for j, n := range h.NICs {
		hw, err := net.ParseMAC(n.MAC)
		if err != nil || len(hw) != 6 {
			return fmt.Errorf("nics[%d].mac: %q is not a MAC address", j, n.MAC)
		}
		if other, dup := macs[hw.String()]; dup {
			return fmt.Errorf("nics[%d].mac: %s is already used by %s", j, n.MAC, other)
		}
		macs[hw.String()] = h.Name
		if n.Name == "" {
			return fmt.Errorf("nics[%d].name: required", j)
		}
		if n.Model != "i40e" {
			return fmt.Errorf("nics[%d].model: %q is not modelled (i40e is)", j, n.Model)
		}
		if n.NVM == "" {
			return fmt.Errorf("nics[%d].nvm: required", j)
		}
		if !nets[n.Network] {
			return fmt.Errorf("nics[%d].network: %q is not in networks", j, n.Network)
		}
	}
	for j, t := range h.BootOrder {
		switch t {
		case BootHdd, BootCd, BootPxe, BootUefiHttp:
		default:
			return fmt.Errorf("bootOrder[%d]: %q is not Hdd, Cd, Pxe or UefiHttp", j, t)
		}
	}
	return nil
}
