package rehearsal

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// Catalogs are what the lab can run: the OS images (by Kubernetes
// version) and the NIC NVM images (by firmware version).
type Catalogs struct {
	Images *image.Catalog
	NVM    nic.Catalog
	// Rules are the lab's i40e rules: what the driver does with an NVM.
	Rules *nic.Rules
}

// Options say how an export becomes a site.
type Options struct {
	// Anonymise renames hosts (host-01, ...), clusters (cluster-01, ...)
	// and networks, and gives every port a generated MAC.
	Anonymise bool
	// To is the Kubernetes version each cluster is upgraded to; empty:
	// the catalog's next version above the cluster's.
	To string
	// ToImage is the OS image each cluster is upgraded to (a catalog
	// name; its Kubernetes version is To's); empty: the catalog's plainest
	// image of To.
	ToImage string
	// Targets name, for the clusters they match, a version and an image
	// other than To and ToImage (a plan's per-group targets); the first
	// match wins.
	Targets []Target
}

// Target is the release a group of clusters upgrades to.
type Target struct {
	// Clusters are path.Match patterns of NAMESPACE/NAME in the export
	// ("retail/*").
	Clusters []string
	To       string
	ToImage  string
}

// target is the version and image cluster source (NAMESPACE/NAME)
// upgrades to: its first matching Target's, else To and ToImage.
func (o Options) target(source string) (to, toImage string) {
	for _, t := range o.Targets {
		if matches(t.Clusters, source) {
			return t.To, t.ToImage
		}
	}
	return o.To, o.ToImage
}

// Check says whether the target the options name is in the lab's
// catalog: ToImage an OS image, To the Kubernetes version it carries.
// A bad target is the command line's mistake, refused once rather than
// listed against every cluster.
func (o Options) Check(cat Catalogs) error {
	if err := checkTarget(cat, "--to-image", "--to", o.To, o.ToImage); err != nil {
		return err
	}
	for i, t := range o.Targets {
		at := fmt.Sprintf("targets[%d]", i)
		if err := checkTarget(cat, at+".image", at+".version", t.To, t.ToImage); err != nil {
			return err
		}
	}
	return nil
}

// checkTarget checks one image and version pair; imageField and
// versionField name them in the error.
func checkTarget(cat Catalogs, imageField, versionField, to, toImage string) error {
	if toImage == "" {
		if to != "" && !slices.ContainsFunc(cat.Images.Names(), func(n string) bool {
			b := cat.Images.Images[n]
			return string(b.Role) == "os" && b.KubernetesVersion == to
		}) {
			return fmt.Errorf("%s: no OS image of the lab's catalog carries Kubernetes %s", versionField, to)
		}
		return nil
	}
	b, err := cat.Images.Get(toImage)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", imageField, err)
	case string(b.Role) != "os":
		return fmt.Errorf("%s: %s is a %s image, not an OS image a node runs", imageField, toImage, b.Role)
	case to != "" && to != b.KubernetesVersion:
		return fmt.Errorf("%s: %s carries Kubernetes %s, not %s's %s", imageField, toImage, b.KubernetesVersion, versionField, to)
	}
	return nil
}

// Site is what Import makes of an export: each cluster with its hosts
// and shape, the hosts no cluster holds, and what was left out.
type Site struct {
	Clusters []*Cluster
	// Idle are hosts no cluster runs on or keeps as a spare.
	Idle []lab.HostSpec
	// Unmapped is everything the import left out, with the reason.
	Unmapped []Unmapped
	// Batch is the fleet wave's batch size (0: all at once) and Timing
	// the hosts' hardware timings (zero: the lab's defaults), as a plan
	// sets them (Plan.Apply).
	Batch  int
	Timing lab.Timing
	// anonymised: the site's names are not to be written.
	anonymised bool
}

// Cluster is one cluster of the site, as a scenario describes it.
type Cluster struct {
	// Name is the cluster's name in the files (NAMESPACE-NAME, or
	// cluster-NN anonymised); Source its NAMESPACE/NAME in the export.
	Name, Source string
	// origin is its NAMESPACE/NAME in the export even when anonymised:
	// what a plan's patterns match.
	origin       string
	Form         scenario.Form
	Strategy     scenario.Strategy
	ControlPlane scenario.ControlPlane
	Workers      scenario.Workers
	Workload     scenario.Application
	From, To     scenario.Release
	// Hosts are its Machines' hosts, then its spares.
	Hosts  []lab.HostSpec
	Spares int
}

// importer carries one import's state.
type importer struct {
	x    *Export
	cat  Catalogs
	opts Options
	site *Site
	// hosts are the lab hosts made so far, by the BareMetalHost's
	// NAMESPACE/NAME; taken marks those a cluster holds.
	hosts map[string]lab.HostSpec
	taken map[string]bool
	// names are the site's own strings (hosts, clusters, namespaces,
	// addresses, MACs, applications) that anonymising must not let
	// through in what was left out.
	names map[string]bool
	// otherPorts are the ports of a model the lab does not model, by
	// model: the hosts that have one (listed once per model).
	otherPorts map[string][]string
}

// LeftOut are the clusters of the export the site does not hold (after
// Write, which leaves out those the lab refuses), each with the last
// reason the import gave for it: what a prediction of the site's wave
// does not cover.
func (s *Site) LeftOut(x *Export) []Unmapped {
	var out []Unmapped
	for _, cl := range x.Clusters {
		key := objKey(cl.Namespace, cl.Name)
		if slices.ContainsFunc(s.Clusters, func(c *Cluster) bool { return c.origin == key }) {
			continue
		}
		u := Unmapped{Object: "Cluster " + key, Reason: "not mapped onto the lab (unmapped.txt says why)"}
		for _, m := range s.Unmapped {
			if strings.HasSuffix(m.Object, " "+key) || strings.Contains(m.Object, " "+key+" ") {
				u.Field, u.Reason = m.Field, m.Reason
			}
		}
		if s.anonymised {
			u.Object = "a cluster"
		}
		out = append(out, u)
	}
	return out
}

// Import maps an export onto the lab: every BareMetalHost it can model
// becomes a lab host, every Cluster a scenario's shape on its hosts.
func Import(x *Export, cat Catalogs, o Options) *Site {
	im := &importer{x: x, cat: cat, opts: o, site: &Site{Unmapped: slices.Clone(x.Skipped)}, hosts: map[string]lab.HostSpec{}, taken: map[string]bool{}, otherPorts: map[string][]string{}, names: map[string]bool{}}
	for i := range x.Hosts {
		im.host(&x.Hosts[i])
	}
	for _, model := range slices.Sorted(maps.Keys(im.otherPorts)) {
		hosts := im.otherPorts[model]
		im.skip(fmt.Sprintf("%d BareMetalHost(s) (%s)", len(hosts), listed(hosts, 3)), "status.hardware.nics",
			fmt.Sprintf("their %q ports are left out: not an Intel 700-series (i40e) port, the lab's only NIC model", model))
	}
	im.site.Unmapped = append(im.site.Unmapped,
		Unmapped{Object: "every BareMetalHost", Field: "os",
			Reason: "a BareMetalHost does not say how its OS is laid out on disk; every host is an A/B host (set os.kind: ostree in the lab file for OSTree hosts)"},
		Unmapped{Object: "every BareMetalHost", Field: "status.hardware.nics[].ip",
			Reason: "the lab's networks are the /24 of each port's address; a site's other prefix lengths and its VLANs are not read"})
	for i := range x.Clusters {
		im.cluster(&x.Clusters[i])
	}
	for i := range x.Hosts {
		if key := objKey(x.Hosts[i].Namespace, x.Hosts[i].Name); !im.taken[key] {
			if h, ok := im.hosts[key]; ok {
				im.site.Idle = append(im.site.Idle, h)
			}
		}
	}
	if o.Anonymise {
		anonymise(im.site, im.names)
		im.site.anonymised = true
	}
	return im.site
}

func objKey(ns, name string) string { return ns + "/" + name }

func (im *importer) skip(object, field, reason string) {
	im.site.Unmapped = append(im.site.Unmapped, Unmapped{Object: object, Field: field, Reason: reason})
}

// host makes a BareMetalHost a lab host, or says why it cannot.
func (im *importer) host(bmh *metal3.BareMetalHost) {
	obj := "BareMetalHost " + objKey(bmh.Namespace, bmh.Name)
	hw := bmh.Status.HardwareDetails
	if hw == nil {
		im.skip(obj, "status.hardware", "missing (never inspected): the lab does not guess a host's CPUs, memory, disks and NICs")
		return
	}
	im.private(bmh.Namespace, bmh.Name, objKey(bmh.Namespace, bmh.Name), bmh.Spec.BMC.Address, bmh.Spec.BootMACAddress)
	root, hinted, ok := rootDisk(bmh)
	if !ok {
		im.skip(obj, "status.hardware.storage", "no disk of 4 GiB or more to install on")
		return
	}
	if bmh.Spec.RootDeviceHints != nil && !hinted {
		im.skip(obj, "spec.rootDeviceHints", fmt.Sprintf("only a deviceName naming an inspected disk is read; the root disk is Ironic's default, the smallest of 4 GiB or more (%s, %d GiB)", root.Name, root.SizeBytes>>30))
	}
	h := lab.HostSpec{Name: bmh.Name, CPUs: hw.CPU.Count, MemoryMiB: hw.RAMMebibytes, DiskGiB: int(root.SizeBytes >> 30), Labels: bmh.Labels,
		BMC: lab.HostBMC{Credentials: credentialName}}
	if protocols, ok := protocolsOf(bmh.Spec.BMC.Address); ok {
		h.BMC.Protocols = protocols
	} else {
		im.skip(obj, "spec.bmc.address", fmt.Sprintf("%q: a BMC driver the lab does not model (redfish and ipmi); its BMC serves both", bmh.Spec.BMC.Address))
	}
	hfc := im.firmwareOf(bmh)
	if ports := i40ePorts(hw.NIC); ports > 1 && nicComponents(hfc) == 1 {
		im.skip(obj, "HostFirmwareComponents", fmt.Sprintf("one nic component for %d i40e ports: each port is given its version", ports))
	}
	for i, n := range hw.NIC {
		field := fmt.Sprintf("status.hardware.nics[%d]", i)
		im.private(n.MAC, n.IP, n.Name)
		if !isI40E(n.Model) {
			im.otherPorts[n.Model] = append(im.otherPorts[n.Model], objKey(bmh.Namespace, bmh.Name))
			continue
		}
		nvm, ok := im.nvmImage(hfc, n)
		if !ok {
			im.skip(obj, field, fmt.Sprintf("%s (%s): no NIC firmware version in its HostFirmwareComponents that the lab's NVM catalog holds", n.Name, n.MAC))
			continue
		}
		network, ok := network24(n.IP)
		if !ok {
			network = defaultNetwork
			im.skip(obj, field, fmt.Sprintf("%s has no IPv4 address: it is put on %s", n.Name, defaultNetwork))
		}
		h.NICs = append(h.NICs, lab.NICSpec{Name: n.Name, MAC: n.MAC, Model: "i40e", NVM: nvm, Network: network})
	}
	if len(h.NICs) == 0 {
		im.skip(obj, "status.hardware.nics", "no port the lab models; the host is left out")
		return
	}
	im.hosts[objKey(bmh.Namespace, bmh.Name)] = h
}

// credentialName is the one BMC account of a rehearsal's lab, generated:
// a site's credentials are never read.
const credentialName = "rehearsal-bmc"

// defaultNetwork holds ports without an address.
const defaultNetwork = "192.168.111.0/24"

func (im *importer) firmwareOf(bmh *metal3.BareMetalHost) *metal3.HostFirmwareComponents {
	for i := range im.x.Firmware {
		if f := &im.x.Firmware[i]; f.Namespace == bmh.Namespace && f.Name == bmh.Name {
			return f
		}
	}
	return nil
}

// nvmImage is the NVM image of the catalog whose firmware version the
// port runs.
func (im *importer) nvmImage(hfc *metal3.HostFirmwareComponents, n metal3.NIC) (string, bool) {
	version, ok := nicFirmware(hfc, n)
	if !ok {
		return "", false
	}
	return im.cat.nvmOf(version)
}

// cluster maps one Cluster, or says why it cannot.
func (im *importer) cluster(cl *clusterv1.Cluster) {
	obj := "Cluster " + objKey(cl.Namespace, cl.Name)
	kcp := im.controlPlaneOf(cl)
	if kcp == nil {
		im.skip(obj, "spec.controlPlaneRef", "no KubeadmControlPlane of the cluster in the export (the lab's clusters are kubeadm's)")
		return
	}
	c := &Cluster{Name: cl.Namespace + "-" + cl.Name, Source: objKey(cl.Namespace, cl.Name), origin: objKey(cl.Namespace, cl.Name), Form: scenario.Plain}
	im.private(cl.Namespace, cl.Name, c.Name, c.Source, kcp.Name)
	if cl.Spec.Topology.IsDefined() {
		c.Form = scenario.ClusterClass
	}
	c.ControlPlane = scenario.ControlPlane{Replicas: int(ptr.Deref(kcp.Spec.Replicas, 1))}
	im.workers(cl, c)
	c.ControlPlane.MaxSurge = im.count("KubeadmControlPlane "+objKey(kcp.Namespace, kcp.Name), "maxSurge", kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge, 1)
	if c.Strategy = strategyOf(c); c.Strategy == scenario.InPlace {
		im.skip(obj, "strategy", "one control-plane node and no workers: rehearsed as an update in place (upgradelab's extension); KCP alone would roll it onto one more host")
	}
	if d := kcp.Spec.MachineTemplate.Spec.Deletion.NodeDrainTimeoutSeconds; d != nil {
		c.Workload.NodeDrainTimeout.Duration = time.Duration(*d) * time.Second
	}
	if err := im.releases(c, kcp.Spec.Version); err != nil {
		im.skip("KubeadmControlPlane "+objKey(kcp.Namespace, kcp.Name), "spec.version", err.Error())
		return
	}
	im.apps(c)
	if !im.placeHosts(cl, c) {
		im.skip(obj, "", "none of its Machines runs on a BareMetalHost the lab models (status.hardware, an i40e port)")
		return
	}
	im.site.Clusters = append(im.site.Clusters, c)
}

func (im *importer) controlPlaneOf(cl *clusterv1.Cluster) *controlplanev1.KubeadmControlPlane {
	for i := range im.x.ControlPlanes {
		k := &im.x.ControlPlanes[i]
		if k.Namespace == cl.Namespace && (k.Name == cl.Spec.ControlPlaneRef.Name || k.Labels[clusterv1.ClusterNameLabel] == cl.Name) {
			return k
		}
	}
	return nil
}

// workers sums the cluster's MachineDeployments; the first one's
// rollout is the workers'.
func (im *importer) workers(cl *clusterv1.Cluster, c *Cluster) {
	var mds []string
	for _, md := range im.x.Deployments {
		if md.Namespace != cl.Namespace || md.Spec.ClusterName != cl.Name {
			continue
		}
		c.Workers.Replicas += int(ptr.Deref(md.Spec.Replicas, 1))
		if mds = append(mds, md.Name); len(mds) > 1 {
			continue
		}
		obj := "MachineDeployment " + objKey(md.Namespace, md.Name)
		im.private(md.Name, obj)
		if t := md.Spec.Rollout.Strategy.Type; t != "" && t != clusterv1.RollingUpdateMachineDeploymentStrategyType {
			im.skip(obj, "spec.rollout.strategy.type", fmt.Sprintf("%s: rehearsed as a rolling update", t))
		}
		ru := md.Spec.Rollout.Strategy.RollingUpdate
		c.Workers.MaxSurge, c.Workers.MaxUnavailable = im.count(obj, "maxSurge", ru.MaxSurge, 1), im.count(obj, "maxUnavailable", ru.MaxUnavailable, 0)
	}
	if len(mds) > 1 {
		im.skip("Cluster "+objKey(cl.Namespace, cl.Name), "MachineDeployments",
			fmt.Sprintf("%d of them: the lab's cluster has one worker pool, of their %d replicas, rolled out as %s is", len(mds), c.Workers.Replicas, mds[0]))
	}
}

// count is an IntOrString rollout count: its default when unset, and a
// percentage is listed and read as the default.
func (im *importer) count(obj, field string, v *intstr.IntOrString, def int) int {
	if v != nil && v.Type != intstr.Int {
		im.skip(obj, "spec.rollout.strategy.rollingUpdate."+field, fmt.Sprintf("%s: percentages are not read; rehearsed as %d", v.String(), def))
	}
	return intOr(v, def)
}

// strategyOf is how the cluster's upgrade goes, from its shape: a
// single-node cluster updates in place (nothing to roll onto), a control
// plane that does not surge scales in, any other rolls.
func strategyOf(c *Cluster) scenario.Strategy {
	switch {
	case c.ControlPlane.Replicas == 1 && c.Workers.Replicas == 0:
		return scenario.InPlace
	case c.ControlPlane.MaxSurge == 0:
		return scenario.ScaleIn
	}
	return scenario.Rolling
}

// releases sets from (the catalog's image of the cluster's version) and
// to (Options.To, or the catalog's next version up).
func (im *importer) releases(c *Cluster, version string) error {
	from, ok := im.osImage(version)
	if !ok {
		return fmt.Errorf("Kubernetes %s: no OS image of the lab's catalog carries it", version)
	}
	to, toImage := im.opts.target(c.origin)
	if b, ok := im.cat.Images.Images[toImage]; ok {
		to = b.KubernetesVersion
	} else if toImage != "" {
		return fmt.Errorf("image %q to upgrade to is not in the lab's catalog", toImage)
	}
	if to == "" {
		to = im.nextVersion(version)
	}
	if toImage == "" {
		if toImage, ok = im.osImage(to); !ok {
			return fmt.Errorf("no version to upgrade %s to: the lab's catalog has no OS image of %s", version, cmp.Or(to, "a later version"))
		}
	}
	if f, t := versionParts(version), versionParts(to); len(f) > 1 && len(t) > 1 && (t[0] != f[0] || t[1] > f[1]+1) {
		return fmt.Errorf("%s to %s: KCP upgrades one minor version at a time", version, to)
	}
	c.From, c.To = scenario.Release{Version: version, Image: from}, scenario.Release{Version: to, Image: toImage}
	return nil
}

// osImage is the catalog's plainest OS image of a version (the shortest
// name: a point release carries a suffix).
func (im *importer) osImage(version string) (string, bool) {
	best := ""
	for _, name := range im.cat.Images.Names() {
		b := im.cat.Images.Images[name]
		if string(b.Role) == "os" && b.KubernetesVersion == version && (best == "" || len(name) < len(best)) {
			best = name
		}
	}
	return best, best != ""
}

// nextVersion is the lowest catalog version above v ("" if none).
func (im *importer) nextVersion(v string) string {
	next := ""
	for _, name := range im.cat.Images.Names() {
		kv := im.cat.Images.Images[name].KubernetesVersion
		if semverLess(v, kv) && (next == "" || semverLess(kv, next)) {
			next = kv
		}
	}
	return next
}

// apps picks the cluster's application: of its workload cluster's
// Deployments, the largest one a budget covers (the one a drain must
// respect), else the largest; the others are listed as left out.
func (im *importer) apps(c *Cluster) {
	apps := im.x.Apps[c.Source]
	if apps == nil || len(apps.Deployments) == 0 {
		return
	}
	best, bestBudget := -1, -1
	for i, d := range apps.Deployments {
		b := budgetOf(apps, d.Namespace, d.Spec.Template.Labels)
		better := best < 0 || (b >= 0 && bestBudget < 0) ||
			((b >= 0) == (bestBudget >= 0) && ptr.Deref(d.Spec.Replicas, 1) > ptr.Deref(apps.Deployments[best].Spec.Replicas, 1))
		if better {
			best, bestBudget = i, b
		}
	}
	d := apps.Deployments[best]
	for _, other := range apps.Deployments {
		im.private(other.Namespace, other.Name, objKey(other.Namespace, other.Name))
	}
	c.Workload.Replicas = int(ptr.Deref(d.Spec.Replicas, 1))
	if bestBudget >= 0 {
		pdb := apps.Budgets[bestBudget].Spec
		switch {
		case pdb.MinAvailable != nil:
			c.Workload.Budget.MinAvailable = pdb.MinAvailable.String()
		case pdb.MaxUnavailable != nil:
			c.Workload.Budget.MaxUnavailable = pdb.MaxUnavailable.String()
		}
	} else {
		c.Workload.Budget.None = true
	}
	for i, other := range apps.Deployments {
		if i != best {
			im.skip("Deployment "+objKey(other.Namespace, other.Name)+" of "+c.Source, "",
				fmt.Sprintf("the lab models one application per cluster: %s/%s stands for it", d.Namespace, d.Name))
		}
	}
}

// budgetOf is the index of the budget in ns whose selector matches
// podLabels, -1 if none.
func budgetOf(apps *WorkloadApps, ns string, podLabels map[string]string) int {
	for i, b := range apps.Budgets {
		if b.Namespace != ns || b.Spec.Selector == nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector); err == nil && sel.Matches(labels.Set(podLabels)) {
			return i
		}
	}
	return -1
}

// placeHosts gives the cluster the hosts its Machines run on and, as
// spares, the hosts of its namespace no Machine holds (a rolling cluster's
// replacements land on them); false if none of its Machines' hosts is
// modelled.
func (im *importer) placeHosts(cl *clusterv1.Cluster, c *Cluster) bool {
	for _, m := range im.x.Machines {
		if m.Namespace != cl.Namespace || m.Spec.ClusterName != cl.Name {
			continue
		}
		key, ok := im.hostOf(m.Namespace, m.Spec.InfrastructureRef.Name)
		if !ok {
			im.skip("Machine "+objKey(m.Namespace, m.Name), "spec.infrastructureRef", "no BareMetalHost of the export is consumed by it")
			continue
		}
		if h, ok := im.hosts[key]; ok && !im.taken[key] {
			c.Hosts, im.taken[key] = append(c.Hosts, h), true
		}
	}
	if len(c.Hosts) == 0 {
		return false
	}
	for i := range im.x.Hosts {
		bmh := &im.x.Hosts[i]
		key := objKey(bmh.Namespace, bmh.Name)
		h, ok := im.hosts[key]
		if !ok || bmh.Namespace != cl.Namespace || bmh.Spec.ConsumerRef != nil || im.taken[key] || c.Strategy != scenario.Rolling {
			continue
		}
		if state := bmh.Status.Provisioning.State; state != metal3.StateAvailable {
			im.skip("BareMetalHost "+key, "status.provisioning.state", fmt.Sprintf("%q: not a spare of %s (only an available host is)", state, c.Source))
			continue
		}
		c.Hosts, im.taken[key] = append(c.Hosts, h), true
		c.Spares++
	}
	return true
}

// hostOf is the BareMetalHost an infrastructure Machine (Metal3Machine)
// consumes.
func (im *importer) hostOf(ns, infra string) (string, bool) {
	for _, bmh := range im.x.Hosts {
		if ref := bmh.Spec.ConsumerRef; ref != nil && bmh.Namespace == ns && ref.Name == infra {
			return objKey(bmh.Namespace, bmh.Name), true
		}
	}
	return "", false
}

// intOr is an IntOrString count, or def when unset or a percentage.
func intOr(v *intstr.IntOrString, def int) int {
	if v == nil || v.Type != intstr.Int {
		return def
	}
	return v.IntValue()
}

// semverLess compares "vMAJOR.MINOR.PATCH" versions.
func semverLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	return slices.Compare(pa, pb) < 0
}

func versionParts(v string) []int {
	var out []int
	for _, p := range strings.Split(strings.TrimPrefix(v, "v"), ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// LoadCatalogs reads the catalogs of the repository's fixtures folder,
// the ones the written lab files name.
func LoadCatalogs(fixtures string) (Catalogs, error) {
	images, err := image.LoadCatalog(filepath.Join(fixtures, "images", "catalog.yaml"))
	if err != nil {
		return Catalogs{}, err
	}
	nvm, err := nic.LoadCatalog(filepath.Join(fixtures, "nic", "nvm-images.yaml"))
	if err != nil {
		return Catalogs{}, err
	}
	rules, err := nic.LoadRules(filepath.Join(fixtures, "nic", "i40e-rules.yaml"))
	return Catalogs{Images: images, NVM: nvm, Rules: rules}, err
}

// listed is the first n names and how many more.
func listed(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// private notes strings of the site that anonymising removes.
func (im *importer) private(names ...string) {
	for _, n := range names {
		if len(n) > 2 {
			im.names[n] = true
		}
	}
}

// i40ePorts counts the ports the lab models.
func i40ePorts(nics []metal3.NIC) int {
	n := 0
	for _, nic := range nics {
		if isI40E(nic.Model) {
			n++
		}
	}
	return n
}

// nicComponents counts a host's NIC firmware components.
func nicComponents(hfc *metal3.HostFirmwareComponents) int {
	if hfc == nil {
		return 0
	}
	n := 0
	for _, c := range hfc.Status.Components {
		if strings.HasPrefix(c.Component, "nic") {
			n++
		}
	}
	return n
}
