package plan

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Run is one planned scenario run.
type Run struct {
	Scenario *scenario.Scenario
	Lab      *lab.Definition
	Provider *provider.Config
	Form     scenario.Form
	// HostOS is the scenario's hostOS entry the lab was set to ("" for
	// the lab file as it is, also when the entry is what the file says).
	HostOS string
	// Repeat is 1..Repeats.
	Repeat, Repeats int
}

// Labels are the run's labels: "scenario", the provider, the scenario's
// name, strategy and form, and for a lab provider the host OS mode
// (ab, ostree, mixed) and "qemu" when its hosts are real VMs.
func (r Run) Labels() []string {
	l := []string{"scenario", r.Provider.Name, r.Scenario.Name, string(r.Scenario.Strategy), string(r.Form)}
	if r.Provider.Lab {
		l = append(l, r.Lab.HostOSMode())
		if r.onVMs() {
			l = append(l, lab.BackendQEMU)
		}
	}
	return l
}

func (r Run) onVMs() bool { return r.Provider.Lab && r.Lab.Backend() == lab.BackendQEMU }

// Name is how the run's progress lines name it.
func (r Run) Name() string {
	n := fmt.Sprintf("%s %s/%s", r.Provider.Name, r.Scenario.Name, r.Form)
	if r.HostOS != "" {
		n += "/" + r.HostOS
	}
	if r.onVMs() {
		n += "/qemu"
	}
	if r.Repeats > 1 {
		n += fmt.Sprintf(" #%d", r.Repeat)
	}
	return n
}

// Dir is the run's folder name under the artifacts folder.
func (r Run) Dir() string {
	d := r.Provider.Name + "-" + r.Scenario.Name + "-" + string(r.Form)
	if r.HostOS != "" {
		d += "-" + r.HostOS
	}
	if r.onVMs() {
		d += "-qemu"
	}
	if r.Repeats > 1 {
		d += fmt.Sprintf("-r%d", r.Repeat)
	}
	return d
}

// Scenarios loads the scenario files the globs match, biggest lab first
// (the longest runs start first, so the last to finish is a short one),
// then by name. A bad file is an error naming it and the field.
func Scenarios(globs ...string) ([]Loaded, error) {
	var paths []string
	for _, g := range globs {
		found, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("scenarios %s: %w", g, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("no scenario file matches %s", g)
		}
		paths = append(paths, found...)
	}
	var all []Loaded
	for _, path := range paths {
		s, def, err := Load(path)
		if err != nil {
			return nil, err
		}
		all = append(all, Loaded{Scenario: s, Lab: def})
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := len(all[i].Lab.Spec.Hosts), len(all[j].Lab.Spec.Hosts)
		if a != b {
			return a > b
		}
		return all[i].Scenario.Name < all[j].Scenario.Name
	})
	return all, nil
}

// OnBackend is the scenarios with their labs on backend ("" keeps each
// lab file's own).
func OnBackend(scenarios []Loaded, backend string) ([]Loaded, error) {
	if backend == "" {
		return scenarios, nil
	}
	out := make([]Loaded, len(scenarios))
	for i, l := range scenarios {
		def, err := l.Lab.WithBackend(backend)
		if err != nil {
			return nil, err
		}
		out[i] = Loaded{Scenario: l.Scenario, Lab: def}
	}
	return out, nil
}

// Loaded is a scenario with its lab.
type Loaded struct {
	Scenario *scenario.Scenario
	Lab      *lab.Definition
}

// Runs are the runs of the scenarios against the providers, provider by
// provider as given, each scenario in each host OS variant and form,
// repeats times. A scenario a provider cannot run (its
// strategy, a fault on something it lacks) is no run of that provider.
func Runs(scenarios []Loaded, providers []*provider.Config, repeats int) ([]Run, error) {
	if repeats < 1 {
		repeats = 1
	}
	var out []Run
	for _, prov := range providers {
		for _, l := range scenarios {
			if Refused(prov, l) != "" {
				continue
			}
			variants, err := HostOSVariants(l.Scenario, l.Lab, prov)
			if err != nil {
				return nil, err
			}
			for _, v := range variants {
				for _, form := range l.Scenario.Forms {
					for k := 1; k <= repeats; k++ {
						out = append(out, Run{Scenario: l.Scenario, Lab: v.Lab, Provider: prov, Form: form, HostOS: v.Mode, Repeat: k, Repeats: repeats})
					}
				}
			}
		}
	}
	return out, nil
}

// Refusal is a scenario a provider does not run, and why.
type Refusal struct {
	Provider, Scenario, Why string
}

// NotRun are the scenarios each provider does not run, with the reason.
func NotRun(scenarios []Loaded, providers []*provider.Config) []Refusal {
	var out []Refusal
	for _, prov := range providers {
		for _, l := range scenarios {
			if why := Refused(prov, l); why != "" {
				out = append(out, Refusal{Provider: prov.Name, Scenario: l.Scenario.Name, Why: why})
			}
		}
	}
	return out
}

// Refused is why prov does not run l's scenario on its lab ("": it does).
func Refused(prov *provider.Config, l Loaded) string {
	if ok, why := prov.Runs(l.Scenario); !ok {
		return why
	}
	if !drivesBMCs(prov, l.Lab) {
		return fmt.Sprintf("lab %s has hosts without a BMC protocol provider %s drives (hosts.bmcProtocols %v)", l.Lab.Spec.Name, prov.Name, prov.Hosts.BMCProtocols)
	}
	if prov.Metal3Inventory() && l.Lab.Backend() == lab.BackendQEMU {
		return "Ironic boots hosts from a virtual-media ISO, which the qemu backend's VMs do not boot: Metal3's inventory runs on the test backend"
	}
	return ""
}

// drivesBMCs says whether the provider's inventory drives every host of
// the lab through a BMC protocol it speaks (hosts.bmcProtocols).
func drivesBMCs(prov *provider.Config, def *lab.Definition) bool {
	if !prov.Lab || len(prov.Hosts.BMCProtocols) == 0 {
		return true
	}
	for _, h := range def.Spec.Hosts {
		if !slices.ContainsFunc(prov.Hosts.BMCProtocols, func(p string) bool { return h.BMC.Serves(lab.BMCProtocol(p)) }) {
			return false
		}
	}
	return true
}

// HostOSVariant is one lab a scenario runs on.
type HostOSVariant struct {
	Mode string // "" for the lab file as it is
	Lab  *lab.Definition
}

// HostOSVariants are the labs a scenario runs on for prov: one per
// hostOS entry (the entry that is what the lab file says runs under the
// file's name), or the lab file alone when the scenario names none or the
// provider does not use the lab (its machines have no disks). On the qemu
// backend it is one run on A/B hosts.
func HostOSVariants(s *scenario.Scenario, def *lab.Definition, prov *provider.Config) ([]HostOSVariant, error) {
	if prov.Lab && def.Backend() == lab.BackendQEMU {
		// A VM's disk is A/B (sim/vm/diskimage): one run, on A/B hosts.
		if def.HostOSMode() == string(disk.AB) {
			return []HostOSVariant{{Lab: def}}, nil
		}
		v, err := def.WithHostOS(string(disk.AB))
		if err != nil {
			return nil, err
		}
		return []HostOSVariant{{Mode: string(disk.AB), Lab: v}}, nil
	}
	if len(s.HostOS) == 0 || !prov.Lab {
		return []HostOSVariant{{Lab: def}}, nil
	}
	var out []HostOSVariant
	for _, mode := range s.HostOS {
		if mode == def.HostOSMode() {
			out = append(out, HostOSVariant{Lab: def})
			continue
		}
		v, err := def.WithHostOS(mode)
		if err != nil {
			return nil, fmt.Errorf("%s: hostOS: %w", s.Name, err)
		}
		out = append(out, HostOSVariant{Mode: mode, Lab: v})
	}
	return out, nil
}

// Select keeps the runs whose labels match filter, a Ginkgo label
// expression as `make e2e GINKGO_LABELS=...` takes it (e.g. "in-place &&
// ostree", "inmemory || scale-in"); "" keeps every run. A bad expression
// is an error.
func Select(runs []Run, filter string) ([]Run, error) {
	if filter == "" {
		return runs, nil
	}
	match, err := types.ParseLabelFilter(filter)
	if err != nil {
		return nil, fmt.Errorf("label filter %q: %w", filter, err)
	}
	var out []Run
	for _, r := range runs {
		if match(r.Labels()) {
			out = append(out, r)
		}
	}
	return out, nil
}
