package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
)

func TestReportShowsTheTableAndEachRunsTimeline(t *testing.T) {
	dir := t.TempDir()
	tl, err := timeline.Create(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	tl.Add(timeline.Entry{Time: t0, Kind: monitor.KindMachine, Name: "sc-cp-a", New: map[string]string{monitor.FieldPhase: "Provisioning"}})
	tl.Add(timeline.Entry{Time: t0.Add(time.Second), Kind: timeline.KindStep, Name: check.StepUpgrade})
	tl.Add(timeline.Entry{Time: t0.Add(2 * time.Second), Kind: monitor.KindMachine, Name: "sc-cp-a", New: map[string]string{monitor.FieldPhase: "Running", monitor.FieldUpdating: "true"}})
	tl.Add(timeline.Entry{Time: t0.Add(3 * time.Second), Kind: monitor.KindHost, Name: "node-0", New: map[string]string{monitor.FieldState: "provisioned"}})
	tl.Close()
	broken := check.Violation{Time: t0, Rule: "host-bound-once", Objects: []string{"BareMetalHost/node-0"}, Message: "bound twice"}
	res := result.Result{Provider: "baremetal", Scenario: "single-node-in-place", Form: scenario.Plain, HostOS: "ab", Strategy: "in-place", Duration: 90 * time.Second,
		Timeline: filepath.Join(dir, "timeline.jsonl"), Management: "kind",
		APIServerCrashes: []string{"kube-apiserver (pid 7) crashed: panic: boom in main.f (log /x.log); restarted as the kubelet restarts a static Pod (pid 9)"},
		Checks: []check.Result{{Rule: "host-bound-once", Status: check.Fail, Violations: []check.Violation{broken}}, {Rule: "same-machines", Status: check.Pass},
			{Rule: "deletion-order", Status: check.NotExercised}}}
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
	if err := Write(dir, []result.Result{onOSTree, theirs, res}, layout); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	for _, want := range []string{"single-node-in-place (plain, ab hosts)", "single-node-in-place (plain, ostree hosts)", `class="fail" title="`, `class="unex" title="">not exercised</td>`, "bound twice", `<rect x=`, "Machine/sc-cp-a", "BareMetalHost/node-0", "stroke-dasharray",
		"2 process(es) ran the runs", "management cluster kind;", "<b>Management</b> kube-apiserver (pid 7) crashed: panic: boom", ">process 1<", ">process 2<", RunAnchor(res) + ": from 0s for 1m30s", "wall: upgrade 40s"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
	// A provider's run sits beside the reference's, its inapplicable rule
	// shown as n/a, not as passed.
	ours, other, ostree := strings.Index(page, "<td>baremetal</td>"), strings.Index(page, "<td>inmemory</td>"), strings.LastIndex(page, "<td>baremetal</td>")
	if ours < 0 || other < ours || ostree < other {
		t.Fatalf("want the baremetal row, the inmemory row, then the baremetal run on OSTree hosts: %d, %d, %d", ours, other, ostree)
	}
	row := page[other:]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `class="na" title="">n/a</td>`) || strings.Count(row, `class="pass"`) != 2 {
		t.Errorf("inmemory row should show host-bound-once n/a and two passes: %s", row)
	}
}
