package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/scenario"
)

// goodScenario is a scenario file that fits the three-node lab.
const goodScenario = `name: x
lab: ../fixtures/labs/three-node.yaml
strategy: scale-in
cluster:
  controlPlane: {replicas: 3, maxSurge: 0}
from: {version: v1.35.3, image: ubuntu-24.04-k8s-v1.35.3}
to: {version: v1.36.3, image: ubuntu-24.04-k8s-v1.36.3}
`

func TestShippedScenariosLoad(t *testing.T) {
	paths, _ := filepath.Glob("../../scenarios/*.yaml")
	if len(paths) < 4 {
		t.Fatalf("found %d scenarios, want the four", len(paths))
	}
	seen := map[scenario.Strategy]bool{}
	for _, p := range paths {
		s, def, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		seen[s.Strategy] = true
		// Both forms, except a revert, which CAPI allows only on a plain
		// cluster (spec.topology.version cannot decrease).
		wantForms := 2
		if s.Expect.Outcome == scenario.Reverted {
			wantForms = 1
		}
		if len(s.Forms) != wantForms || def.Spec.Name == "" {
			t.Errorf("%s: forms %v, lab %q; want %d form(s) on a named lab", p, s.Forms, def.Spec.Name, wantForms)
		}
	}
	for _, st := range scenario.Strategies {
		if !seen[st] {
			t.Errorf("no shipped scenario uses strategy %s", st)
		}
	}
}

// Load checks the file against its lab.
func TestLoadChecksTheLab(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	abs, _ := filepath.Abs("../../fixtures/labs")
	base := strings.Replace(goodScenario, "../fixtures/labs", abs, 1)
	for _, tc := range []struct{ name, from, to, want string }{
		{"image not in the catalog", "image: ubuntu-24.04-k8s-v1.36.3", "image: ubuntu-99", `to.image: `},
		{"image of another version", "image: ubuntu-24.04-k8s-v1.36.3", "image: ubuntu-24.04-k8s-v1.35.3", "to.image: ubuntu-24.04-k8s-v1.35.3 carries Kubernetes v1.35.3, not v1.36.3"},
		{"too few hosts", "replicas: 3, maxSurge: 0}", "replicas: 3, maxSurge: 0}\n  workers: {replicas: 2, maxSurge: 1}", "cluster: needs 6 hosts during the upgrade, lab three-node has 3"},
		{"missing lab", "three-node.yaml", "four-node.yaml", "lab: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load(write(strings.Replace(base, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), "s.yaml: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error with %q", err, tc.want)
			}
		})
	}
}

func TestShippedFaultVariantsLoad(t *testing.T) {
	paths, _ := filepath.Glob("../../scenarios/faults/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no fault variants")
	}
	for _, p := range paths {
		s, _, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		// A variant injects a fault, or its upgrade is itself the fault
		// (a bad image, a NIC change no order makes safe) and it expects
		// the rollback or the stall, or its workload is (a budget that
		// never allows an eviction, under a nodeDrainTimeout), or what
		// the site demands is (an outage bound no VIP failover meets),
		// and it names the rules that break.
		workloadFault := s.Workload.Budget.MinAvailable != "" && s.Workload.NodeDrainTimeout.Duration > 0
		if len(s.Faults) == 0 && s.Expect.Outcome == scenario.Upgraded && !workloadFault && len(s.Expect.BrokenRules) == 0 {
			t.Errorf("%s injects no fault and expects a plain upgrade", p)
		}
	}
}
