package rehearsal

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/specfile"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Plan is a site's upgrade as its operators mean to carry it out: which
// clusters, to what, in what order and batches, within what window; and
// how often to rehearse it, with which faults.
type Plan struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Export is the site's export folder (docs/REHEARSAL.md), relative
	// to the plan file.
	Export string `yaml:"export"`
	// Anonymise rehearses the site under generated names (--anonymise).
	Anonymise bool `yaml:"anonymise"`
	// Clusters are path.Match patterns of NAMESPACE/NAME: the clusters
	// the plan upgrades (default every one the lab can model).
	Clusters []string `yaml:"clusters"`
	// Targets give groups of clusters their release; a cluster no
	// target matches goes to the lab catalog's next version.
	Targets []PlanTarget `yaml:"targets"`
	Wave    PlanWave     `yaml:"wave"`
	// Window is the maintenance window the wave must fit, as the site's
	// clock runs (0: none).
	Window scenario.Duration `yaml:"window"`
	// Repeats is how many times the wave runs without a fault (default
	// 1); durations are spread over them.
	Repeats int `yaml:"repeats"`
	// Faults are run once each, after the repeats, each a wave of its
	// own with the fault in it (FaultKinds).
	Faults []string `yaml:"faults"`
	// Timing is the site's own hardware timings where it knows them
	// (postSeconds, bootSeconds, ...); the rest are the lab's defaults.
	Timing lab.Timing `yaml:"timing"`

	path string
}

// PlanTarget is the release a group of clusters upgrades to.
type PlanTarget struct {
	// Clusters are path.Match patterns of NAMESPACE/NAME ("retail/*").
	Clusters []string `yaml:"clusters"`
	Version  string   `yaml:"version"`
	// Image is an OS image of the lab's catalog carrying Version.
	Image string `yaml:"image"`
	// NICFirmware is the NVM firmware version (as HostFirmwareComponents
	// report it, "9.40") the group's i40e ports are flashed to before
	// the wave. The flash itself is not rehearsed.
	NICFirmware string `yaml:"nicFirmware"`
}

// PlanWave is how the upgrades go.
type PlanWave struct {
	// Batch is how many clusters upgrade at once; the next batch starts
	// when the last one has ended (0: all at once).
	Batch int `yaml:"batch"`
	// Order are path.Match patterns of NAMESPACE/NAME: clusters
	// matching the first go first, and so on; the rest last, in the
	// export's order.
	Order []string `yaml:"order"`
}

// The faults a plan can rehearse.
const (
	// FaultFlakyBMC: from the wave's start every BMC answers slowly and
	// fails a share of requests (Redfish 503s, IPMI datagrams lost).
	FaultFlakyBMC = "flaky-bmc"
	// FaultHostDoesNotReturn: the first host powered off in the wave
	// never powers on again (its power supply is dead).
	FaultHostDoesNotReturn = "host-does-not-return"
	// FaultBudgetNeverAllows: every application's budget keeps all its
	// replicas, so no eviction is ever allowed.
	FaultBudgetNeverAllows = "budget-never-allows"
)

// FaultKinds are the faults a plan can name.
var FaultKinds = []string{FaultFlakyBMC, FaultHostDoesNotReturn, FaultBudgetNeverAllows}

// LoadPlan reads and checks a plan file; an error names the file and
// the field.
func LoadPlan(file string) (*Plan, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p, err := ParsePlan(file, data)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(p.ExportDir()); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: export: %s is not a folder", file, p.ExportDir())
	}
	return p, nil
}

// ParsePlan decodes and checks a plan (name prefixes every error).
func ParsePlan(name string, data []byte) (*Plan, error) {
	p := &Plan{path: name}
	if err := specfile.Decode(name, data, p); err != nil {
		return nil, err
	}
	if problems := p.validate(); len(problems) > 0 {
		return nil, fmt.Errorf("%s: %s", name, strings.Join(problems, "; "))
	}
	if p.Repeats == 0 {
		p.Repeats = 1
	}
	return p, nil
}

// maxRepeats bounds a plan's repeats: each is a whole wave.
const maxRepeats = 20

func (p *Plan) validate() specfile.Problems {
	var pr specfile.Problems
	if p.APIVersion != "upgradelab.dev/v1alpha1" || p.Kind != "RehearsalPlan" {
		pr.Add("apiVersion/kind", "want upgradelab.dev/v1alpha1 RehearsalPlan, got %q %q", p.APIVersion, p.Kind)
	}
	if p.Export == "" {
		pr.Add("export", "the site's export folder is required")
	}
	checkPatterns(&pr, "clusters", p.Clusters)
	checkPatterns(&pr, "wave.order", p.Wave.Order)
	for i, t := range p.Targets {
		at := fmt.Sprintf("targets[%d]", i)
		if len(t.Clusters) == 0 {
			pr.Add(at+".clusters", "at least one pattern of NAMESPACE/NAME")
		}
		checkPatterns(&pr, at+".clusters", t.Clusters)
		if t.Version == "" && t.Image == "" && t.NICFirmware == "" {
			pr.Add(at, "names no version, image or nicFirmware")
		}
	}
	if p.Wave.Batch < 0 {
		pr.Add("wave.batch", "%d is negative (0 upgrades every cluster at once)", p.Wave.Batch)
	}
	if p.Window.Duration < 0 {
		pr.Add("window", "%s is negative", p.Window.Duration)
	}
	if p.Repeats < 0 || p.Repeats > maxRepeats {
		pr.Add("repeats", "%d is not between 1 and %d", p.Repeats, maxRepeats)
	}
	for i, f := range p.Faults {
		if !slices.Contains(FaultKinds, f) {
			pr.Add(fmt.Sprintf("faults[%d]", i), "%q is not one of %v", f, FaultKinds)
		}
	}
	if p.Timing.Negative() {
		pr.Add("timing", "durations and speeds must not be negative")
	}
	return pr
}

func checkPatterns(pr *specfile.Problems, field string, patterns []string) {
	for i, pat := range patterns {
		if _, err := path.Match(pat, ""); err != nil || pat == "" {
			pr.Add(fmt.Sprintf("%s[%d]", field, i), "%q is not a pattern of NAMESPACE/NAME (path.Match)", pat)
		}
	}
}

// ExportDir is the plan's export folder.
func (p *Plan) ExportDir() string {
	if filepath.IsAbs(p.Export) {
		return p.Export
	}
	return filepath.Join(filepath.Dir(p.path), p.Export)
}

// Path is the plan file's path.
func (p *Plan) Path() string { return p.path }

// Options are the import's options the plan's targets make: every
// target, so that a cluster's first match is its one target even when
// that target sets only the NIC firmware (its release is then the
// default).
func (p *Plan) Options() Options {
	o := Options{Anonymise: p.Anonymise}
	for _, t := range p.Targets {
		o.Targets = append(o.Targets, Target{Clusters: t.Clusters, To: t.Version, ToImage: t.Image})
	}
	return o
}

// matches says whether source (NAMESPACE/NAME) matches a pattern: a
// pattern with a slash matches NAMESPACE/NAME (path.Match), one without
// matches NAME alone, so "*" is every cluster and "store-*" every store.
func matches(patterns []string, source string) bool {
	_, name, _ := strings.Cut(source, "/")
	for _, pat := range patterns {
		against := source
		if !strings.Contains(pat, "/") {
			against = name
		}
		if ok, _ := path.Match(pat, against); ok {
			return true
		}
	}
	return false
}

// Apply makes the imported site the plan's: only its clusters, their
// ports at the NIC firmware the plan flashes, in the wave's order and
// batches, on hosts with the site's timings. cat finds the firmware.
func (p *Plan) Apply(s *Site, cat Catalogs) error {
	if len(p.Clusters) > 0 {
		var kept []*Cluster
		for _, c := range s.Clusters {
			if matches(p.Clusters, c.origin) {
				kept = append(kept, c)
				continue
			}
			s.Unmapped = append(s.Unmapped, Unmapped{Object: "Cluster " + cmp.Or(c.Source, c.Name), Field: "clusters", Reason: "not among the plan's clusters"})
		}
		if len(kept) == 0 {
			return fmt.Errorf("%s: clusters: %v match no cluster of the export", p.path, p.Clusters)
		}
		s.Clusters = kept
	}
	for i, t := range p.Targets {
		if t.NICFirmware == "" {
			continue
		}
		nvm, ok := cat.nvmOf(t.NICFirmware)
		if !ok {
			return fmt.Errorf("%s: targets[%d].nicFirmware: no NVM image of version %q in the lab's catalog", p.path, i, t.NICFirmware)
		}
		for _, c := range s.Clusters {
			if p.targetOf(c.origin) == i {
				flash(c, nvm)
			}
		}
	}
	slices.SortStableFunc(s.Clusters, func(a, b *Cluster) int { return p.rank(a.origin) - p.rank(b.origin) })
	s.Batch, s.Timing = p.Wave.Batch, p.Timing
	return nil
}

// rank is the index of the first wave.order pattern source matches
// (after every pattern when none does).
func (p *Plan) rank(source string) int {
	for i, pat := range p.Wave.Order {
		if matches([]string{pat}, source) {
			return i
		}
	}
	return len(p.Wave.Order)
}

// targetOf is the index of the first target whose patterns match source
// (-1: none): a cluster's one target, for its release and its firmware.
func (p *Plan) targetOf(source string) int {
	for i, t := range p.Targets {
		if matches(t.Clusters, source) {
			return i
		}
	}
	return -1
}

// CheckExport says whether every pattern of the plan names a cluster of
// the export: a pattern that matches none is a typo that would leave a
// group at the wrong release or out of the wave unnoticed.
func (p *Plan) CheckExport(x *Export) error {
	var sources []string
	for _, c := range x.Clusters {
		sources = append(sources, objKey(c.Namespace, c.Name))
	}
	var pr specfile.Problems
	field := func(name string, patterns []string) {
		for j, pat := range patterns {
			if !slices.ContainsFunc(sources, func(s string) bool { return matches([]string{pat}, s) }) {
				pr.Add(fmt.Sprintf("%s[%d]", name, j), "%q matches no cluster of the export (%s)", pat, strings.Join(sources, ", "))
			}
		}
	}
	field("clusters", p.Clusters)
	field("wave.order", p.Wave.Order)
	for i, t := range p.Targets {
		field(fmt.Sprintf("targets[%d].clusters", i), t.Clusters)
	}
	if len(pr) > 0 {
		return fmt.Errorf("%s: %s", p.path, strings.Join(pr, "; "))
	}
	return nil
}

// flash sets every i40e port of the cluster's hosts to the NVM image.
func flash(c *Cluster, nvm string) {
	for i := range c.Hosts {
		for j := range c.Hosts[i].NICs {
			c.Hosts[i].NICs[j].NVM = nvm
		}
	}
}

// nvmOf is the catalog's NVM image of a firmware version.
func (c Catalogs) nvmOf(firmware string) (string, bool) {
	for _, name := range slices.Sorted(maps.Keys(c.NVM)) {
		if c.NVM[name].Firmware == firmware {
			return name, true
		}
	}
	return "", false
}

// WithFault is the site with a fault that is a change of its inventory
// rather than an event: budget-never-allows keeps every replica.
func (s *Site) WithFault(fault string) {
	if fault != FaultBudgetNeverAllows {
		return
	}
	for _, c := range s.Clusters {
		if n := c.Workload.Replicas; n > 0 {
			c.Workload.Budget = scenario.Budget{MinAvailable: fmt.Sprint(n)}
		}
	}
}

// Waves are the plan's runs: its repeats without a fault, then one run
// per fault.
func (p *Plan) Waves() []Wave {
	var out []Wave
	for i := range p.Repeats {
		out = append(out, Wave{Name: fmt.Sprintf("repeat-%d", i+1)})
	}
	for _, f := range p.Faults {
		out = append(out, Wave{Name: "fault-" + f, Fault: f})
	}
	return out
}
