//go:build integration

// A real plane (kube-apiserver, etcd, CAPI's managers: make tools) runs
// these tests; make test-integration runs them, make test does not.

package runner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// One scenario end to end in `make test-integration`, so every night
// proves the chain from a scenario file to the checks: the single-node in-place
// upgrade, plain form, on an A/B host and on an OSTree host. The two runs
// share a kept plane (Planes), as a suite process's runs do: the first
// starts it, the second finds it as a fresh one, its own logs in its
// folder and nothing of the first run's left.
func TestSingleNodeInPlaceScenarioPassesEveryCheck(t *testing.T) {
	planes := &Planes{Dir: labtest.Dir(t)}
	defer planes.Stop()
	var namespaces []string
	for _, hostOS := range []string{vocab.HostOSAB, vocab.HostOSOSTree} {
		t.Run(hostOS, func(t *testing.T) {
			res, dir := testSingleNodeInPlace(t, hostOS, planes)
			namespaces = append(namespaces, runNamespace(t, res))
			assertKeptPlaneClean(t, planes, namespaces, dir)
		})
	}
}

// runNamespace is the namespace a run worked in, read from its timeline's
// Cluster entries' CAPI logs: the run's part of capi.log names it.
func runNamespace(t *testing.T, res result.Result) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(res.Timeline), "mgmt", "mgmt", "capi.log"))
	if err != nil {
		t.Fatalf("the run's part of the kept plane's logs: %v", err)
	}
	_, after, ok := strings.Cut(string(data), `Cluster="`)
	ns, _, _ := strings.Cut(after, "/")
	if !ok || !strings.HasPrefix(ns, "scenario-") {
		t.Fatalf("capi.log of the run names no scenario namespace")
	}
	return ns
}

// assertKeptPlaneClean: after each run the kept plane holds no object in
// any run's namespace, and the run's copy of the logs names no earlier
// run's namespace.
func assertKeptPlaneClean(t *testing.T, planes *Planes, namespaces []string, dir string) {
	t.Helper()
	if planes.base == nil {
		t.Fatal("no plane kept after the run")
	}
	for _, ns := range namespaces {
		for _, l := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &metal3.BareMetalHostList{}, &corev1.SecretList{}} {
			if err := planes.base.Client.List(context.Background(), l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(l); n > 0 {
				t.Errorf("namespace %s still holds %d %T after its run", ns, n, l)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "mgmt", "mgmt", "capi.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces[:len(namespaces)-1] {
		if strings.Contains(string(data), ns+"/") {
			t.Errorf("the run's capi.log holds lines of an earlier run's namespace %s", ns)
		}
	}
}

func testSingleNodeInPlace(t *testing.T, hostOS string, planes *Planes) (result.Result, string) {
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s, def, err := plan.Load(filepath.Join(root, "scenarios", "single-node-in-place.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if def, err = def.WithHostOS(hostOS); err != nil {
		t.Fatal(err)
	}
	dir := labtest.Dir(t)
	res := Run(context.Background(), s, def, scenario.Plain, Options{RepoRoot: root, Dir: dir, Scale: timescale.Scale(0.01), Progress: testWriter{t}, Planes: planes})
	if res.Error != "" {
		t.Fatalf("the run stopped: %s", res.Error)
	}
	for _, r := range res.Checks {
		if r.Status == check.Fail {
			t.Errorf("rule %s failed: %v", r.Rule, r.Violations)
		}
	}
	applied := 0
	for _, r := range res.Checks {
		if r.Status == check.Pass {
			applied++
		}
	}
	if applied < 10 {
		t.Errorf("only %d rules applied to an in-place run: %+v", applied, res.Checks)
	}
	// On OSTree hosts the admin's /etc edit is judged (and must pass); on
	// A/B hosts the rule does not apply.
	wantEtc := map[string]check.Status{vocab.HostOSAB: check.NotApplicable, vocab.HostOSOSTree: check.Pass}[hostOS]
	for _, r := range res.Checks {
		if r.Rule == "etc-merged" && r.Status != wantEtc {
			t.Errorf("etc-merged %s on %s hosts, want %s", r.Status, hostOS, wantEtc)
		}
	}
	if res.HostOS != hostOS {
		t.Errorf("the result names host OS %q, want %q", res.HostOS, hostOS)
	}
	entries, err := timeline.Read(res.Timeline)
	if err != nil || len(entries) < 20 {
		t.Fatalf("timeline %s: %d entries, %v", res.Timeline, len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "result.json")); err != nil {
		t.Fatal(err)
	}
	// The profile names every phase in order, and the CPU of the plane's
	// processes, the provider's and the harness's.
	var phases []string
	for _, ph := range res.Profile.Phases {
		phases = append(phases, ph.Name)
	}
	want := []string{result.PhaseStart, result.PhaseEnroll, result.PhaseProvision, result.PhaseWriteData, result.PhaseUpgrade, result.PhaseSettle, result.PhaseReadData, result.PhaseStop, result.PhaseJudge}
	if !slices.Equal(phases, want) {
		t.Errorf("profile phases %v, want %v", phases, want)
	}
	cpu := map[string]bool{}
	for _, c := range res.Profile.CPU {
		cpu[c.Name] = c.CPU > 0
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "capi", "kcp", "cabpk", "baremetal", "inplace", harnessCPU} {
		if !cpu[name] {
			t.Errorf("profile CPU %v: no time for %s", res.Profile.CPU, name)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "profile.txt")); err != nil || !strings.Contains(string(data), "wall: start ") {
		t.Errorf("profile.txt: %q, %v", data, err)
	}
	return res, dir
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// The suite against a provider nobody here wrote: CAPI's in-memory
// provider (CAPD, built from the pinned test module) runs the 3-node
// scale-in scenario in both forms, together on one plane (Together:
// CAPD binds fixed ports, so two planes of its cannot run at once).
// CAPI's rules apply and pass in each; the rules about hosts and their
// disks are reported as not applicable, never as passed; the plane's
// CPU is counted once.
func TestInMemoryProviderRunsTheScaleInScenarioTwiceOnOnePlane(t *testing.T) {
	root, s, def := repoScenario(t, "three-node-scale-in")
	cfg := repoProvider(t, root, "inmemory")
	dir := labtest.Dir(t)
	specs := []Spec{
		{Scenario: s, Lab: def, Form: scenario.Plain, Dir: filepath.Join(dir, "plain"), Name: "plain"},
		{Scenario: s, Lab: def, Form: scenario.ClusterClass, Dir: filepath.Join(dir, "clusterclass"), Name: "clusterclass"},
	}
	results := make([]result.Result, len(specs))
	Together(context.Background(), specs, Options{RepoRoot: root, Dir: dir, Scale: timescale.Scale(0.01), Progress: testWriter{t}, Provider: cfg}, 0,
		func(i int, res result.Result) { results[i] = res })
	planeCounted := 0
	for i, res := range results {
		if res.Error != "" {
			t.Fatalf("run %s stopped: %s", specs[i].Name, res.Error)
		}
		if res.Provider != "inmemory" || res.Form != specs[i].Form || res.Cluster != "" {
			t.Errorf("run %s: result names provider %q, form %q, cluster %q", specs[i].Name, res.Provider, res.Form, res.Cluster)
		}
		checkInMemoryRules(t, specs[i].Name, res.Checks)
		for _, c := range res.Profile.CPU {
			if c.Name == "kube-apiserver" && c.CPU > 0 {
				planeCounted++
				if res.Profile.Batch != len(specs) {
					t.Errorf("run %s counts the shared plane's CPU but says it is a batch of %d runs, want %d", specs[i].Name, res.Profile.Batch, len(specs))
				}
			}
		}
	}
	if planeCounted != 1 {
		t.Errorf("the shared plane's kube-apiserver is counted in %d runs' profiles, want 1", planeCounted)
	}
}

// checkInMemoryRules asserts what an in-memory scale-in run's rules say.
func checkInMemoryRules(t *testing.T, run string, checks []check.Result) {
	t.Helper()
	status := map[string]check.Status{}
	for _, r := range checks {
		status[r.Rule] = r.Status
		if r.Status == check.Fail {
			t.Errorf("%s: rule %s failed: %v", run, r.Rule, r.Violations)
		}
	}
	for _, rule := range []string{"host-bound-once", "no-wipe-under-live-machine", "same-hosts", "etcd-member-removed-first", "persistent-data", "end-etcd", "end-coredns"} {
		if status[rule] != check.NotApplicable {
			t.Errorf("%s: rule %s is %q for a provider without hosts, etcd images or a CoreDNS tag, want n/a", run, rule, status[rule])
		}
	}
	for _, rule := range []string{"kcp-max-machines", "kcp-one-deleting", "etcd-quorum", "deletion-order", "end-machines-up-to-date", "end-control-plane", "end-nodes-ready", "end-kube-proxy", "workload-data", "capi-agrees", "rbac-sufficient"} {
		if status[rule] != check.Pass {
			t.Errorf("%s: rule %s is %q, want pass", run, rule, status[rule])
		}
	}
}

// In place on a provider and an extension nobody here wrote: CAPI's
// in-memory provider with CAPI's test runtime extension. The extension
// cannot change the kubeadm feature gates KCP sets per version, so KCP
// rolls the Machines out instead of updating them, and same-machines
// must say so, Machine by Machine, while CAPI's own end state holds.
func TestCAPIsTestExtensionCannotUpdateTheseVersionsInPlace(t *testing.T) {
	root, s, def := repoScenario(t, "three-node-in-place")
	cfg := repoProvider(t, root, "inmemory-testextension")
	res := Run(context.Background(), s, def, scenario.Plain, Options{RepoRoot: root, Dir: labtest.Dir(t), Scale: timescale.Scale(0.01),
		Progress: testWriter{t}, Provider: cfg})
	if res.Error != "" {
		t.Fatalf("the run stopped: %s", res.Error)
	}
	deleted, created := 0, 0
	for _, r := range res.Checks {
		switch {
		case r.Rule == "same-machines":
			if r.Status != check.Fail {
				t.Fatalf("same-machines %s: KCP replaced the Machines and the rule did not see it", r.Status)
			}
			for _, v := range r.Violations {
				switch {
				case strings.Contains(v.Message, "deleted during an in-place upgrade"): // being deleted, or gone
					deleted++
				case strings.Contains(v.Message, "was created during an in-place upgrade"):
					created++
				}
			}
		case r.Status == check.Fail:
			t.Errorf("rule %s failed: %v (only same-machines should)", r.Rule, r.Violations)
		}
	}
	if deleted != 3 || created != 3 {
		t.Errorf("same-machines named %d deleted and %d created Machines, want each of the 3 replaced", deleted, created)
	}
}
