package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/specfile"
)

// Config is one fixtures/providers file.
type Config struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Lab: the provider drives the lab's hosts (enrolled as BareMetalHosts
	// through their BMCs, images from the lab's image server). Without it
	// the provider brings its own machines and the rules about hosts,
	// their disks and persistent data are reported as not applicable.
	Lab bool `yaml:"lab"`
	// Hosts is the provider's vocabulary on the lab's BareMetalHosts.
	Hosts    Hosts     `yaml:"hosts"`
	Managers []Manager `yaml:"managers"`
	// SingleNodeAnnotation is put on a one-replica control plane updated
	// in place (its KubeadmControlPlane, or the ClusterClass topology's
	// control-plane metadata) with the value "true", to opt it into the
	// provider's single-node handling; "" when the provider has none.
	SingleNodeAnnotation string `yaml:"singleNodeAnnotation"`
	// Templates is a folder (relative to this file) with cluster.yaml and
	// machine-templates.yaml (the plain form) and clusterclass.yaml and
	// cluster-topology.yaml (the ClusterClass form); see CONFORMANCE.md for
	// the variables the runner gives them.
	Templates string `yaml:"clusterTemplates"`
	// Strategies the provider supports; scenarios of other strategies are
	// not run against it.
	Strategies []scenario.Strategy `yaml:"strategies"`
	// Unsupported says, for a strategy the provider does not support,
	// why: the plan gives it as the reason the strategy's scenarios do
	// not run.
	Unsupported map[scenario.Strategy]string `yaml:"unsupported"`
	// Variables are added to every template's variables.
	Variables map[string]string `yaml:"variables"`
	Intervals Intervals         `yaml:"intervals"`

	path string
}

// Hosts is how the harness reads the BareMetalHosts of a lab provider:
// the labels and annotations the provider puts on them. They are the
// provider's own names, so they are settings, not upgradelab's.
type Hosts struct {
	// SpareLabel marks a host the provider keeps free for the next surge
	// machine (any value but ""); spares-left counts them, and is not
	// applicable without it.
	SpareLabel string `yaml:"spareLabel"`
	// PoolLabel names the registration pool of a host that registered
	// itself (reset runs find the pool's hosts by it). Required for the
	// reset strategy.
	PoolLabel string `yaml:"poolLabel"`
	// HostnameAnnotation holds the hostname a registered host reported:
	// the lab host behind the BareMetalHost. Without it a BareMetalHost is
	// the lab host of its own name.
	HostnameAnnotation string `yaml:"hostnameAnnotation"`
	// BMCProtocols are the BMC protocols the inventory drives hosts
	// through (redfish, ipmi); a lab with a host that serves none of them
	// is no run of the provider. Empty: any.
	BMCProtocols []string `yaml:"bmcProtocols"`
}

// Intervals bound the waits of a run (each within the scenario's
// timeout), in wall time at the suite's time scale: a run at a slower
// scale grows them in proportion.
type Intervals struct {
	// Provision: the cluster at the from-version, every Machine up to date.
	Provision scenario.Duration `yaml:"provision"`
	// Upgrade: from the upgrade step to every Machine up to date.
	Upgrade scenario.Duration `yaml:"upgrade"`
}

// Manager is one process beside CAPI's managers.
type Manager struct {
	Name string `yaml:"name"`
	// Reference is a manager the harness builds and wires itself:
	// "baremetal" (the provider), "inventory" (its
	// BareMetalHost inventory alone, beside a provider of the config's
	// own that consumes it), "metal3" (Metal3's own inventory instead:
	// baremetal-operator on the lab's Ironic, e2e/bmo and e2e/ironic),
	// "capm3" (Metal3's infrastructure provider, built from its upstream
	// source, e2e/capm3) or "inplace" (the extension).
	Reference string `yaml:"reference"`
	// Package is a main package, built from one of:
	//   - Module alone: the version this repository's go.mod pins;
	//   - Module and Version: that version, in a wrapper module of its
	//     own (the module's own go.mod decides every dependency; ours is
	//     not involved);
	//   - Checkout: a local checkout (relative to this file), built there
	//     with its own go.mod.
	// A module build is cached per module version; a checkout is built
	// again on every suite (Go's build cache makes an unchanged one a
	// link). Config is then relative to the module's or checkout's folder.
	Module   string `yaml:"module"`
	Version  string `yaml:"version"`
	Checkout string `yaml:"checkout"`
	Package  string `yaml:"package"`
	// Binary is a prebuilt executable, relative to this file.
	Binary string `yaml:"binary"`
	// Config is a folder in kubebuilder's layout: crd/bases (with
	// crd/kustomization.yaml's labels) and webhook/manifests.yaml.
	Config string `yaml:"config"`
	// FeatureGates: built on CAPI's manager scaffolding, takes CAPI's
	// --feature-gates.
	FeatureGates bool `yaml:"featureGates"`
	// RuntimeExtension: serves Runtime SDK hooks (an ExtensionConfig is
	// registered for it, with Settings as its spec.settings: what CAPI
	// passes to every hook call).
	RuntimeExtension bool              `yaml:"runtimeExtension"`
	Settings         map[string]string `yaml:"settings"`
	// NamespaceLabels: CAPI calls the runtime extension only about
	// namespaces with these labels (its ExtensionConfig's
	// namespaceSelector; the runs label their namespaces with them).
	NamespaceLabels map[string]string `yaml:"namespaceLabels"`
	Env             map[string]string `yaml:"env"`
	Args            []string          `yaml:"args"`
	// OnlyFor limits it to runs of these strategies (default: every run).
	OnlyFor []scenario.Strategy `yaml:"onlyFor"`
	// FixedPorts are ports the manager binds whatever its flags say
	// (CAPD's in-memory backend: its debug server on 19000). Two planes
	// with such a manager cannot run at once on one machine: a plane
	// holds these ports machine-wide while it runs, and the e2e suite
	// runs the provider's runs together on one plane
	// (runner.Together).
	FixedPorts []int `yaml:"fixedPorts"`
}

// qualifiedKey is a Kubernetes label or annotation key with a prefix.
var qualifiedKey = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// moduleVersion is a semantic version as Go modules write it.
var moduleVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// References are the managers the harness knows how to wire to the lab:
// upgradelab's provider (baremetal), its BareMetalHost inventory alone
// (inventory: the host controller and callback endpoint, for a provider
// of the config's own that consumes the lab's BareMetalHosts, as CAPM3
// does), Metal3's inventory (metal3: baremetal-operator and Ironic, for
// the same kind of provider), Metal3's provider on it (capm3), and the
// in-place extension (inplace).
var References = []string{"baremetal", "inventory", "metal3", "capm3", "inplace"}

// capiProcesses are the processes of every plane whatever the provider:
// names a provider's manager cannot take and faults can always restart.
var capiProcesses = []string{"apiserver", "capi", "kcp", "cabpk"}

// TemplateFiles are the files every clusterTemplates folder holds.
var TemplateFiles = []string{"cluster.yaml", "machine-templates.yaml", "clusterclass.yaml", "cluster-topology.yaml"}

// Parse reads and validates a config's content; name is used in errors.
func Parse(name string, data []byte) (*Config, error) {
	c := &Config{}
	if err := specfile.Decode(name, data, c); err != nil {
		return nil, err
	}
	if c.Intervals.Provision.Duration == 0 {
		c.Intervals.Provision.Duration = 5 * time.Minute
	}
	if c.Intervals.Upgrade.Duration == 0 {
		c.Intervals.Upgrade.Duration = 10 * time.Minute
	}
	if errs := c.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	return c, nil
}

// validate lists everything wrong with c, field by field.
func (c *Config) validate() []string {
	var p specfile.Problems
	c.validateStrategies(&p)
	c.validateHosts(&p)
	c.validateManagers(&p)
	if slices.Contains(c.Strategies, scenario.InPlace) && !c.hasExtension() {
		p.Add("strategies", "in-place needs a manager with runtimeExtension: true (CAPI calls its in-place hooks)")
	}
	if c.Intervals.Provision.Duration < 0 || c.Intervals.Upgrade.Duration < 0 {
		p.Add("intervals", "must not be negative")
	}
	return p
}

// validateStrategies checks the name, the templates and the strategies
// with what each needs.
func (c *Config) validateStrategies(p *specfile.Problems) {
	if !scenario.ValidName(c.Name) || len(c.Name) > 30 {
		p.Add("name", "%q must be lower-case letters, digits and dashes (at most 30)", c.Name)
	}
	if c.Templates == "" {
		p.Add("clusterTemplates", "required (a folder with %s)", strings.Join(TemplateFiles, ", "))
	}
	if len(c.Strategies) == 0 {
		p.Add("strategies", "required (some of in-place, scale-in, rolling, reset)")
	}
	for i, s := range c.Strategies {
		if !slices.Contains(scenario.Strategies, s) {
			p.Add(fmt.Sprintf("strategies[%d]", i), "%q is not in-place, scale-in, rolling or reset", s)
		}
		if s == scenario.Reset && !c.Lab {
			p.Add(fmt.Sprintf("strategies[%d]", i), "reset needs the lab (hosts that reset and register themselves)")
		}
		if s == scenario.Reset && c.Lab && c.Hosts.PoolLabel == "" {
			p.Add("hosts.poolLabel", "required with the reset strategy (the label of hosts that registered into a pool)")
		}
	}
	for s, why := range c.Unsupported {
		switch {
		case !slices.Contains(scenario.Strategies, s):
			p.Add("unsupported."+string(s), "%q is not in-place, scale-in, rolling or reset", s)
		case slices.Contains(c.Strategies, s):
			p.Add("unsupported."+string(s), "%s is in strategies: a strategy is supported or not", s)
		case strings.TrimSpace(why) == "":
			p.Add("unsupported."+string(s), "say why the provider does not support %s", s)
		}
	}
}

// validateHosts checks the lab's host settings and the label and
// annotation keys.
func (c *Config) validateHosts(p *specfile.Problems) {
	if !c.Lab && (c.Hosts.SpareLabel != "" || c.Hosts.PoolLabel != "" || c.Hosts.HostnameAnnotation != "" || len(c.Hosts.BMCProtocols) > 0) {
		p.Add("hosts", "only for a provider on the lab (lab: true)")
	}
	for i, proto := range c.Hosts.BMCProtocols {
		if proto != "redfish" && proto != "ipmi" {
			p.Add(fmt.Sprintf("hosts.bmcProtocols[%d]", i), "%q is not redfish or ipmi", proto)
		}
	}
	for _, k := range []struct{ field, value string }{{"hosts.spareLabel", c.Hosts.SpareLabel}, {"hosts.poolLabel", c.Hosts.PoolLabel},
		{"hosts.hostnameAnnotation", c.Hosts.HostnameAnnotation}, {"singleNodeAnnotation", c.SingleNodeAnnotation}} {
		if k.value != "" && !qualifiedKey.MatchString(k.value) {
			p.Add(k.field, "%q is not a label or annotation key (prefix/name)", k.value)
		}
	}
}

// validateManagers checks each manager: a unique name, one way to get
// its binary, and settings only where they apply.
func (c *Config) validateManagers(p *specfile.Problems) {
	if len(c.Managers) == 0 {
		p.Add("managers", "required (at least the infrastructure provider's manager)")
	}
	seen := map[string]bool{}
	refs := map[string]bool{}
	for i, m := range c.Managers {
		field := fmt.Sprintf("managers[%d]", i)
		c.validateManagerIdentity(p, field, m, seen, refs)
		c.validateManagerBuild(p, field, m)
	}
	if refs["capm3"] && !refs["metal3"] && !refs["inventory"] {
		p.Add("managers", "capm3 consumes the lab's BareMetalHosts: add a manager with reference metal3 (or inventory) that keeps them")
	}
}

// validateManagerIdentity checks a manager's name and kind (reference,
// package or binary) against those before it, recorded in seen and refs.
func (c *Config) validateManagerIdentity(p *specfile.Problems, field string, m Manager, seen, refs map[string]bool) {
	if !scenario.ValidName(m.Name) || slices.Contains(capiProcesses, m.Name) {
		p.Add(field+".name", "%q must be lower-case letters, digits and dashes, and not one of %v", m.Name, capiProcesses)
	}
	if seen[m.Name] {
		p.Add(field+".name", "%q appears twice", m.Name)
	}
	seen[m.Name] = true
	kinds := 0
	for _, set := range []bool{m.Reference != "", m.Package != "", m.Binary != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		p.Add(field, "give exactly one of reference, package (with module or checkout) and binary")
	}
	if m.Reference != "" && !slices.Contains(References, m.Reference) {
		p.Add(field+".reference", "%q is not one of %v", m.Reference, References)
	}
	if m.Reference != "" && !c.Lab {
		p.Add(field+".reference", "upgradelab's own managers drive the lab: set lab: true")
	}
	inventories := map[string]bool{"baremetal": true, "inventory": true, "metal3": true}
	for other := range refs {
		if inventories[m.Reference] && inventories[other] && other != m.Reference {
			p.Add(field+".reference", "%s and %s both keep the lab's BareMetalHosts: give one of baremetal, inventory and metal3", other, m.Reference)
		}
	}
	refs[m.Reference] = true
}

// validateManagerBuild checks how a manager is built and started: module
// or checkout, version, environment, strategies, ports and extension
// settings.
func (c *Config) validateManagerBuild(p *specfile.Problems, field string, m Manager) {
	switch {
	case m.Package != "" && m.Module == "" && m.Checkout == "":
		p.Add(field+".module", "required with package (the Go module that holds it), or checkout")
	case m.Module != "" && m.Checkout != "":
		p.Add(field+".checkout", "give module (and version) or checkout, not both")
	case m.Version != "" && m.Module == "":
		p.Add(field+".version", "only with module")
	case m.Version != "" && !moduleVersion.MatchString(m.Version):
		p.Add(field+".version", "%q is not a module version (v1.2.3)", m.Version)
	case (m.Module != "" || m.Checkout != "") && m.Package == "":
		p.Add(field+".package", "required with module or checkout (the main package to build)")
	}
	for k := range m.Env {
		if k == "" || strings.ContainsAny(k, "= ") {
			p.Add(field+".env", "%q is not a variable name", k)
		}
	}
	for j, s := range m.OnlyFor {
		if !slices.Contains(c.Strategies, s) {
			p.Add(fmt.Sprintf("%s.onlyFor[%d]", field, j), "%q is not one of the provider's strategies %v", s, c.Strategies)
		}
	}
	for j, port := range m.FixedPorts {
		if port < 1 || port > 65535 {
			p.Add(fmt.Sprintf("%s.fixedPorts[%d]", field, j), "%d is not a port (1-65535)", port)
		}
	}
	if len(m.Settings) > 0 && !m.RuntimeExtension {
		p.Add(field+".settings", "only a runtimeExtension has settings (they go to its ExtensionConfig)")
	}
	if len(m.NamespaceLabels) > 0 && !m.RuntimeExtension {
		p.Add(field+".namespaceLabels", "only a runtimeExtension has namespaceLabels (they select the namespaces CAPI calls it about)")
	}
}

// hasExtension says whether a manager is a Runtime Extension, which
// in-place upgrades need.
func (c *Config) hasExtension() bool {
	return slices.ContainsFunc(c.Managers, func(m Manager) bool { return m.RuntimeExtension || m.Reference == "inplace" })
}

// Metal3Inventory says whether Metal3's own inventory (baremetal-operator
// and Ironic) keeps the lab's hosts.
func (c *Config) Metal3Inventory() bool {
	return slices.ContainsFunc(c.Managers, func(m Manager) bool { return m.Reference == "metal3" })
}

// FixedPorts are the fixed ports of every manager of the provider's (see
// Manager.FixedPorts): when there are any, its runs must not overlap.
func (c *Config) FixedPorts() []int {
	var ports []int
	for _, m := range c.Managers {
		ports = append(ports, m.FixedPorts...)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// Load reads a config file and checks that its template folder holds
// every template.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	c.path = path
	var missing []string
	for _, f := range TemplateFiles {
		if _, err := os.Stat(filepath.Join(c.TemplatesDir(), f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: clusterTemplates: %s lacks %s", path, c.TemplatesDir(), strings.Join(missing, ", "))
	}
	return c, nil
}

// Path is the file the config was loaded from.
func (c *Config) Path() string { return c.path }

// TemplatesDir is the template folder, resolved against the file's folder.
func (c *Config) TemplatesDir() string { return c.resolve(c.Templates) }

func (c *Config) resolve(p string) string {
	if filepath.IsAbs(p) || c.path == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.path), p)
}

// Supports says whether the provider runs scenarios of strategy s.
func (c *Config) Supports(s scenario.Strategy) bool { return slices.Contains(c.Strategies, s) }

// ManagersFor are the managers a run of strategy s starts.
func (c *Config) ManagersFor(s scenario.Strategy) []Manager {
	var out []Manager
	for _, m := range c.Managers {
		if len(m.OnlyFor) == 0 || slices.Contains(m.OnlyFor, s) {
			out = append(out, m)
		}
	}
	return out
}

// Runs says whether a scenario can run against the provider, and if not,
// why: its strategy is not supported, or a fault acts on something the
// provider does not have (BMCs without the lab, a manager it does not run).
func (c *Config) Runs(s *scenario.Scenario) (bool, string) {
	if c.Metal3Inventory() && s.Strategy == scenario.Reset {
		return false, "strategy reset registers hosts without a BMC into a pool, and baremetal-operator keeps only hosts it reaches through a BMC " +
			"(a BareMetalHost without one stays unmanaged); on Metal3 a reused host is deprovisioned, cleaned and provisioned again, as scale-in and rolling do"
	}
	if !c.Supports(s.Strategy) {
		why := fmt.Sprintf("provider %s does not support strategy %s (its strategies: %v)", c.Name, s.Strategy, c.Strategies)
		if because := c.Unsupported[s.Strategy]; because != "" {
			why += ": " + because
		}
		return false, why
	}
	if s.NeedsLab && !c.Lab {
		return false, fmt.Sprintf("the scenario is about the lab's hardware, which provider %s does not use", c.Name)
	}
	running := slices.Clone(capiProcesses)
	for _, m := range c.ManagersFor(s.Strategy) {
		running = append(running, m.Name)
	}
	if s.Workload.NodeDrainTimeout.Duration > 0 && !c.Lab {
		// The budget and the drain it blocks need pods, which only the
		// lab's workload clusters run.
		return false, fmt.Sprintf("the scenario's workload (a budget under nodeDrainTimeout) needs pods, which provider %s's workload clusters do not run", c.Name)
	}
	for _, f := range s.Faults {
		if (f.When.LabEvent != "" || f.PowerLoss != nil || f.AgentCrash != nil) && !c.Lab {
			return false, fmt.Sprintf("fault %s waits for a lab event or acts on a lab host, and provider %s does not use the lab", f.Name, c.Name)
		}
		if f.BMC != nil && !c.Lab {
			return false, fmt.Sprintf("fault %s acts on BMCs, which provider %s does not use", f.Name, c.Name)
		}
		if f.Restart != "" && !slices.Contains(running, f.Restart) {
			return false, fmt.Sprintf("fault %s restarts %s, which does not run for provider %s (running: %v)", f.Name, f.Restart, c.Name, running)
		}
	}
	return true, ""
}
