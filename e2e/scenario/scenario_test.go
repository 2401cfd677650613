package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const good = `name: x
lab: ../fixtures/labs/three-node.yaml
strategy: scale-in
cluster:
  controlPlane: {replicas: 3, maxSurge: 0}
from: {version: v1.35.3, image: ubuntu-24.04-k8s-v1.35.3}
to: {version: v1.36.3, image: ubuntu-24.04-k8s-v1.36.3}
`

// Each mistake names the file, the field and what is wrong with it.
func TestParseNamesFileFieldAndProblem(t *testing.T) {
	if _, err := Parse("s.yaml", []byte(good)); err != nil {
		t.Fatalf("the good scenario: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown field", "strategy: scale-in", "strategy: scale-in\nstratgy: x", `s.yaml: line 4: unknown field "stratgy"`},
		{"strategy", "strategy: scale-in", "strategy: sideways", `strategy: "sideways" is not one of`},
		{"even replicas", "replicas: 3", "replicas: 2", "cluster.controlPlane.replicas: 2: KCP with stacked etcd needs an odd count"},
		{"surge 0 below 3", "replicas: 3, maxSurge: 0", "replicas: 1, maxSurge: 0", "cluster.controlPlane.maxSurge: 0 needs at least 3 replicas"},
		{"API server flag with dashes", "maxSurge: 0}", "maxSurge: 0, apiServerExtraArgs: {--feature-gates: X=true}}\nforms: [plain]",
			`cluster.controlPlane.apiServerExtraArgs: "--feature-gates" is not a flag name like feature-gates`},
		{"API server flags of a class", "maxSurge: 0}", "maxSurge: 0, apiServerExtraArgs: {feature-gates: X=true}}",
			"cluster.controlPlane.apiServerExtraArgs: needs forms [plain]"},
		{"version", "version: v1.36.3", "version: 1.36", `to.version: "1.36" is not a Kubernetes version`},
		{"downgrade", "version: v1.36.3", "version: v1.34.0", "to.version: v1.34.0 is not newer than from.version v1.35.3"},
		{"same machines on scale-in", "strategy: scale-in", "strategy: scale-in\nexpect: {sameMachines: true}", "expect.sameMachines: only an in-place upgrade"},
		{"timeout", "strategy: scale-in", "strategy: scale-in\ntimeout: soon", `"soon" is not a duration`},
		{"form", "strategy: scale-in", "strategy: scale-in\nforms: [helm]", `forms[0]: "helm" is not one of`},
		{"hostOS", "strategy: scale-in", "strategy: scale-in\nhostOS: [ab, zfs]", `s.yaml: hostOS[1]: "zfs" is not one of [ab ostree mixed]`},
		{"hostOS twice", "strategy: scale-in", "strategy: scale-in\nhostOS: [ostree, ostree]", `hostOS[1]: "ostree" is listed twice`},
		{"time scale above real time", "strategy: scale-in", "strategy: scale-in\nminTimeScale: 2", "minTimeScale: 2: between 0 (any scale) and 1 (real time)"},
		{"slow shutdown of no time", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, slowShutdown: {}}]", "faults[0].slowShutdown.takes: 0s: a graceful shutdown takes some time"},
		{"fault with two actions", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: kcp, bmc: {errorRate: 0.1}}]", "faults[0]: give exactly one of restart, bmc, powerLoss, agentCrash, hang, slowShutdown and pauseCluster"},
		{"a pause of no time", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, pauseCluster: {}}]", "faults[0].pauseCluster.for: 0s: say how long"},
		{"hang at no event", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, hang: {}}]", "faults[0].when.labEvent: hang needs a lab event"},
		{"fault restarting no manager name", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: \"Etcd Server\"}]", `faults[0].restart: "Etcd Server" is not a manager's name`},
		{"downFor without a restart", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, downFor: 2m, hang: {}, when: {labEvent: WriteStarted}}]", "faults[0]: downFor, failpoint and replicas go with restart of a manager"},
		{"a failpoint of the API server", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: apiserver, failpoint: x}]", "faults[0]: downFor, failpoint and replicas go with restart of a manager"},
		{"downFor and a failpoint", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: kcp, failpoint: x, downFor: 1m}]", "faults[0]: downFor, failpoint and replicas exclude each other"},
		{"one replica", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: kcp, replicas: 1}]", "faults[0].replicas: 1: between 2 and 5"},
		{"a failpoint that is no name", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: kcp, failpoint: \"Trigger Marked\"}]", `faults[0].failpoint: "Trigger Marked" is not a failpoint's name`},
		{"fault restarting the extension of another strategy", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: inplace}]", "faults[0].restart: the in-place extension runs only for strategy in-place"},
		{"power loss at no event", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, powerLoss: {restoreAfter: 5s}}]", "faults[0].when.labEvent: powerLoss needs a lab event"},
		{"agent crash at no event", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, agentCrash: {restartAfter: 5s}}]", "faults[0].when.labEvent: agentCrash needs a lab event"},
		{"BMC offline at no event", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, bmc: {offline: 30s}}]", "faults[0].when.labEvent: bmc.offline needs a lab event"},
		{"outcome", "strategy: scale-in", "strategy: scale-in\nexpect: {outcome: sideways}", `expect.outcome: "sideways" is not upgraded, rolled-back, reverted or stalled`},
		{"stalled without a stall time", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: kcp}]\nexpect: {outcome: stalled}", "expect.stallFor: stalled needs how long"},
		{"stalled without a fault or a broken rule", "strategy: scale-in", "strategy: scale-in\nexpect: {outcome: stalled, stallFor: 5s}", "expect.outcome: stalled needs a fault"},
		{"a broken rule without a name", "strategy: scale-in", "strategy: scale-in\nexpect: {brokenRules: [\"Etcd Quorum\"]}", `expect.brokenRules[0]: "Etcd Quorum" is not a rule's name`},
		{"power cut on more control planes than there are", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, when: {labEvent: WriteStarted}, powerLoss: {controlPlanes: 4}}]", "faults[0].powerLoss.controlPlanes: 4: between 0 and the 3"},
		{"power that stays off and comes back", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, when: {labEvent: WriteStarted}, powerLoss: {stayOff: true, restoreAfter: 5s}}]", "stayOff and restoreAfter exclude each other"},
		{"rolled back by scale-in", "strategy: scale-in", "strategy: scale-in\nexpect: {outcome: rolled-back}", "expect.outcome: rolled-back needs strategy in-place"},
		{"a health check without a timeout", "  controlPlane: {replicas: 3, maxSurge: 0}", "  controlPlane: {replicas: 3, maxSurge: 0}\n  healthCheck: {}", "cluster.healthCheck.unhealthyAfter: 0s: at least 1s"},
		{"a ClusterClass cluster reverted", "strategy: scale-in", "strategy: in-place\nexpect: {outcome: reverted}", "forms: reverted needs forms [plain]"},
		{"a cluster with workers reverted", "strategy: scale-in\ncluster:\n  controlPlane: {replicas: 3, maxSurge: 0}",
			"strategy: in-place\nforms: [plain]\nexpect: {outcome: reverted}\ncluster:\n  controlPlane: {replicas: 3, maxSurge: 0}\n  workers: {replicas: 2}", "cluster.workers.replicas: reverted needs 0 workers"},
		{"impossible budget", "strategy: scale-in", "strategy: scale-in\nworkload: {replicas: 3, budget: {minAvailable: \"4\"}}", "workload.budget.minAvailable: 4 is above the 3 replicas: the budget could never be met"},
		{"impossible default budget", "strategy: scale-in", "strategy: scale-in\nworkload: {budget: {minAvailable: \"5\"}}", "workload.budget.minAvailable: 5 is above the 3 replicas"},
		{"budget with both bounds", "strategy: scale-in", "strategy: scale-in\nworkload: {budget: {minAvailable: \"1\", maxUnavailable: \"1\"}}", "workload.budget: give one of minAvailable, maxUnavailable and none"},
		{"budget not a count", "strategy: scale-in", "strategy: scale-in\nworkload: {budget: {maxUnavailable: \"one\"}}", `workload.budget.maxUnavailable: "one" is not a count (2) or a percentage (50%)`},
		{"budget above 100%", "strategy: scale-in", "strategy: scale-in\nworkload: {budget: {minAvailable: \"150%\"}}", "workload.budget.minAvailable: 150% is above 100%"},
		{"application on workers the cluster lacks", "strategy: scale-in", "strategy: scale-in\nworkload: {nodes: workers}", "workload.nodes: workers, but the cluster has none"},
		{"application on no such nodes", "strategy: scale-in", "strategy: scale-in\nworkload: {nodes: gpus}", `workload.nodes: "gpus" is not workers or control-plane`},
		{"negative outage", "strategy: scale-in", "strategy: scale-in\nexpect: {maxAPIOutage: -1s}", "expect.maxAPIOutage: -1s is negative"},
		{"fault at an unknown step", "strategy: scale-in", "strategy: scale-in\nfaults: [{name: f, restart: kcp, when: {afterStep: lunch}}]", `faults[0].when.afterStep: "lunch" is not env or upgrade`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(strings.Replace(good, tc.from, tc.to, 1)))
			if err == nil || !strings.HasPrefix(err.Error(), "s.yaml: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error with %q", err, tc.want)
			}
		})
	}
}

func TestApplicationDefaultsFollowTheCluster(t *testing.T) {
	for _, tc := range []struct {
		cluster Cluster
		want    int
	}{
		{Cluster{ControlPlane: ControlPlane{Replicas: 1}}, 1},
		{Cluster{ControlPlane: ControlPlane{Replicas: 3}}, 3},
		{Cluster{ControlPlane: ControlPlane{Replicas: 3}, Workers: Workers{Replicas: 1}}, 2},
		{Cluster{ControlPlane: ControlPlane{Replicas: 3}, Workers: Workers{Replicas: 4}}, 4},
	} {
		if got := (Application{}).ReplicasFor(tc.cluster); got != tc.want {
			t.Errorf("replicas for %+v = %d, want %d", tc.cluster, got, tc.want)
		}
	}
	if f, v := (Budget{}).Limit(); f != "maxUnavailable" || v != "1" {
		t.Errorf("default budget %s=%s, want maxUnavailable=1", f, v)
	}
	if f, _ := (Budget{None: true}).Limit(); f != "" {
		t.Errorf("budget none gives %s", f)
	}
	one := &Scenario{Cluster: Cluster{ControlPlane: ControlPlane{Replicas: 1}}}
	three := &Scenario{Cluster: Cluster{ControlPlane: ControlPlane{Replicas: 3}}}
	if one.APIOutageBound() != DefaultSingleNodeOutage || three.APIOutageBound() != DefaultHAOutage {
		t.Errorf("outage bounds: one replica %s, three %s", one.APIOutageBound(), three.APIOutageBound())
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add([]byte(good))
	paths, _ := filepath.Glob("../../scenarios/*.yaml")
	faults, _ := filepath.Glob("../../scenarios/faults/*.yaml")
	for _, p := range append(paths, faults...) {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		// What parses is valid: parsing it again agrees.
		if errs := s.validate(); len(errs) > 0 {
			t.Fatalf("accepted an invalid scenario: %v", errs)
		}
	})
}
