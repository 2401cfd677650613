package rehearsal

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/fleet"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

func repoFixtures(tb testing.TB) string {
	tb.Helper()
	root, err := reference.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(root, "fixtures")
}

func importDir(tb testing.TB, export string, o Options) (*Site, Files) {
	tb.Helper()
	fixtures := repoFixtures(tb)
	cat, err := LoadCatalogs(fixtures)
	if err != nil {
		tb.Fatal(err)
	}
	x, err := Read(export)
	if err != nil {
		tb.Fatal(err)
	}
	site := Import(x, cat, o)
	name := "northwind"
	if o.Anonymise {
		name = "site" // upgradelab rehearse import's name for an anonymised site
	}
	files, err := site.Write(tb.TempDir(), fixtures, name)
	if err != nil {
		tb.Fatal(err)
	}
	return site, files
}

// The example site's export becomes files that load as hand-written ones
// do, and the fleet they describe holds the site's hosts and shapes: each
// cluster's hosts are the BareMetalHosts its Machines consume (CPUs,
// memory, root disk, MACs, NVM version as inspected), its shape and
// strategy its KubeadmControlPlane's and MachineDeployment's.
func TestTheExampleSiteImportsAndLoadsAsItsInventory(t *testing.T) {
	site, files := importDir(t, filepath.Join(repoFixtures(t), "rehearsal", "northwind"), Options{})
	fl, err := fleet.Load(files.Fleet)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		strategy      scenario.Strategy
		cp, workers   int
		hosts, spares int
		nvm           string
		firstHost     string
	}{
		"retail-store-0042": {scenario.InPlace, 1, 0, 1, 0, "x710-nvm-8.70", "retail-store-0042-cp0"},
		"retail-store-0107": {scenario.InPlace, 1, 0, 1, 0, "x710-nvm-9.20", "retail-store-0107-cp0"},
		"core-inventory":    {scenario.Rolling, 3, 2, 6, 1, "x710-nvm-9.20", "core-inventory-cp0"},
		"edge-gateway":      {scenario.ScaleIn, 3, 0, 3, 0, "x710-nvm-9.20", "edge-gateway-cp0"},
	}
	if len(fl.Clusters) != len(want) {
		t.Fatalf("fleet clusters %d, want %d", len(fl.Clusters), len(want))
	}
	for i, c := range fl.Clusters {
		name := strings.TrimSuffix(c.Name, "-0")
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected cluster %s", c.Name)
			continue
		}
		s := c.Scenario
		if s.Strategy != w.strategy || s.Cluster.ControlPlane.Replicas != w.cp || s.Cluster.Workers.Replicas != w.workers || len(c.Hosts) != w.hosts {
			t.Errorf("%s: %s, %d control plane, %d workers, %d hosts; want %s, %d, %d, %d", name, s.Strategy, s.Cluster.ControlPlane.Replicas,
				s.Cluster.Workers.Replicas, len(c.Hosts), w.strategy, w.cp, w.workers, w.hosts)
		}
		if spares := site.Clusters[i].Spares; spares != w.spares {
			t.Errorf("%s: %d spare(s), want %d (the unconsumed hosts of a rolling cluster's namespace)", name, spares, w.spares)
		}
		h, ok := findHost(fl, c.Name+"-"+w.firstHost)
		if !ok {
			t.Errorf("%s: no host %s in the fleet's lab (have %v)", name, w.firstHost, c.Hosts)
			continue
		}
		if h.CPUs != 32 || h.MemoryMiB != 131072 || h.NICs[0].NVM != w.nvm || h.NICs[0].MAC == "" {
			t.Errorf("%s: host %+v; want 32 CPUs, 128 GiB, NVM %s", name, h, w.nvm)
		}
	}
	// Each cluster's lab file loads back to the hosts imported, port for
	// port (a fleet's lab gives its copies MACs of their own).
	for i, path := range files.Labs {
		def, err := lab.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		got, imported := def.Spec.Hosts, site.Clusters[i].Hosts
		if len(got) != len(imported) {
			t.Fatalf("%s: %d hosts, imported %d", path, len(got), len(imported))
		}
		for j := range got {
			g, w := got[j], imported[j]
			if g.Name != w.Name || g.CPUs != w.CPUs || g.MemoryMiB != w.MemoryMiB || g.DiskGiB != w.DiskGiB || len(g.NICs) != len(w.NICs) ||
				g.NICs[0].MAC != w.NICs[0].MAC || g.NICs[0].NVM != w.NICs[0].NVM || !slices.Equal(g.BMC.Protocols, w.BMC.Protocols) {
				t.Errorf("%s: host %d loads as %+v, imported %+v", path, j, g, w)
			}
		}
	}
	if mac := site.Clusters[0].Hosts[0].NICs[0].MAC; mac != "3c:fd:fe:a0:00:01" {
		t.Errorf("store-0042's port has MAC %s, the export's is 3c:fd:fe:a0:00:01", mac)
	}
	// The small root disk of store-0107 is the inspected /dev/sda, 8 GiB.
	if h, _ := findHost(fl, "retail-store-0107-0-retail-store-0107-cp0"); h.DiskGiB != 8 {
		t.Errorf("store-0107's root disk %d GiB, want the inspected 8", h.DiskGiB)
	}
	for _, reason := range []string{"Secrets are never read", "never inspected", "core/payments: left out of the fleet", "analytics/warehouse: left out of the fleet", `"0x14e4 0x16d7" ports are left out`} {
		if !slices.ContainsFunc(site.Unmapped, func(u Unmapped) bool { return strings.Contains(u.String(), reason) }) {
			t.Errorf("nothing left out says %q:\n%s", reason, site.unmappedText())
		}
	}
}

func findHost(fl *fleet.Fleet, name string) (h lab.HostSpec, ok bool) {
	for _, x := range fl.Lab.Spec.Hosts {
		if x.Name == name {
			return x, true
		}
	}
	return h, false
}

// A Secret in the export is listed, never read: nothing of its data
// reaches the files.
func TestSecretsAreNeverRead(t *testing.T) {
	dir := copyExport(t)
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: bmc, namespace: core}\ndata: {password: c2VjcmV0LW1hcmtlcg==}\nstringData: {token: secret-marker}\n"
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	site, files := importDir(t, dir, Options{})
	for _, f := range append(append([]string{files.Fleet, files.Unmapped}, files.Labs...), files.Scenarios...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "secret-marker") || strings.Contains(string(data), "c2VjcmV0LW1hcmtlcg") {
			t.Errorf("%s holds the Secret's data", f)
		}
	}
	if !slices.ContainsFunc(site.Unmapped, func(u Unmapped) bool { return strings.Contains(u.Object, "secret.yaml") }) {
		t.Errorf("the Secret is not listed as left out")
	}
}

// An object of a kind the rehearsal reads, in an API version it does not,
// is refused with the file, the object and the versions supported; a
// file that does not parse is refused with its name.
func TestAnExportOfAnotherVersionIsRefusedWithTheVersionsSupported(t *testing.T) {
	for _, c := range []struct{ file, text, want string }{
		{"old.yaml", "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata: {name: a, namespace: b}\n",
			`old.yaml: document 1 (Cluster b/a): apiVersion "cluster.x-k8s.io/v1beta1" of Cluster is not supported; supported: cluster.x-k8s.io/v1beta2`},
		{"list.yaml", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: metal3.io/v1beta1\n  kind: BareMetalHost\n  metadata: {name: h}\n",
			`list.yaml: items[0] (BareMetalHost h): apiVersion "metal3.io/v1beta1" of BareMetalHost is not supported; supported: metal3.io/v1alpha1`},
		{"broken.yaml", "apiVersion: v1\nkind: [\n", "broken.yaml: document 1"},
		{"field.yaml", "apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {name: h}\nspec: {online: maybe}\n", "field.yaml: document 1 (BareMetalHost h)"},
	} {
		dir := copyExport(t)
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.file, err, c.want)
		}
	}
}

// Anonymised, the files name no host, cluster, MAC or address of the
// site, and keep its shapes.
func TestAnAnonymisedSiteKeepsItsShapesAndNotItsNames(t *testing.T) {
	site, files := importDir(t, filepath.Join(repoFixtures(t), "rehearsal", "northwind"), Options{Anonymise: true})
	if _, err := fleet.Load(files.Fleet); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(append([]string{files.Fleet, files.Unmapped}, files.Labs...), files.Scenarios...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"northwind", "retail", "store-0042", "inventory", "payments", "ledger", "gateway", "warehouse", "spares-", "rack-", "3c:fd:fe", "10.40."} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s names %q", f, secret)
			}
		}
	}
	if len(site.Clusters) != 4 || site.Clusters[2].Strategy != scenario.Rolling || len(site.Clusters[2].Hosts) != 6 {
		t.Errorf("anonymised clusters lost their shapes: %+v", site.Clusters)
	}
}

// copyExport is a writable copy of the example export.
func copyExport(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(repoFixtures(t), "rehearsal", "northwind")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// The example site's failure points are found before any run, each of
// its kind with its cause: two clusters without the hosts their rollout
// needs, a budget that allows no eviction, two single-node clusters
// whose API goes down, and, upgraded to the image with the newer i40e
// driver, the store whose port still runs NVM 8.70; to the driver of a
// new API major, every port fails.
func TestTheExampleSitesFailurePointsAreFoundWithTheirCauses(t *testing.T) {
	cat, err := LoadCatalogs(repoFixtures(t))
	if err != nil {
		t.Fatal(err)
	}
	x, err := Read(filepath.Join(repoFixtures(t), "rehearsal", "northwind"))
	if err != nil {
		t.Fatal(err)
	}
	points := Import(x, cat, Options{ToImage: "ubuntu-24.04-k8s-v1.36.3-i40e-2.28"}).FailurePoints(cat)
	got := map[string]bool{}
	for _, p := range points {
		got[p.Cluster+" "+p.Level+" "+p.Kind] = true
	}
	for _, want := range []string{
		"core-payments fails spares-too-few", "analytics-warehouse fails spares-too-few",
		"core-payments hurts budget-blocks-drains",
		"retail-store-0042 hurts single-node-api-down", "retail-store-0107 hurts single-node-api-down",
		"retail-store-0042 hurts nic-firmware-driver",
		"retail-store-0107 fails no-room-for-image",
	} {
		if !got[want] {
			t.Errorf("no failure point %q in %v", want, points)
		}
	}
	if len(points) != 7 {
		t.Errorf("%d failure points, want the 7 above: %v", len(points), points)
	}
	points = Import(x, cat, Options{ToImage: "ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview"}).FailurePoints(cat)
	nic := 0
	for _, p := range points {
		if p.Kind == KindNICDriver && p.Level == Fails && strings.Contains(p.Cause, "nvm-major-older") {
			nic++
		}
	}
	if nic != 22 { // every modelled port of the six clusters
		t.Errorf("%d ports fail under the driver of API 2.0, want 22: %v", nic, points)
	}
}

// A host has room for an image when its root, as the lab lays out its
// disk, takes it: an A/B slot the image, an OSTree root the running
// deployment and the new one.
func TestAHostHasRoomWhenItsRootTakesTheImage(t *testing.T) {
	cat, err := LoadCatalogs(repoFixtures(t))
	if err != nil {
		t.Fatal(err)
	}
	from, to := "ubuntu-24.04-k8s-v1.35.3", "ubuntu-24.04-k8s-v1.36.3" // 2048 and 2150 MiB
	for _, c := range []struct {
		os      lab.HostOS
		diskGiB int
		fits    bool
	}{
		{lab.HostOS{}, 8, false},                              // slots of 2 GiB
		{lab.HostOS{}, 10, true},                              // slots of 3 GiB
		{lab.HostOS{}, 480, true},                             // slots of 8 GiB
		{lab.HostOS{Kind: disk.OSTree, RootGiB: 2}, 8, false}, // 4096 MiB for 2048 + 2150
		{lab.HostOS{Kind: disk.OSTree, RootGiB: 3}, 8, true},
	} {
		cl := &Cluster{Name: "c", From: scenario.Release{Image: from}, To: scenario.Release{Image: to},
			Hosts: []lab.HostSpec{{Name: "h", DiskGiB: c.diskGiB, OS: c.os}}}
		if got := len(noRoom(cl, cat)) == 0; got != c.fits {
			t.Errorf("%+v on a %d GiB disk: fits %v, want %v", c.os, c.diskGiB, got, c.fits)
		}
	}
}

// A budget blocks drains when it allows no eviction: minAvailable of
// every replica (a count, or a percentage rounded up), maxUnavailable 0.
func TestABudgetBlocksWhenItAllowsNoEviction(t *testing.T) {
	for _, c := range []struct {
		budget   scenario.Budget
		replicas int
		blocks   bool
	}{
		{scenario.Budget{MinAvailable: "2"}, 2, true},
		{scenario.Budget{MinAvailable: "2"}, 3, false},
		{scenario.Budget{MinAvailable: "90%"}, 3, true},
		{scenario.Budget{MinAvailable: "50%"}, 3, false},
		{scenario.Budget{MaxUnavailable: "0"}, 3, true},
		{scenario.Budget{MaxUnavailable: "10%"}, 3, false},
		{scenario.Budget{None: true}, 3, false},
	} {
		if _, blocks := budgetBlocks(scenario.Application{Replicas: c.replicas, Budget: c.budget}); blocks != c.blocks {
			t.Errorf("%+v of %d replicas: blocks %v, want %v", c.budget, c.replicas, blocks, c.blocks)
		}
	}
}
