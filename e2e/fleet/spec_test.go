package fleet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTheShippedFleetLoads(t *testing.T) {
	fl, err := Load("../../fixtures/fleets/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(fl.Clusters) != 5 || len(fl.Lab.Spec.Hosts) != 16 {
		t.Fatalf("%d clusters on %d hosts", len(fl.Clusters), len(fl.Lab.Spec.Hosts))
	}
	if c := fl.Clusters[1]; c.Name != "sn-1" || strings.Join(c.Hosts, ",") != "sn-1-node-0" {
		t.Fatalf("second cluster %s on %v", c.Name, c.Hosts)
	}
	if got := fl.Lab.Spec.Hosts[15].Name; got != "idle-host-0000" {
		t.Fatalf("the idle host is %s", got)
	}
	if got := len(fl.Strategies()); got != 4 {
		t.Fatalf("%d strategies: %v", got, fl.Strategies())
	}
	view := clusterLab(fl.Lab, fl.Clusters[3].Hosts)
	if len(view.Spec.Hosts) != 6 || view.Spec.Hosts[5].Labels["upgradelab.dev/spare"] != "true" {
		t.Fatalf("the rolling cluster's lab: %+v", view.Spec.Hosts)
	}
}

// Every fleet file shipped loads, with the clusters and hosts its comment
// promises.
func TestEveryShippedFleetLoads(t *testing.T) {
	for file, want := range map[string][2]int{"small.yaml": {5, 16}, "hundred.yaml": {55, 100}, "thousand.yaml": {250, 1000}, "three-hundred.yaml": {165, 300}} {
		fl, err := Load(filepath.Join("../../fixtures/fleets", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]int{len(fl.Clusters), len(fl.Lab.Spec.Hosts)}; got != want {
			t.Errorf("%s: %d clusters on %d hosts; want %d on %d", file, got[0], got[1], want[0], want[1])
		}
	}
	files, _ := filepath.Glob("../../fixtures/fleets/*.yaml")
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasPrefix(filepath.Base(f), "test-") }) // writeFleet's
	if len(files) != 4 {
		t.Errorf("fleet files %v: this test names four", files)
	}
}

// writeFleet writes a fleet file next to the shipped ones (its scenario
// paths resolve against its folder) and loads it.
func writeFleet(t *testing.T, body string) error {
	t.Helper()
	path := filepath.Join("../../fixtures/fleets", "test-"+strings.ReplaceAll(t.Name(), "/", "-")+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	_, err := Load(path)
	return err
}

const header = "apiVersion: upgradelab.dev/v1alpha1\nkind: Fleet\nname: f\n"

func TestBadFleetFilesNameFileAndField(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"unknown field", header + "clusters:\n- name: a\n  scenario: ../../scenarios/single-node-in-place.yaml\n  count: 1\n  replicas: 3\n",
			`line 8: unknown field "replicas"`},
		{"more hosts than the lab has", header + "hosts: 2\nclusters:\n- name: a\n  scenario: ../../scenarios/three-node-scale-in.yaml\n  count: 1\n",
			"hosts: 2, but the clusters take 3"},
		{"a shape the strategy cannot run", header + "clusters:\n- name: a\n  scenario: ../../scenarios/three-node-scale-in.yaml\n  count: 1\n  cluster:\n    controlPlane: {replicas: 3, maxSurge: 1}\n",
			"clusters[0].cluster: cluster.controlPlane.maxSurge: 1: strategy scale-in scales in (maxSurge 0)"},
		{"a shape its lab has no hosts for", header + "clusters:\n- name: a\n  scenario: ../../scenarios/single-node-in-place.yaml\n  count: 1\n  cluster:\n    controlPlane: {replicas: 3}\n",
			"clusters[0].cluster: cluster: needs 3 hosts during the upgrade, lab single-node has 1"},
		{"a form the scenario does not run in", header + "clusters:\n- name: a\n  scenario: ../../scenarios/three-node-in-place-reverted.yaml\n  count: 1\n",
			"clusters[0].scenario: three-node-in-place-reverted runs in [plain], not in the fleet's form clusterclass"},
		{"a scenario with faults", header + "form: plain\nclusters:\n- name: a\n  scenario: ../../scenarios/faults/power-loss-while-writing.yaml\n  count: 1\n",
			"injects faults"},
		{"a scenario that is not there", header + "clusters:\n- name: a\n  scenario: nope.yaml\n  count: 1\n",
			"clusters[0].scenario: open"},
		{"two groups of one name", header + "clusters:\n- name: a\n  scenario: x.yaml\n  count: 1\n- name: a\n  scenario: x.yaml\n  count: 1\n",
			`clusters[1].name: "a" is another group's name too`},
		{"no count", header + "clusters:\n- name: a\n  scenario: x.yaml\n",
			"clusters[0].count: 0: at least 1"},
		{"a negative batch", header + "wave: {batch: -1}\nclusters:\n- name: a\n  scenario: x.yaml\n  count: 1\n",
			"wave.batch: -1 is negative"},
		{"a negative provisioning concurrency", header + "provision: {concurrent: -2}\nclusters:\n- name: a\n  scenario: x.yaml\n  count: 1\n",
			"provision.concurrent: -2 is negative"},
		{"an unknown provision field", header + "provision: {batch: 2}\nclusters:\n- name: a\n  scenario: x.yaml\n  count: 1\n",
			`unknown field "batch"`},
		{"not a fleet", "apiVersion: upgradelab.dev/v1alpha1\nkind: Lab\nname: f\nclusters:\n- name: a\n  scenario: x.yaml\n  count: 1\n",
			"apiVersion/kind: want upgradelab.dev/v1alpha1 Fleet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := writeFleet(t, c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fixtures/fleets/test-") {
				t.Fatalf("got %v\nwant the file and %q", err, c.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile("../../fixtures/fleets/small.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(header + "clusters:\n- {name: a, scenario: b, count: 2}\nwave: {batch: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fleet.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fleet.yaml: ") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		if len(file.Clusters) == 0 || file.Wave.Batch < 0 || file.Hosts < 0 {
			t.Fatalf("accepted %+v", file)
		}
	})
}
