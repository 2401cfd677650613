package lab

import (
	"cmp"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/upgradelab/upgradelab/internal/loopback"

	"github.com/upgradelab/upgradelab/internal/statefile"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
)

// Options configure a running lab.
type Options struct {
	// StateDir holds everything the lab must not lose: lab.json, each
	// host's disk, slots and ports, and events.jsonl.
	StateDir string
	// Scale turns modelled durations into real ones.
	Scale timescale.Scale
	// Backend is the hypervisor; nil means the one the lab file's backend
	// names (or Kind, when set): a private libvirt test driver, or real
	// VMs on a private libvirt daemon (qemu.go).
	Backend Backend
	// Kind overrides the lab file's backend ("test" or "qemu").
	Kind string
	// ImageServerAddr is where the image server listens (default a
	// loopback port from internal/loopback).
	ImageServerAddr string
}

// Lab is a running lab.
type Lab struct {
	def      *Definition
	stateDir string
	scale    timescale.Scale
	backend  Backend
	images   *image.Server
	events   *eventLog

	hosts map[string]*Host
	order []string

	loopDone chan struct{}
	downOnce sync.Once

	mu   sync.Mutex
	bmcs map[string]BMCInfo
	// netboot is each network's boot server, by network name.
	netboot map[string]string
}

// Info is lab.json: what a user or another process needs to reach the lab.
type Info struct {
	Name        string  `json:"name"`
	Definition  string  `json:"definition"`
	StateDir    string  `json:"stateDir"`
	ImageServer string  `json:"imageServer"`
	TimeScale   float64 `json:"timeScale"`
	// PID is the process that runs the lab; status uses it to tell a
	// running lab from a state folder left behind.
	PID   int        `json:"pid"`
	Hosts []HostInfo `json:"hosts"`
}

// HostInfo is one host in lab.json.
type HostInfo struct {
	Name   string            `json:"name"`
	Domain string            `json:"domain"`
	MACs   []string          `json:"macs"`
	Labels map[string]string `json:"labels,omitempty"`
	BMC    *BMCInfo          `json:"bmc,omitempty"`
	// Guest and Console are a qemu-backend host's guest agent API and
	// serial console log.
	Guest   string `json:"guest,omitempty"`
	Console string `json:"console,omitempty"`
}

// BMCInfo is how to reach a host's BMC.
type BMCInfo struct {
	// Address is the Redfish ComputerSystem URL; empty for a BMC that
	// serves IPMI only.
	Address string `json:"address,omitempty"`
	// IPMI is the IPMI over LAN endpoint (HOST:PORT, UDP); empty for a
	// BMC that serves Redfish only.
	IPMI     string `json:"ipmi,omitempty"`
	Username string `json:"username"`
	Password string `json:"password"`
	CAFile   string `json:"caFile"`
}

// Up defines every host as a domain (powered off), starts the image server
// and follows the hypervisor's events.
func Up(ctx context.Context, def *Definition, opts Options) (l *Lab, err error) {
	if opts.StateDir == "" {
		return nil, fmt.Errorf("lab %s: a state folder is required", def.Spec.Name)
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	l = &Lab{def: def, stateDir: stateDir, scale: opts.Scale, backend: opts.Backend, hosts: map[string]*Host{}, netboot: map[string]string{}, loopDone: make(chan struct{})}
	defer func() {
		if err != nil {
			l.Down()
			l = nil
		}
	}()
	if l.events, err = openEventLog(filepath.Join(stateDir, "events.jsonl")); err != nil {
		return l, err
	}
	kind := cmp.Or(opts.Kind, def.Spec.Backend, BackendTest)
	switch {
	case l.backend != nil:
	case kind == BackendQEMU:
		for _, h := range def.Spec.Hosts {
			if h.OS.Kind != disk.AB {
				return l, fmt.Errorf("lab %s: host %s: os.kind %s: the qemu backend's disks are A/B", def.Spec.Name, h.Name, h.OS.Kind)
			}
		}
		vms, err := newQEMUBackend(ctx, def, stateDir)
		if err != nil {
			return l, err
		}
		l.backend = vms
	case kind != BackendTest:
		return l, fmt.Errorf("lab %s: backend %q is not one of %s, %s", def.Spec.Name, kind, BackendTest, BackendQEMU)
	default:
		uri, err := TestDriverURI(stateDir)
		if err != nil {
			return l, err
		}
		if l.backend, err = NewLibvirtBackend(uri); err != nil {
			return l, err
		}
	}
	addr := opts.ImageServerAddr
	if addr == "" {
		// A port of loopback's range, not the kernel's: a management
		// cluster on kind reaches the lab's ports of that range only
		// (e2e/mgmt/kind), and the in-place extension reads image
		// manifests from here.
		if addr, err = loopback.Addr(); err != nil {
			return l, fmt.Errorf("the image server's address: %w", err)
		}
	}
	if l.images, err = image.Serve(def.Catalog, def.NVMImages, addr); err != nil {
		return l, err
	}
	for _, spec := range def.Spec.Hosts {
		if err := l.backend.Define(domainSpec(spec)); err != nil {
			return l, err
		}
		h, err := newHost(l, spec)
		if err != nil {
			return l, err
		}
		l.hosts[spec.Name] = h
		l.order = append(l.order, spec.Name)
	}
	go l.followDomains()
	return l, statefile.Write(filepath.Join(stateDir, "lab.json"), l.Info())
}

func domainSpec(h HostSpec) DomainSpec {
	d := DomainSpec{Name: h.Name, CPUs: h.CPUs, MemoryMiB: h.MemoryMiB, DiskGiB: h.DiskGiB}
	for _, n := range h.NICs {
		d.NICs = append(d.NICs, DomainNIC{MAC: n.MAC, Network: n.Network})
	}
	return d
}

// followDomains applies every lifecycle event to its host.
func (l *Lab) followDomains() {
	defer close(l.loopDone)
	for e := range l.backend.Events() {
		if h, ok := l.hosts[e.Domain]; ok {
			h.onDomainEvent(e)
		}
	}
}

// Definition is what the lab was built from.
func (l *Lab) Definition() *Definition { return l.def }

// Scale is the lab's time scale.
func (l *Lab) Scale() timescale.Scale { return l.scale }

// ImageServer serves the catalog's payloads.
func (l *Lab) ImageServer() *image.Server { return l.images }

// Host returns the named host.
func (l *Lab) Host(name string) (*Host, error) {
	h, ok := l.hosts[name]
	if !ok {
		return nil, fmt.Errorf("lab %s: no host %q", l.def.Spec.Name, name)
	}
	return h, nil
}

// Hosts lists hosts in the lab file's order.
func (l *Lab) Hosts() []*Host {
	out := make([]*Host, 0, len(l.order))
	for _, n := range l.order {
		out = append(out, l.hosts[n])
	}
	return out
}

// Subscribe returns every lab event from now on, until cancel is called.
func (l *Lab) Subscribe() (<-chan Event, func()) { return l.events.subscribe() }

// Info describes the running lab.
func (l *Lab) Info() Info {
	info := Info{Name: l.def.Spec.Name, Definition: l.def.Spec.Path(), StateDir: l.stateDir, TimeScale: float64(l.scale), PID: os.Getpid()}
	if l.images != nil {
		info.ImageServer = l.images.URL()
	}
	for _, h := range l.Hosts() {
		hi := HostInfo{Name: h.spec.Name, Domain: h.spec.Name, Labels: h.spec.Labels}
		hi.Guest, hi.Console, _ = h.Guest()
		l.mu.Lock()
		if b, ok := l.bmcs[h.spec.Name]; ok {
			hi.BMC = &b
		}
		l.mu.Unlock()
		for _, n := range h.spec.NICs {
			hi.MACs = append(hi.MACs, n.MAC)
		}
		info.Hosts = append(info.Hosts, hi)
	}
	return info
}

// StateDir is the lab's state folder.
func (l *Lab) StateDir() string { return l.stateDir }

// RecordBMCs adds the hosts' BMC endpoints to lab.json.
func (l *Lab) RecordBMCs(bmcs map[string]BMCInfo) error {
	l.mu.Lock()
	l.bmcs = bmcs
	l.mu.Unlock()
	return statefile.Write(filepath.Join(l.stateDir, "lab.json"), l.Info())
}

// Down powers every host off and releases the hypervisor and the image
// server. The state folder stays: Up on it again continues from there.
func (l *Lab) Down() error {
	var errs []error
	l.downOnce.Do(func() {
		for _, h := range l.Hosts() {
			if err := h.PowerOff(); err != nil {
				errs = append(errs, err)
			}
			h.detach()
			if err := l.backend.Undefine(h.spec.Name); err != nil {
				errs = append(errs, err)
			}
		}
		if l.images != nil {
			l.images.Close()
		}
		if l.backend != nil {
			l.backend.Close()
			if len(l.hosts) > 0 {
				<-l.loopDone
			}
		}
		if l.events != nil {
			l.events.close()
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("lab %s down: %v", l.def.Spec.Name, errs)
	}
	return nil
}

// hostMetadata is the hardware view stored in each domain's metadata.
type hostMetadata struct {
	XMLName xml.Name    `xml:"host"`
	Lab     string      `xml:"lab,attr"`
	Name    string      `xml:"name,attr"`
	Phase   string      `xml:"phase,attr"`
	Booted  *metaBooted `xml:"booted"`
	Kind    string      `xml:"os,attr"`
	Roots   []metaRoot  `xml:"root"`
	NICs    []metaNIC   `xml:"nic"`
}

type metaBooted struct {
	Source string `xml:"source,attr"`
	Root   string `xml:"root,attr,omitempty"`
	Image  string `xml:"image,attr"`
}

type metaRoot struct {
	ID    string `xml:"id,attr"`
	State string `xml:"state,attr"`
	Image string `xml:"image,attr,omitempty"`
	Good  bool   `xml:"good,attr"`
}

type metaNIC struct {
	Name  string `xml:"name,attr"`
	MAC   string `xml:"mac,attr"`
	NVM   string `xml:"nvm,attr"`
	Flash string `xml:"flash,attr"`
}

// metadataXML is a host's hardware state as stored in its domain.
func metadataXML(lab string, s HostStatus) string {
	md := hostMetadata{Lab: lab, Name: s.Name, Phase: string(s.Phase)}
	if s.OS != nil {
		md.Booted = &metaBooted{Source: string(s.OS.Source), Root: string(s.OS.Root), Image: s.OS.Image.Name}
	}
	im := s.Disk.Images()
	md.Kind = string(im.Kind)
	for _, r := range im.Roots {
		md.Roots = append(md.Roots, metaRoot{ID: string(r.ID), State: string(r.State), Image: r.Image, Good: r.Committed})
	}
	for _, p := range s.Ports {
		md.NICs = append(md.NICs, metaNIC{Name: p.Name, MAC: p.MAC, NVM: p.Active.Name, Flash: string(p.Flash)})
	}
	data, _ := xml.Marshal(md)
	return string(data)
}

// ReadState reads what a lab (running or not) left in its state folder:
// lab.json and every host's last status.
func ReadState(stateDir string) (Info, []HostStatus, error) {
	var info Info
	if err := statefile.Read(filepath.Join(stateDir, "lab.json"), &info); err != nil {
		return info, nil, fmt.Errorf("no lab in %s: %w", stateDir, err)
	}
	var hosts []HostStatus
	for _, h := range info.Hosts {
		var s HostStatus
		if err := statefile.Read(filepath.Join(stateDir, "hosts", h.Name, "host.json"), &s); err != nil {
			return info, nil, err
		}
		hosts = append(hosts, s)
	}
	return info, hosts, nil
}
