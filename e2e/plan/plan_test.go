package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/provider"
)

// The shipped scenarios against the two default providers: biggest labs
// first, a run per form and host OS variant for the lab provider, none
// for a strategy a provider lacks, and names, folders and labels as the
// suite and `upgradelab run` show them.
func TestRunsOfTheShippedScenarios(t *testing.T) {
	scenarios, err := Scenarios("../../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var provs []*provider.Config
	for _, name := range []string{"baremetal", "inmemory"} {
		p, err := provider.Load("../../fixtures/providers/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		provs = append(provs, p)
	}
	runs, err := Runs(scenarios, provs, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names, dirs []string
	for i, r := range runs {
		names, dirs = append(names, r.Name()), append(dirs, r.Dir())
		if i > 0 && r.Provider == runs[i-1].Provider && len(r.Lab.Spec.Hosts) > len(runs[i-1].Lab.Spec.Hosts) {
			t.Errorf("%s (%d hosts) after %s (%d hosts): biggest labs go first", r.Name(), len(r.Lab.Spec.Hosts), runs[i-1].Name(), len(runs[i-1].Lab.Spec.Hosts))
		}
		if r.Provider.Name == "inmemory" && !slices.Contains([]string{"scale-in", "rolling"}, string(r.Scenario.Strategy)) {
			t.Errorf("%s: the in-memory provider supports no %s", r.Name(), r.Scenario.Strategy)
		}
	}
	for _, want := range []string{"baremetal single-node-in-place/plain", "baremetal single-node-in-place/clusterclass/ostree", "inmemory three-node-scale-in/plain"} {
		if !slices.Contains(names, want) {
			t.Errorf("no run %q among %v", want, names)
		}
	}
	if !slices.Contains(dirs, "baremetal-single-node-in-place-clusterclass-ostree") {
		t.Errorf("folders %v", dirs)
	}
	if unique := slices.Compact(slices.Sorted(slices.Values(dirs))); len(unique) != len(dirs) {
		t.Errorf("two runs share a folder: %v", dirs)
	}
	for _, r := range runs {
		if r.Provider.Name == "baremetal" && r.HostOS == "ostree" && !slices.Contains(r.Labels(), "ostree") {
			t.Errorf("%s: labels %v lack its host OS", r.Name(), r.Labels())
		}
	}
	twice, _ := Runs(scenarios, provs[:1], 2)
	if len(twice) != 2*len(runs)-2*countOf(runs, "inmemory") || !strings.HasSuffix(twice[1].Name(), "#2") || !strings.HasSuffix(twice[1].Dir(), "-r2") {
		t.Errorf("repeats: %d runs, second %q %q", len(twice), twice[1].Name(), twice[1].Dir())
	}
	if _, err := Scenarios("../../scenarios/none-*.yaml"); err == nil || !strings.Contains(err.Error(), "no scenario file matches") {
		t.Errorf("a glob that matches nothing: %v", err)
	}
}

func countOf(runs []Run, provider string) int {
	n := 0
	for _, r := range runs {
		if r.Provider.Name == provider {
			n++
		}
	}
	return n
}

// Runs are selected by the labels make e2e filters on.
func TestSelectFiltersByLabels(t *testing.T) {
	scenarios, p := shipped(t, "baremetal")
	runs, _ := Runs(scenarios, []*provider.Config{p}, 1)
	got, err := Select(runs, "single-node-in-place && ostree")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].HostOS != "ostree" || got[0].Scenario.Name != "single-node-in-place" {
		var names []string
		for _, r := range got {
			names = append(names, r.Name())
		}
		t.Errorf("selected %v; want single-node-in-place on OSTree hosts, both forms", names)
	}
	if all, _ := Select(runs, ""); len(all) != len(runs) {
		t.Errorf("an empty filter kept %d of %d runs", len(all), len(runs))
	}
	if _, err := Select(runs, "in-place &&"); err == nil || !strings.Contains(err.Error(), `label filter "in-place &&"`) {
		t.Errorf("a bad filter: %v", err)
	}
}

// On the qemu backend a lab provider's runs are on VMs: named and labelled
// so, and only on A/B hosts (a VM's disk is A/B); a provider without the
// lab runs as it does anyway.
func TestRunsOnTheQEMUBackend(t *testing.T) {
	scenarios, err := Scenarios("../../scenarios/single-node-in-place.yaml", "../../scenarios/three-node-scale-in.yaml", "../../scenarios/cold-spare-rolling.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OnBackend(scenarios, "xen"); err == nil || !strings.Contains(err.Error(), `backend "xen"`) {
		t.Fatalf("an unknown backend: %v", err)
	}
	onVMs, err := OnBackend(scenarios, "qemu")
	if err != nil {
		t.Fatal(err)
	}
	if scenarios[0].Lab.Backend() != "test" {
		t.Error("OnBackend changed the loaded labs")
	}
	var provs []*provider.Config
	for _, name := range []string{"baremetal", "inmemory"} {
		p, _ := provider.Load("../../fixtures/providers/" + name + ".yaml")
		provs = append(provs, p)
	}
	runs, err := Runs(onVMs, provs, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name())
		onVM := slices.Contains(r.Labels(), "qemu")
		if r.Provider.Name == "baremetal" && (!onVM || !strings.HasSuffix(r.Dir(), "-qemu") || r.Lab.HostOSMode() != "ab") {
			t.Errorf("%s: labels %v, folder %s, hosts %s", r.Name(), r.Labels(), r.Dir(), r.Lab.HostOSMode())
		}
		if r.Provider.Name == "inmemory" && onVM {
			t.Errorf("%s is labelled qemu without a lab", r.Name())
		}
	}
	for _, want := range []string{"baremetal single-node-in-place/plain/qemu", "baremetal three-node-scale-in/clusterclass/qemu", "baremetal cold-spare-rolling/plain/ab/qemu", "inmemory three-node-scale-in/plain"} {
		if !slices.Contains(names, want) {
			t.Errorf("no run %q among %v", want, names)
		}
	}
}

// A provider whose inventory drives Redfish BMCs only
// (hosts.bmcProtocols) gets no run on a lab of IPMI-only hosts, and
// every other scenario its strategies allow. Metal3's inventory drives
// both: Ironic network-boots IPMI hosts.
func TestAProviderRunsOnlyOnLabsWhoseBMCsItDrives(t *testing.T) {
	scenarios, p := shipped(t, "baremetal-bmo")
	onIPMI := func(r Run) bool { return strings.Contains(r.Name(), "ipmi") }
	if all, _ := Runs(scenarios, []*provider.Config{p}, 1); !slices.ContainsFunc(all, onIPMI) {
		t.Errorf("baremetal-bmo: no run on IPMI hosts among %d", len(all))
	}
	p.Hosts.BMCProtocols = []string{"redfish"}
	runs, err := Runs(scenarios, []*provider.Config{p}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(runs, onIPMI) || !slices.ContainsFunc(runs, func(r Run) bool { return r.Name() == "baremetal-bmo three-node-scale-in/plain" }) {
		t.Errorf("%d runs with bmcProtocols [redfish]; want three-node-scale-in and nothing on IPMI hosts", len(runs))
	}
	why := map[string]string{}
	for _, r := range NotRun(scenarios, []*provider.Config{p}) {
		why[r.Scenario] = r.Why
	}
	if want := "hosts.bmcProtocols [redfish]"; !strings.Contains(why["three-node-scale-in-ipmi"], want) {
		t.Errorf("three-node-scale-in-ipmi not run because %q; want the reason to say %q", why["three-node-scale-in-ipmi"], want)
	}
}

// Each scenario a provider does not run is named with the reason: on
// Metal3's inventory, reset (its hosts have no BMC) and, on the qemu
// backend, every run (Ironic boots ISOs the VMs do not); a scenario it
// runs is not named.
func TestNotRunSaysWhy(t *testing.T) {
	scenarios, p := shipped(t, "baremetal-bmo")
	why := map[string]string{}
	for _, r := range NotRun(scenarios, []*provider.Config{p}) {
		why[r.Scenario] = r.Why
	}
	for scenario, want := range map[string]string{"reset-reprovisioning": "without a BMC"} {
		if !strings.Contains(why[scenario], want) {
			t.Errorf("%s not run because %q; want the reason to say %q", scenario, why[scenario], want)
		}
	}
	for _, runs := range []string{"three-node-scale-in", "three-node-scale-in-ipmi"} {
		if w, ok := why[runs]; ok {
			t.Errorf("%s not run: %s", runs, w)
		}
	}
	onVMs, err := OnBackend(scenarios, "qemu")
	if err != nil {
		t.Fatal(err)
	}
	if runs, _ := Runs(onVMs, []*provider.Config{p}, 1); len(runs) != 0 {
		t.Errorf("%d runs of Metal3's inventory on VMs, want none", len(runs))
	}
	why = map[string]string{}
	for _, r := range NotRun(onVMs, []*provider.Config{p}) {
		why[r.Scenario] = r.Why
	}
	if !strings.Contains(why["three-node-scale-in"], "qemu") {
		t.Errorf("three-node-scale-in on VMs not run because %q; want the qemu backend named", why["three-node-scale-in"])
	}
}

// shipped are the shipped scenarios and the shipped provider config name.
func shipped(t *testing.T, name string) ([]Loaded, *provider.Config) {
	t.Helper()
	scenarios, err := Scenarios("../../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := provider.Load("../../fixtures/providers/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return scenarios, p
}
