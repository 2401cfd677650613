package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/specfile"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// File is a fleet file.
type File struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
	// Hosts is the lab's size: at least what the clusters take; the rest
	// are idle hosts (copies of the first cluster's first host) enrolled
	// nowhere. 0: exactly what the clusters take.
	Hosts int `yaml:"hosts"`
	// Form is how every cluster is described to CAPI (default
	// clusterclass: a version change of the topology upgrades it).
	Form      scenario.Form `yaml:"form"`
	Provision Provision     `yaml:"provision"`
	Wave      Wave          `yaml:"wave"`
	Clusters  []Group       `yaml:"clusters"`

	path string
}

// Provision is how the clusters come in before the wave.
type Provision struct {
	// Concurrent is how many clusters provision at once: the next is
	// created when one of them is provisioned (or stopped), as a GitOps
	// controller or a pipeline with bounded concurrency brings a fleet
	// in. 0: every cluster at once. Each cluster's provisioning bound
	// counts from its own start, not from the fleet's.
	Concurrent int `yaml:"concurrent"`
}

// Wave is how the upgrades go once every cluster is provisioned.
type Wave struct {
	// Batch is how many clusters upgrade at once; the next batch starts
	// when every cluster of the one before has ended. 0: all at once.
	Batch int `yaml:"batch"`
}

// Group is Count clusters of one scenario, named NAME-0, NAME-1, ...
type Group struct {
	Name     string `yaml:"name"`
	Scenario string `yaml:"scenario"`
	Count    int    `yaml:"count"`
	// Cluster, when set, replaces the scenario's cluster shape (checked
	// against its strategy and its lab as the scenario file would be).
	Cluster *scenario.Cluster `yaml:"cluster"`
}

// Fleet is a fleet file with its scenarios loaded and its lab composed.
type Fleet struct {
	File     *File
	Lab      *lab.Definition
	Clusters []Cluster
}

// Cluster is one cluster of the fleet.
type Cluster struct {
	Name     string
	Scenario *scenario.Scenario
	// Hosts are its lab hosts (PREFIX-HOST in the fleet's lab).
	Hosts []string
}

// Strategies are the strategies the fleet's clusters use, each once.
func (f *Fleet) Strategies() []scenario.Strategy {
	var out []scenario.Strategy
	for _, c := range f.Clusters {
		if !slices.Contains(out, c.Scenario.Strategy) {
			out = append(out, c.Scenario.Strategy)
		}
	}
	return out
}

// Parse reads a fleet file's content without loading what it names;
// name prefixes every error.
func Parse(name string, data []byte) (*File, error) {
	f := &File{}
	if err := specfile.Decode(name, data, f); err != nil {
		return nil, err
	}
	if f.Form == "" {
		f.Form = scenario.ClusterClass
	}
	if errs := f.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	f.path = name
	return f, nil
}

// maxClusters bounds a fleet (each cluster is a namespace, a workload API
// server and its hosts' agents and BMCs).
const maxClusters = 1000

func (f *File) validate() []string {
	var p specfile.Problems
	if f.APIVersion != "upgradelab.dev/v1alpha1" || f.Kind != "Fleet" {
		p.Add("apiVersion/kind", "want upgradelab.dev/v1alpha1 Fleet, got %q %q", f.APIVersion, f.Kind)
	}
	if !scenario.ValidName(f.Name) || len(f.Name) > 40 {
		p.Add("name", "%q must be lower-case letters, digits and dashes (at most 40)", f.Name)
	}
	if f.Hosts < 0 {
		p.Add("hosts", "%d is negative", f.Hosts)
	}
	if f.Form != scenario.Plain && f.Form != scenario.ClusterClass {
		p.Add("form", "%q is not plain or clusterclass", f.Form)
	}
	if f.Provision.Concurrent < 0 {
		p.Add("provision.concurrent", "%d is negative (0 provisions every cluster at once)", f.Provision.Concurrent)
	}
	if f.Wave.Batch < 0 {
		p.Add("wave.batch", "%d is negative (0 upgrades every cluster at once)", f.Wave.Batch)
	}
	if len(f.Clusters) == 0 {
		p.Add("clusters", "at least one group of clusters")
	}
	total := 0
	names := map[string]bool{}
	for i, g := range f.Clusters {
		at := fmt.Sprintf("clusters[%d]", i)
		// A host is named GROUP-N-HOST: a DNS label, so the group's name
		// leaves room for the index and the host's own name.
		if !scenario.ValidName(g.Name) || len(g.Name) > 20 {
			p.Add(at+".name", "%q must be lower-case letters, digits and dashes (at most 20)", g.Name)
		} else if names[g.Name] {
			p.Add(at+".name", "%q is another group's name too", g.Name)
		}
		names[g.Name] = true
		if g.Scenario == "" {
			p.Add(at+".scenario", "required (a scenarios/ file)")
		}
		if g.Count < 1 {
			p.Add(at+".count", "%d: at least 1", g.Count)
		}
		total += max(g.Count, 0)
	}
	if total > maxClusters {
		p.Add("clusters", "%d clusters, at most %d", total, maxClusters)
	}
	return p
}

// Load reads a fleet file, loads each group's scenario and lab, checks
// every cluster's shape, and composes the fleet's lab. Every error names
// the fleet file and the field.
func Load(path string) (*Fleet, error) {
	file, err := read(path)
	if err != nil {
		return nil, err
	}
	return file.load()
}

// read parses the fleet file at path.
func read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

func (f *File) load() (*Fleet, error) {
	fl := &Fleet{File: f}
	var parts []lab.Part
	for i, g := range f.Clusters {
		at := fmt.Sprintf("%s: clusters[%d]", f.path, i)
		sc, def, err := plan.Load(f.resolve(g.Scenario))
		if err != nil {
			return nil, fmt.Errorf("%s.scenario: %w", at, err)
		}
		if !slices.Contains(sc.Forms, f.Form) {
			return nil, fmt.Errorf("%s.scenario: %s runs in %v, not in the fleet's form %s", at, sc.Name, sc.Forms, f.Form)
		}
		if len(sc.Faults) > 0 {
			return nil, fmt.Errorf("%s.scenario: %s injects faults, which act on a whole plane or lab; a fleet runs fault-free scenarios", at, sc.Name)
		}
		if def.Backend() != lab.BackendTest {
			return nil, fmt.Errorf("%s.scenario: %s's lab is on the %s backend; a fleet's lab is modelled (backend test)", at, sc.Name, def.Backend())
		}
		if g.Cluster != nil {
			if sc, err = plan.WithCluster(sc, *g.Cluster, def); err != nil {
				return nil, fmt.Errorf("%s.cluster: %w", at, err)
			}
		}
		for n := range g.Count {
			c := Cluster{Name: fmt.Sprintf("%s-%d", g.Name, n), Scenario: sc}
			for _, h := range def.Spec.Hosts {
				c.Hosts = append(c.Hosts, c.Name+"-"+h.Name)
			}
			fl.Clusters = append(fl.Clusters, c)
			parts = append(parts, lab.Part{Prefix: c.Name, Def: def})
		}
	}
	taken := 0
	for _, c := range fl.Clusters {
		taken += len(c.Hosts)
	}
	if f.Hosts > 0 && f.Hosts < taken {
		return nil, fmt.Errorf("%s: hosts: %d, but the clusters take %d (each cluster has a copy of its scenario's lab)", f.path, f.Hosts, taken)
	}
	if idle := f.Hosts - taken; idle > 0 {
		parts = append(parts, lab.Part{Prefix: "idle", Def: idleHosts(parts[0].Def, idle)})
	}
	var err error
	if fl.Lab, err = lab.Compose(f.Name, parts); err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return fl, nil
}

// resolve is a path of the fleet file, against the file's folder.
func (f *File) resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(f.path), p)
}

// idleHosts is def with n copies of its first host (host-0000 ...), for
// Compose to number and address.
func idleHosts(def *lab.Definition, n int) *lab.Definition {
	spec := *def.Spec
	spec.Hosts = make([]lab.HostSpec, n)
	for i := range spec.Hosts {
		h := def.Spec.Hosts[0]
		h.Name = fmt.Sprintf("host-%04d", i)
		spec.Hosts[i] = h
	}
	out := *def
	out.Spec = &spec
	return &out
}
