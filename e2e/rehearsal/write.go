package rehearsal

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Files are what Write wrote: the fleet file, and a lab file and a
// scenario file per cluster.
type Files struct {
	Fleet     string
	Labs      []string
	Scenarios []string
	Unmapped  string
}

// Write writes the site into dir: labs/CLUSTER.yaml (its hosts),
// scenarios/CLUSTER.yaml (its shape and upgrade), fleet.yaml (every
// cluster at once, the idle hosts counted) and unmapped.txt. fixtures is
// the repository's fixtures folder (the catalogs the lab files name).
func (s *Site) Write(dir, fixtures, name string) (Files, error) {
	var f Files
	if len(s.Clusters) == 0 {
		return f, fmt.Errorf("no cluster of the export could be mapped onto the lab:\n%s", s.unmappedText())
	}
	for _, sub := range []string{"labs", "scenarios"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return f, err
		}
	}
	// The lab files name the repository's catalogs: relative within the
	// repository, absolute from anywhere else.
	rel := fixtures
	if r, err := filepath.Rel(filepath.Join(dir, "labs"), fixtures); err == nil && inside(filepath.Dir(fixtures), dir) {
		rel = r
	}
	hosts := 0
	var kept []*Cluster
	for _, c := range s.Clusters {
		labPath, scPath := filepath.Join(dir, "labs", c.Name+".yaml"), filepath.Join(dir, "scenarios", c.Name+".yaml")
		lf := labFile(c, rel, name)
		if s.Timing != (lab.Timing{}) {
			lf.Timing = &s.Timing
		}
		if err := writeYAML(labPath, labHeader(c), lf); err != nil {
			return f, err
		}
		if err := writeYAML(scPath, scenarioHeader(c), scenarioFile(c)); err != nil {
			return f, err
		}
		// A cluster the lab's checks refuse (a shape CAPI would refuse,
		// say) is left out of the fleet with the reason.
		if _, _, err := plan.Load(scPath); err != nil {
			s.Unmapped = append(s.Unmapped, Unmapped{Object: "Cluster " + cmp.Or(c.Source, c.Name), Reason: "left out of the fleet: " + err.Error()})
			_ = os.Remove(scPath)
			_ = os.Remove(labPath)
			continue
		}
		kept = append(kept, c)
		f.Labs, f.Scenarios = append(f.Labs, labPath), append(f.Scenarios, scPath)
		hosts += len(c.Hosts)
	}
	if s.Clusters = kept; len(kept) == 0 {
		return f, fmt.Errorf("no cluster of the export could be mapped onto the lab:\n%s", s.unmappedText())
	}
	f.Fleet = filepath.Join(dir, "fleet.yaml")
	if err := writeYAML(f.Fleet, fmt.Sprintf("# Fleet %s: every cluster of the site on a copy of its own hosts, %d idle host(s) beside.\n", name, len(s.Idle)),
		fleetFile(s, name, hosts+len(s.Idle))); err != nil {
		return f, err
	}
	f.Unmapped = filepath.Join(dir, "unmapped.txt")
	return f, os.WriteFile(f.Unmapped, []byte(s.unmappedText()), 0o644)
}

func (s *Site) unmappedText() string {
	var b strings.Builder
	for _, u := range s.Unmapped {
		b.WriteString(u.String() + "\n")
	}
	return b.String()
}

func writeYAML(path, header string, v any) error {
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// The files' shapes: the fields a rehearsal sets, in the order the
// hand-written fixtures use.

type labOut struct {
	APIVersion    string       `yaml:"apiVersion"`
	Kind          string       `yaml:"kind"`
	Name          string       `yaml:"name"`
	Catalog       string       `yaml:"catalog"`
	NVMImages     string       `yaml:"nvmImages"`
	NICRules      string       `yaml:"nicRules"`
	RecoveryImage string       `yaml:"recoveryImage"`
	Timing        *lab.Timing  `yaml:"timing,omitempty"`
	Credentials   []credOut    `yaml:"credentials"`
	Networks      []networkOut `yaml:"networks"`
	Hosts         []hostOut    `yaml:"hosts"`
}

type credOut struct {
	Name     string `yaml:"name"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

type networkOut struct {
	Name string `yaml:"name"`
	CIDR string `yaml:"cidr"`
}

type hostOut struct {
	Name      string            `yaml:"name"`
	CPUs      int               `yaml:"cpus"`
	MemoryMiB int               `yaml:"memoryMiB"`
	DiskGiB   int               `yaml:"diskGiB"`
	Labels    map[string]string `yaml:"labels,omitempty"`
	BMC       bmcOut            `yaml:"bmc"`
	NICs      []nicOut          `yaml:"nics"`
}

type bmcOut struct {
	Credentials string            `yaml:"credentials"`
	Protocols   []lab.BMCProtocol `yaml:"protocols,omitempty,flow"`
}

type nicOut struct {
	Name    string `yaml:"name"`
	MAC     string `yaml:"mac"`
	Model   string `yaml:"model"`
	NVM     string `yaml:"nvm"`
	Network string `yaml:"network"`
}

func labHeader(c *Cluster) string {
	src := ""
	if c.Source != "" {
		src = " (" + c.Source + " in the export)"
	}
	return fmt.Sprintf("# Lab %s: the %d host(s) of cluster %s%s, %d of them spare; written by upgradelab rehearse import.\n",
		c.Name, len(c.Hosts), c.Name, src, c.Spares)
}

// labFile is the cluster's hosts as a lab file; its networks are named
// by their CIDR, its one BMC account generated.
func labFile(c *Cluster, fixtures, site string) labOut {
	out := labOut{APIVersion: "upgradelab.dev/v1alpha1", Kind: "Lab", Name: c.Name,
		Catalog: filepath.Join(fixtures, "images", "catalog.yaml"), NVMImages: filepath.Join(fixtures, "nic", "nvm-images.yaml"),
		NICRules: filepath.Join(fixtures, "nic", "i40e-rules.yaml"), RecoveryImage: "recovery-ubuntu-24.04",
		Credentials: []credOut{{Name: credentialName, Username: "admin", Password: "rehearsal-" + site}}}
	var nets []string
	for _, h := range c.Hosts {
		ho := hostOut{Name: h.Name, CPUs: h.CPUs, MemoryMiB: h.MemoryMiB, DiskGiB: h.DiskGiB, Labels: h.Labels,
			BMC: bmcOut{Credentials: h.BMC.Credentials, Protocols: h.BMC.Protocols}}
		for _, n := range h.NICs {
			ho.NICs = append(ho.NICs, nicOut{Name: n.Name, MAC: n.MAC, Model: n.Model, NVM: n.NVM, Network: networkName(n.Network)})
			if !slices.Contains(nets, n.Network) {
				nets = append(nets, n.Network)
			}
		}
		out.Hosts = append(out.Hosts, ho)
	}
	for _, cidr := range nets {
		out.Networks = append(out.Networks, networkOut{Name: networkName(cidr), CIDR: cidr})
	}
	return out
}

// networkName names a network after its CIDR ("net-10-0-3-0").
func networkName(cidr string) string {
	base, _, _ := strings.Cut(cidr, "/")
	return "net-" + strings.ReplaceAll(base, ".", "-")
}

type scenarioOut struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Lab         string            `yaml:"lab"`
	Forms       []scenario.Form   `yaml:"forms,flow"`
	Strategy    scenario.Strategy `yaml:"strategy"`
	Cluster     clusterOut        `yaml:"cluster"`
	From        releaseOut        `yaml:"from"`
	To          releaseOut        `yaml:"to"`
	Workload    *workloadOut      `yaml:"workload,omitempty"`
	Expect      *expectOut        `yaml:"expect,omitempty"`
}

type clusterOut struct {
	ControlPlane struct {
		Replicas int `yaml:"replicas"`
		MaxSurge int `yaml:"maxSurge"`
	} `yaml:"controlPlane"`
	Workers *struct {
		Replicas       int `yaml:"replicas"`
		MaxSurge       int `yaml:"maxSurge"`
		MaxUnavailable int `yaml:"maxUnavailable"`
	} `yaml:"workers,omitempty"`
}

type releaseOut struct {
	Version string `yaml:"version"`
	Image   string `yaml:"image"`
}

type workloadOut struct {
	Replicas         int        `yaml:"replicas,omitempty"`
	Budget           *budgetOut `yaml:"budget,omitempty"`
	NodeDrainTimeout string     `yaml:"nodeDrainTimeout,omitempty"`
}

type budgetOut struct {
	MinAvailable   string `yaml:"minAvailable,omitempty"`
	MaxUnavailable string `yaml:"maxUnavailable,omitempty"`
	None           bool   `yaml:"none,omitempty"`
}

type expectOut struct {
	SparesLeft *int `yaml:"sparesLeft,omitempty"`
}

func scenarioHeader(c *Cluster) string {
	return fmt.Sprintf("# Scenario %s: the site's cluster, %s from %s to %s; written by upgradelab rehearse import.\n", c.Name, c.Strategy, c.From.Version, c.To.Version)
}

func scenarioFile(c *Cluster) scenarioOut {
	out := scenarioOut{Name: c.Name, Description: fmt.Sprintf("Cluster %s of the site, as its export describes it.", c.Name),
		Lab: filepath.Join("..", "labs", c.Name+".yaml"), Forms: []scenario.Form{scenario.Plain, scenario.ClusterClass}, Strategy: c.Strategy,
		From: releaseOut{c.From.Version, c.From.Image}, To: releaseOut{c.To.Version, c.To.Image}}
	out.Cluster.ControlPlane.Replicas, out.Cluster.ControlPlane.MaxSurge = c.ControlPlane.Replicas, c.ControlPlane.MaxSurge
	if c.Workers.Replicas > 0 {
		out.Cluster.Workers = &struct {
			Replicas       int `yaml:"replicas"`
			MaxSurge       int `yaml:"maxSurge"`
			MaxUnavailable int `yaml:"maxUnavailable"`
		}{c.Workers.Replicas, c.Workers.MaxSurge, c.Workers.MaxUnavailable}
	}
	w := c.Workload
	if w.Replicas > 0 || w.NodeDrainTimeout.Duration > 0 {
		out.Workload = &workloadOut{Replicas: w.Replicas}
		if w.Budget != (scenario.Budget{}) {
			out.Workload.Budget = &budgetOut{MinAvailable: w.Budget.MinAvailable, MaxUnavailable: w.Budget.MaxUnavailable, None: w.Budget.None}
		}
		if d := w.NodeDrainTimeout.Duration; d > 0 {
			out.Workload.NodeDrainTimeout = d.String()
		}
	}
	if c.Spares > 0 {
		out.Expect = &expectOut{SparesLeft: &c.Spares}
	}
	return out
}

type fleetOut struct {
	APIVersion string              `yaml:"apiVersion"`
	Kind       string              `yaml:"kind"`
	Name       string              `yaml:"name"`
	Hosts      int                 `yaml:"hosts"`
	Form       scenario.Form       `yaml:"form"`
	Wave       struct{ Batch int } `yaml:"wave"`
	Clusters   []fleetGroupOut     `yaml:"clusters"`
}

type fleetGroupOut struct {
	Name     string `yaml:"name"`
	Scenario string `yaml:"scenario"`
	Count    int    `yaml:"count"`
}

func fleetFile(s *Site, name string, hosts int) fleetOut {
	out := fleetOut{APIVersion: "upgradelab.dev/v1alpha1", Kind: "Fleet", Name: name, Hosts: hosts, Form: s.Form()}
	out.Wave.Batch = s.Batch
	for _, c := range s.Clusters {
		out.Clusters = append(out.Clusters, fleetGroupOut{Name: c.Name, Scenario: filepath.Join("scenarios", c.Name+".yaml"), Count: 1})
	}
	return out
}

// Form is the form most of the site's clusters are in (ClusterClass on a
// tie): a fleet describes every cluster one way.
func (s *Site) Form() scenario.Form {
	n := 0
	for _, c := range s.Clusters {
		if c.Form == scenario.ClusterClass {
			n++
		}
	}
	if 2*n >= len(s.Clusters) {
		return scenario.ClusterClass
	}
	return scenario.Plain
}

// inside says whether path is root or under it.
func inside(root, path string) bool {
	r, err := filepath.Rel(root, path)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../")
}

// WriteFailurePoints writes the failure points as JSON.
func WriteFailurePoints(path string, points []FailurePoint) error {
	b, err := json.MarshalIndent(points, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
