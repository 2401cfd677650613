//go:build integration

// A real plane (kube-apiserver, etcd, CAPI's managers: make tools) runs
// these tests; make test-integration runs them, make test does not.

package fleet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/result"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// An in-place and a scale-in cluster on one plane and one lab, upgraded
// one at a time: each passes every rule on its own timeline, which holds
// its own hosts and not its neighbour's (the scale-in cluster's hosts are
// deprovisioned and reprovisioned, not updated in place by the extension
// the other cluster needs: persistent-data breaks if they are); the
// second upgrade starts after the first ended; and the report has read
// the plane's processes and metrics.
func TestAFleetUpgradesInBatchesOnOnePlane(t *testing.T) {
	dir := labtest.Dir(t)
	fl, rep, results := runFleet(t, "testdata/in-place-and-scale-in.yaml", Options{Dir: dir, APIServerProfile: 2 * time.Second})
	checkOwnHostsOneAtATime(t, fl, results)
	if rep.Upgrade.N != 2 || rep.Upgrade.Max <= 0 || rep.Wave < rep.Upgrade.Max {
		t.Errorf("upgrade spread %+v, wave %s", rep.Upgrade, rep.Wave)
	}
	// Each upgraded cluster's settle, bounded by the fleet's default.
	if rep.Settle.N != 2 || rep.Settle.Max <= 0 || rep.SettleBound != DefaultSettle || rep.Settle.Max > rep.SettleBound+10*time.Second ||
		!strings.Contains(rep.String(), "settle after done (2, at most 5m0s)") {
		t.Errorf("settle spread %+v (bound %s); the report says:\n%s", rep.Settle, rep.SettleBound, rep)
	}
	// Each cluster's own provisioning, within the fleet's bound and the
	// fleet's provisioning time (the last cluster's ends it).
	if rep.ProvisionEach.N != 2 || rep.ProvisionEach.Max <= 0 || rep.ProvisionEach.Max > rep.Provision || rep.ProvisionBound != DefaultProvision ||
		!strings.Contains(rep.String(), "provisioning per cluster (2, at most 15m0s)") {
		t.Errorf("provisioning spread %+v (bound %s, the fleet's %s); the report says:\n%s", rep.ProvisionEach, rep.ProvisionBound, rep.Provision, rep)
	}
	checkReadThePlane(t, rep, dir)
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ReportFile)); err != nil {
		t.Fatal(err)
	}
}

// runFleet runs the fleet file at the suite's time scale (o's
// RepoRoot, Scale and Progress are the test's; its Dir, a fresh folder
// when unset) and fails the test unless every cluster passed.
func runFleet(t *testing.T, file string, o Options) (*Fleet, *Report, []result.Result) {
	t.Helper()
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fl, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	o.RepoRoot, o.Scale, o.Progress = root, timescale.Scale(0.01), testWriter{t}
	if o.Dir == "" {
		o.Dir = labtest.Dir(t)
	}
	rep, results, err := Run(context.Background(), fl, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if rep.Passed != len(fl.Clusters) || len(results) != len(fl.Clusters) {
		for _, r := range results {
			t.Errorf("%s: %s %s %v", r.Cluster, r.Verdict(), r.Error, check.Failed(r.Checks))
		}
		t.Fatalf("%d of %d clusters passed", rep.Passed, len(fl.Clusters))
	}
	return fl, rep, results
}

// checkOwnHostsOneAtATime holds each cluster's timeline to its own hosts
// (none of its neighbour's) and, with batch 1, the second upgrade to
// start after the first was done.
func checkOwnHostsOneAtATime(t *testing.T, fl *Fleet, results []result.Result) {
	t.Helper()
	var upgrades [][2]int64
	for i, r := range results {
		own, other := fl.Clusters[i].Hosts[0], fl.Clusters[1-i].Hosts[0]
		if r.Cluster != fl.Clusters[i].Name {
			t.Errorf("result %d names cluster %q", i, r.Cluster)
		}
		entries, err := timeline.Read(r.Timeline)
		if err != nil {
			t.Fatal(err)
		}
		hosts := map[string]bool{}
		var from, to int64
		for _, e := range entries {
			if e.Kind == timeline.KindLab {
				hosts[e.Name] = true
			}
			if e.Kind == timeline.KindStep && e.Name == check.StepUpgrade {
				from = e.Time.UnixNano()
			}
			if e.Kind == timeline.KindStep && e.Name == check.StepDone {
				to = e.Time.UnixNano()
			}
		}
		if !hosts[own] || hosts[other] {
			t.Errorf("%s's timeline records the lab hosts %v: want its own %s and not %s", r.Cluster, hosts, own, other)
		}
		upgrades = append(upgrades, [2]int64{from, to})
	}
	slices.SortFunc(upgrades, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	if upgrades[1][0] < upgrades[0][1] {
		t.Errorf("with batch 1 the second upgrade started before the first was done: %v", upgrades)
	}
}

// checkReadThePlane holds the report to what it read of the plane: each
// process's CPU and peak memory, the metrics, the API server's two
// profiles and its requests, CAPI's reconciles.
func checkReadThePlane(t *testing.T, rep *Report, dir string) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range rep.Processes {
		if p.PeakRSS > 0 && p.CPU > 0 {
			seen[p.Name] = true
		}
	}
	for _, want := range []string{"kube-apiserver", "etcd", "harness", "baremetal", "inplace", "capi", "kcp"} {
		if !seen[want] {
			t.Errorf("no CPU or peak RSS for %s: %+v", want, rep.Processes)
		}
	}
	if len(rep.Unread) > 0 {
		t.Errorf("metrics not read: %v", rep.Unread)
	}
	if rep.HarnessWaitMax <= 0 || rep.TimeScale != 0.01 || !strings.Contains(rep.String(), "goroutines waited for a CPU up to") {
		t.Errorf("the harness's wait for a CPU (up to %s) at time scale %g is not in the report", rep.HarnessWaitMax, rep.TimeScale)
	}
	if rep.APIRequestsPerSecondInWave <= 0 || rep.PeakTotalRSS <= 0 {
		t.Errorf("API requests %v/s in the wave, peak RSS %d", rep.APIRequestsPerSecondInWave, rep.PeakTotalRSS)
	}
	// The API server's two CPU profiles, charged by request. CAPI's
	// managers write with PATCH above all while clusters provision; a
	// two-cluster wave can cost the API server less than 100 ms, a few
	// samples at pprof's 100 Hz, so of the wave's profile only samples
	// charged to some work are asked for.
	if len(rep.APIServer) != 2 || rep.APIServer[0].File != APIServerProfileProvisioning || rep.APIServer[1].File != APIServerProfileWave {
		t.Fatalf("API server profiles %+v; want the provisioning's and the wave's", rep.APIServer)
	}
	for _, p := range rep.APIServer {
		if _, err := os.Stat(filepath.Join(dir, p.File)); err != nil {
			t.Error(err)
		}
		if !slices.ContainsFunc(p.Work, func(c Component) bool { return c.CPU > 0 }) {
			t.Errorf("the API server's profile %s has no samples: %+v", p.Phase, p.Work)
		}
	}
	if p := rep.APIServer[0]; !slices.ContainsFunc(p.Work, func(c Component) bool { return strings.HasPrefix(c.Package, "PATCH") && c.CPU > 0 }) {
		t.Errorf("the API server's profile %s shows no PATCH: %+v", p.Phase, p.Work)
	}
	if len(rep.APIRequests) == 0 || !strings.Contains(rep.String(), "API server's most frequent requests") {
		t.Errorf("no request kinds in the report:\n%s", rep)
	}
	reconciled := false
	for _, m := range rep.Managers {
		if m.Name == "capi" && m.Reconciles > 0 && m.ReconcileP95 >= 0 && m.Slowest != "" {
			reconciled = true
		}
	}
	if !reconciled {
		t.Errorf("no reconciles of CAPI's core manager in the wave: %+v", rep.Managers)
	}
}

// A fleet on an existing cluster (--management kubeconfig=PATH): CAPI is
// installed into that cluster and its managers run beside it, the
// cluster provisions and upgrades and passes every rule, and the report
// says where the plane ran and measures only what runs on this machine:
// the managers and the harness, not the cluster's own API server.
func TestAFleetRunsOnAnExistingCluster(t *testing.T) {
	ctx := context.Background()
	existing, err := mgmt.StartBare(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(existing.Stop)
	target, err := mgmt.ParseTarget("kubeconfig=" + existing.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	_, rep, _ := runFleet(t, "testdata/one-in-place.yaml", Options{APIServerProfile: time.Second, Management: target})
	if rep.Management != target.String() || !strings.Contains(rep.String(), "management plane: --management kubeconfig="+existing.Kubeconfig) {
		t.Errorf("the report names the plane %q; want %q:\n%s", rep.Management, target, rep)
	}
	ran := map[string]bool{}
	for _, p := range rep.Processes {
		ran[p.Name] = p.CPU > 0
		if p.PeakRSS > rep.PeakTotalRSS {
			t.Errorf("%s's peak RSS %d is above the peak total %d", p.Name, p.PeakRSS, rep.PeakTotalRSS)
		}
	}
	if _, apiServer := ran["kube-apiserver"]; !ran["capi"] || !ran["harness"] || apiServer {
		t.Errorf("processes measured %v: want CAPI's manager and the harness, and not the existing cluster's API server", ran)
	}
	// CAPI's API is the existing cluster's now.
	c, err := client.New(clientConfig(t, existing.Kubeconfig), client.Options{Scheme: mgmt.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, &crd); err != nil {
		t.Errorf("CAPI's Cluster CRD in the existing cluster: %v", err)
	}
}

func clientConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
