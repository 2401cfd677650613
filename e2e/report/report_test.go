package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

func TestReportShowsTheTableAndEachRunsTimeline(t *testing.T) {
	dir := t.TempDir()
	tl, err := timeline.Create(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	tl.Add(timeline.Entry{Time: t0, Kind: vocab.KindMachine, Name: "sc-cp-a", New: map[string]string{vocab.FieldPhase: "Provisioning"}})
	tl.Add(timeline.Entry{Time: t0.Add(time.Second), Kind: timeline.KindStep, Name: check.StepUpgrade})
	tl.Add(timeline.Entry{Time: t0.Add(2 * time.Second), Kind: vocab.KindMachine, Name: "sc-cp-a", New: map[string]string{vocab.FieldPhase: "Running", vocab.FieldUpdating: "true"}})
	tl.Add(timeline.Entry{Time: t0.Add(3 * time.Second), Kind: vocab.KindHost, Name: "node-0", New: map[string]string{vocab.FieldState: "provisioned"}})
	tl.Add(timeline.Entry{Time: t0.Add(3 * time.Second), Kind: vocab.KindIronicNode, Name: "node-0", New: map[string]string{vocab.FieldState: "active"}})
	tl.Close()
	broken := check.Violation{Time: t0, Rule: "host-bound-once", Objects: []string{"BareMetalHost/node-0"}, Message: "bound twice"}
	res := result.Result{Provider: "baremetal", Scenario: "single-node-in-place", Form: scenario.Plain, HostOS: "ab", Strategy: "in-place", Duration: 90 * time.Second,
		Timeline: filepath.Join(dir, "timeline.jsonl"), Management: "kind",
		APIServerCrashes: []string{"kube-apiserver (pid 7) crashed: panic: boom in main.f (log /x.log); restarted as the kubelet restarts a static Pod (pid 9)"},
		Checks: []check.Result{{Rule: "host-bound-once", Status: check.Fail, Violations: []check.Violation{broken}}, {Rule: "same-machines", Status: check.Pass},
			{Rule: "deletion-order", Status: check.NotExercised}}}
	onVMs := result.Result{Provider: "baremetal", Scenario: "single-node-in-place", Form: scenario.Plain, HostOS: "ab", Backend: "qemu", Strategy: "in-place",
		Timeline: filepath.Join(dir, "baremetal-single-node-in-place-plain-qemu-r2", "timeline.jsonl")}
	theirs := result.Result{Provider: "inmemory", Scenario: "single-node-in-place", Form: scenario.Plain, Strategy: "in-place",
		Timeline: filepath.Join(dir, "missing.jsonl"),
		Checks:   []check.Result{{Rule: "host-bound-once", Status: check.NotApplicable}, {Rule: "same-machines", Status: check.Pass}, {Rule: "deletion-order", Status: check.Pass}}}
	res.Profile = result.Profile{Phases: []result.PhaseTime{{Name: result.PhaseUpgrade, Took: 40 * time.Second}}}
	layout := Layout{Processes: 2, Runs: []Placement{
		{Run: RunAnchor(res), Process: 1, Start: t0, End: t0.Add(90 * time.Second)},
		{Run: RunAnchor(theirs), Process: 2, Start: t0.Add(time.Second), End: t0.Add(60 * time.Second)},
	}}
	onOSTree := res
	onOSTree.HostOS, onOSTree.Checks = "ostree", nil
	if err := Write(dir, []result.Result{onOSTree, theirs, res, onVMs}, layout); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	for _, want := range []string{`<td title="single-node-in-place (plain) on ab hosts">`, `<td title="ostree">ostree</td>`, `class="m fail" title="host-bound-once: fail: `, `class="m unex" title="deletion-order: not exercised">○</td>`, "bound twice", `<rect x=`, "Machine/sc-cp-a", "BareMetalHost/node-0", "BareMetalHost/node-0 · Ironic: active from 3s", "stroke-dasharray",
		"2 process(es) ran the runs", "management cluster kind;", "<b>Management</b> kube-apiserver (pid 7) crashed: panic: boom", ">process 1<", ">process 2<", RunAnchor(res) + ": from 0s for 1m30s", "wall: upgrade 40s",
		`<th class="group" colspan="10">rollout</th>`, `<h2 id="baremetal-single-node-in-place-plain-qemu-r2">single-node-in-place #2 (plain) on ab hosts, qemu VMs on baremetal</h2>`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// A provider's run sits beside the reference's, its inapplicable rule
	// shown as n/a, not as passed.
	ours, other, ostree := strings.Index(page, "<td>baremetal</td>"), strings.Index(page, "<td>inmemory</td>"), strings.LastIndex(page, "<td>baremetal</td>")
	if ours < 0 || other < ours || ostree < other {
		t.Fatalf("want the baremetal row, the inmemory row, then the baremetal run on OSTree hosts: %d, %d, %d", ours, other, ostree)
	}
	row, _, _ := strings.Cut(page[other:], "</tr>")
	if !strings.Contains(row, `class="m na" title="host-bound-once: n/a">·</td>`) || strings.Count(row, `class="m pass"`) != 2 {
		t.Errorf("inmemory row should show host-bound-once n/a and two passes: %s", row)
	}
}

// The page opens with one line a reader takes in at once, then what
// failed, each with its first violation or why it stopped; a run that
// stopped before its upgrade reads as stopped, its rules as not run.
func TestReportStartsWithTheSummaryAndWhatFailed(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	broken := check.Violation{Time: t0, Rule: "kcp-max-machines", Objects: []string{"KubeadmControlPlane/c"}, Message: "4 Machines, at most 3"}
	pass := result.Result{Provider: "baremetal", Scenario: "three-node-scale-in", Form: scenario.Plain, HostOS: "ab", Started: t0, Duration: time.Minute,
		Checks: []check.Result{{Rule: "kcp-max-machines", Status: check.Pass}}}
	fail := result.Result{Provider: "baremetal", Scenario: "cold-spare-rolling", Form: scenario.ClusterClass, HostOS: "ab", Started: t0, Duration: 2 * time.Minute,
		Checks: []check.Result{{Rule: "kcp-max-machines", Status: check.Fail, Violations: []check.Violation{broken}}}}
	why := "the plane did not start: etcd: exit status 1"
	stopped := result.Result{Provider: "inmemory", Scenario: "cold-spare-rolling", Form: scenario.Plain, Started: t0.Add(time.Minute), Duration: 3 * time.Minute, Error: why,
		Checks: check.Stopped([]check.Result{{Rule: "kcp-max-machines", Status: check.Pass}, {Rule: "end-machines-up-to-date", Status: check.Fail,
			Violations: []check.Violation{{Rule: "end-machines-up-to-date", Message: "no Machine"}}}}, nil, why)}
	if err := Write(dir, []result.Result{pass, fail, stopped}, Layout{}); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	summary := `<p class="summary bad">3 run(s): 1 passed, 1 failed, 1 stopped; 1 rule(s) broken; wall time 4m0s</p>`
	at := strings.Index(page, summary)
	if at < 0 || at > strings.Index(page, "<table>") {
		t.Fatalf("the page does not open with %q before the table", summary)
	}
	for _, want := range []string{
		`cold-spare-rolling (clusterclass) on ab hosts on baremetal</a>: <span class="v">` + broken.String(),
		`cold-spare-rolling (plain) on inmemory</a>: <span class="v">stopped: ` + why,
		`title="end-machines-up-to-date: not run: the run stopped before its upgrade: ` + why + `">–</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(page, "no Machine") {
		t.Error("a rule of a run stopped before its upgrade is shown as failed")
	}
}

// Two providers' runs of one scenario, form and host OS sit side by side:
// their times, what the workload's users saw and what became of the
// hosts, in words, and the rules whose verdicts differ. A scenario only
// one provider ran has no comparison.
func TestReportPutsProvidersSideBySide(t *testing.T) {
	dir := t.TempDir()
	run := func(provider string, upgrade time.Duration, sameHosts check.Status, note string) result.Result {
		return result.Result{Provider: provider, Scenario: "three-node-scale-in", Form: scenario.Plain, HostOS: "ab", Upgrade: upgrade,
			Profile: result.Profile{Phases: []result.PhaseTime{{Name: result.PhaseProvision, Took: 4 * time.Minute}}},
			Checks: []check.Result{{Rule: "api-availability", Status: check.Pass, Note: note}, {Rule: "same-hosts", Status: sameHosts},
				{Rule: "kcp-max-machines", Status: check.Pass}}}
	}
	capm3 := run("metal3", 195*time.Second, check.Pass, "unavailable 0s during the upgrade")
	ours := run("baremetal-bmo", 150*time.Second, check.Fail, "unavailable 2s during the upgrade")
	ours.Checks[1].Violations = []check.Violation{{Rule: "same-hosts", Message: "host node-3 joined"}}
	alone := run("metal3", time.Minute, check.Pass, "")
	alone.Scenario = "cold-spare-rolling"
	if err := Write(dir, []result.Result{capm3, ours, alone}, Layout{}); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	_, side, found := strings.Cut(page, `<h2 id="side-by-side">`)
	if !found {
		t.Fatal("report.html has no side-by-side section")
	}
	side, _, _ = strings.Cut(side, "<h2")
	for _, want := range []string{"<h3>three-node-scale-in (plain) on ab hosts</h3>", ">baremetal-bmo</a></td><td>FAIL</td><td>4m0s</td><td>2m30s</td>",
		">metal3</a></td><td>PASS</td><td>4m0s</td><td>3m15s</td>", "pass: unavailable 0s during the upgrade", "fail: host node-3 joined",
		"Verdicts differ on: same-hosts."} {
		if !strings.Contains(side, want) {
			t.Errorf("the side-by-side section lacks %q:\n%s", want, side)
		}
	}
	if strings.Contains(side, "cold-spare-rolling") {
		t.Error("a scenario one provider ran has a comparison")
	}
}
