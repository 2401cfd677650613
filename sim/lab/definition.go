package lab

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// Definition is a lab file with everything it refers to loaded and checked
// against it: the image catalog, the NVM images and the NIC rules.
type Definition struct {
	Spec      *Spec
	Catalog   *image.Catalog
	NVMImages nic.Catalog
	NICRules  *nic.Rules
}

// Load reads a lab file and the files it names.
func Load(path string) (*Definition, error) {
	spec, err := LoadSpec(path)
	if err != nil {
		return nil, err
	}
	d := &Definition{Spec: spec}
	if d.Catalog, err = image.LoadCatalog(spec.Resolve(spec.Catalog)); err != nil {
		return nil, fmt.Errorf("%s: catalog: %w", path, err)
	}
	if d.NVMImages, err = nic.LoadCatalog(spec.Resolve(spec.NVMImages)); err != nil {
		return nil, fmt.Errorf("%s: nvmImages: %w", path, err)
	}
	if d.NICRules, err = nic.LoadRules(spec.Resolve(spec.NICRules)); err != nil {
		return nil, fmt.Errorf("%s: nicRules: %w", path, err)
	}
	if err := d.crossCheck(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func (d *Definition) crossCheck() error {
	rec, err := d.Catalog.Get(d.Spec.RecoveryImage)
	if err != nil {
		return fmt.Errorf("recoveryImage: %w", err)
	}
	if rec.Role != imagev1.RoleRecovery {
		return fmt.Errorf("recoveryImage: %q has role %s, want recovery", rec.Name, rec.Role)
	}
	if d.NICRules.Model != "i40e" {
		return fmt.Errorf("nicRules: rules for model %q, the lab's ports are i40e", d.NICRules.Model)
	}
	for i, h := range d.Spec.Hosts {
		for j, n := range h.NICs {
			if _, ok := d.NVMImages[n.NVM]; !ok {
				return fmt.Errorf("hosts[%d] (%s): nics[%d].nvm: %q is not in %s", i, h.Name, j, n.NVM, d.Spec.NVMImages)
			}
		}
	}
	return nil
}

// Scaled is a copy of d with n hosts, each a copy of the first host with its
// own name (host-000 ...) and MACs, for scale runs and benchmarks.
func (d *Definition) Scaled(n int) (*Definition, error) {
	out := *d
	spec := *d.Spec
	spec.Hosts = make([]HostSpec, 0, n)
	for i := range n {
		h := d.Spec.Hosts[0]
		h.Name = fmt.Sprintf("host-%03d", i)
		h.NICs = append([]NICSpec(nil), h.NICs...)
		for j := range h.NICs {
			h.NICs[j].MAC = fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", 0xa0+j, i>>16&0xff, i>>8&0xff, i&0xff)
			h.NICs[j].IP = ""
		}
		spec.Hosts = append(spec.Hosts, h)
	}
	if err := spec.assignIPs(); err != nil {
		return nil, fmt.Errorf("lab %s scaled to %d hosts: %w", spec.Name, n, err)
	}
	out.Spec = &spec
	return &out, nil
}

// WithHostOS is the lab with its hosts' OS kind set by mode: every host
// ab, every host ostree, or mixed (A/B and OSTree in turn, in the lab
// file's order, the first A/B). The same scenario thus runs on each kind
// of host without a lab file per kind. d is not changed.
func (d *Definition) WithHostOS(mode string) (*Definition, error) {
	if !slices.Contains(vocab.HostOSModes, mode) {
		return nil, fmt.Errorf("host OS %q is not one of %v", mode, vocab.HostOSModes)
	}
	spec := *d.Spec
	spec.Hosts = slices.Clone(d.Spec.Hosts)
	for i := range spec.Hosts {
		kind := disk.Kind(mode)
		if mode == vocab.HostOSMixed {
			kind = disk.Kinds[i%2]
		}
		spec.Hosts[i].OS = HostOS{Kind: kind, RootGiB: spec.Hosts[i].OS.RootGiB}
	}
	out := *d
	out.Spec = &spec
	return &out, nil
}

// WithBackend is the lab on another backend ("test" or "qemu"), as
// `--backend` and UPGRADELAB_BACKEND ask; d is not changed.
func (d *Definition) WithBackend(kind string) (*Definition, error) {
	switch kind {
	case BackendTest, BackendQEMU:
	default:
		return nil, fmt.Errorf("backend %q is not one of %s, %s", kind, BackendTest, BackendQEMU)
	}
	spec := *d.Spec
	spec.Backend = kind
	out := *d
	out.Spec = &spec
	return &out, nil
}

// Backend is the lab's backend ("test" when the file names none).
func (d *Definition) Backend() string {
	if d.Spec.Backend == "" {
		return BackendTest
	}
	return d.Spec.Backend
}

// HostOSMode is the lab's hosts' OS kind when all agree ("ab",
// "ostree"), else "mixed".
func (d *Definition) HostOSMode() string {
	for _, h := range d.Spec.Hosts[1:] {
		if h.OS.Kind != d.Spec.Hosts[0].OS.Kind {
			return vocab.HostOSMixed
		}
	}
	return string(d.Spec.Hosts[0].OS.Kind)
}

// HostOS describes how the lab's hosts keep their OS, for reports: the
// mode, and each host's kind when they differ ("mixed (node-0 ab,
// node-1 ostree)").
func (d *Definition) HostOS() string {
	mode := d.HostOSMode()
	if mode != vocab.HostOSMixed {
		return mode
	}
	var each []string
	for _, h := range d.Spec.Hosts {
		each = append(each, h.Name+" "+string(h.OS.Kind))
	}
	return mode + " (" + strings.Join(each, ", ") + ")"
}

// Part is one lab in a Compose: its hosts join under Prefix-NAME.
type Part struct {
	Prefix string
	Def    *Definition
}

// Compose is one lab named name holding every part's hosts, renamed
// PREFIX-HOST, with MACs of their own and addresses assigned afresh: a
// fleet's lab, where each cluster gets a copy of its scenario's lab. The
// first part gives the catalog, NVM images, NIC rules, recovery image,
// timing and backend; every part must name the same catalog files and
// give a credential or network of the same name the same content (the
// error names the part). A network that would run out of addresses
// widens to its /16.
func Compose(name string, parts []Part) (*Definition, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("lab %s: no parts", name)
	}
	first := parts[0].Def
	spec := *first.Spec
	spec.Name, spec.Hosts, spec.Credentials, spec.Networks = name, nil, nil, nil
	creds, nets := map[string]Credential{}, map[string]int{}
	for _, p := range parts {
		s := p.Def.Spec
		for field, pair := range map[string][2]string{
			"catalog":   {s.Resolve(s.Catalog), first.Spec.Resolve(first.Spec.Catalog)},
			"nvmImages": {s.Resolve(s.NVMImages), first.Spec.Resolve(first.Spec.NVMImages)},
			"nicRules":  {s.Resolve(s.NICRules), first.Spec.Resolve(first.Spec.NICRules)},
		} {
			if pair[0] != pair[1] {
				return nil, fmt.Errorf("lab %s: part %s (lab %s): %s %s differs from the first part's %s", name, p.Prefix, s.Name, field, pair[0], pair[1])
			}
		}
		for _, c := range s.Credentials {
			if have, ok := creds[c.Name]; ok && have != c {
				return nil, fmt.Errorf("lab %s: part %s (lab %s): credentials %q differ from an earlier part's", name, p.Prefix, s.Name, c.Name)
			} else if !ok {
				creds[c.Name] = c
				spec.Credentials = append(spec.Credentials, c)
			}
		}
		for _, n := range s.Networks {
			if i, ok := nets[n.Name]; ok && spec.Networks[i].CIDR != n.CIDR {
				return nil, fmt.Errorf("lab %s: part %s (lab %s): network %q is %s, an earlier part's is %s", name, p.Prefix, s.Name, n.Name, n.CIDR, spec.Networks[i].CIDR)
			} else if !ok {
				nets[n.Name] = len(spec.Networks)
				spec.Networks = append(spec.Networks, n)
			}
		}
		for _, h := range s.Hosts {
			h.Name = p.Prefix + "-" + h.Name
			h.NICs = slices.Clone(h.NICs)
			i := len(spec.Hosts)
			for j := range h.NICs {
				h.NICs[j].MAC = fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", 0xc0+j, i>>16&0xff, i>>8&0xff, i&0xff)
				h.NICs[j].IP = ""
			}
			spec.Hosts = append(spec.Hosts, h)
		}
	}
	ports := map[string]int{}
	for _, h := range spec.Hosts {
		for _, n := range h.NICs {
			ports[n.Network]++
		}
	}
	for i, n := range spec.Networks {
		p, err := netip.ParsePrefix(n.CIDR)
		if err != nil {
			return nil, fmt.Errorf("lab %s: network %s: %w", name, n.Name, err)
		}
		if p.Bits() > 16 && ports[n.Name]+16 > 1<<(32-p.Bits()) {
			spec.Networks[i].CIDR = netip.PrefixFrom(p.Addr(), 16).Masked().String()
		}
	}
	creds2, nets2, names, macs := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]string{}
	for _, c := range spec.Credentials {
		creds2[c.Name] = true
	}
	for _, n := range spec.Networks {
		nets2[n.Name] = true
	}
	for i, h := range spec.Hosts {
		if err := validateHost(h, creds2, nets2, names, macs); err != nil {
			return nil, fmt.Errorf("lab %s: hosts[%d] (%s): %w", name, i, h.Name, err)
		}
	}
	if err := spec.assignIPs(); err != nil {
		return nil, fmt.Errorf("lab %s: %w", name, err)
	}
	out := *first
	out.Spec = &spec
	return &out, nil
}
