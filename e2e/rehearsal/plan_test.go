package rehearsal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

const planHead = "apiVersion: upgradelab.dev/v1alpha1\nkind: RehearsalPlan\nexport: northwind\n"

// A plan's mistakes are named by the file and the field.
func TestABadPlanIsRefusedNamingTheField(t *testing.T) {
	for text, want := range map[string]string{
		planHead + "repeats: 50\n":                          "plan.yaml: repeats: 50 is not between 1 and 20",
		planHead + "faults: [meteor]\n":                     `faults[0]: "meteor" is not one of [flaky-bmc host-does-not-return budget-never-allows]`,
		planHead + "wave: {batch: -1}\n":                    "wave.batch: -1 is negative",
		planHead + "wave: {order: ['[']}\n":                 `wave.order[0]: "[" is not a pattern`,
		planHead + "targets: [{clusters: [a/b]}]\n":         "targets[0]: names no version, image or nicFirmware",
		planHead + "targets: [{version: v1.36.3}]\n":        "targets[0].clusters: at least one pattern",
		planHead + "window: soon\n":                         `"soon" is not a duration`,
		planHead + "windw: 2h\n":                            `unknown field "windw"`,
		"apiVersion: upgradelab.dev/v1alpha1\nkind: Plan\n": `apiVersion/kind: want upgradelab.dev/v1alpha1 RehearsalPlan, got "upgradelab.dev/v1alpha1" "Plan"; export: the site's export folder is required`,
	} {
		_, err := ParsePlan("plan.yaml", []byte(text))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "plan.yaml: ") {
			t.Errorf("%q: %v, want an error naming plan.yaml and %q", text, err, want)
		}
	}
	p, err := ParsePlan("plan.yaml", []byte(planHead+"faults: [flaky-bmc]\n"))
	if err != nil || p.Repeats != 1 {
		t.Fatalf("a plan without repeats: %v, %+v; want one repeat", err, p)
	}
	if w := p.Waves(); len(w) != 2 || w[0].Name != "repeat-1" || w[1].Name != "fault-flaky-bmc" || w[1].Fault != FaultFlakyBMC {
		t.Errorf("waves %+v: want repeat-1 then fault-flaky-bmc", w)
	}
}

// A plan keeps its clusters, gives each its target and NIC firmware, and
// orders the wave by its patterns.
func TestAPlanShapesTheSite(t *testing.T) {
	fixtures := repoFixtures(t)
	cat, err := LoadCatalogs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePlan(filepath.Join(fixtures, "rehearsal", "plan.yaml"), []byte(planHead+`clusters: [retail/*, gateway]
wave: {batch: 1, order: [edge/*, store-0107]}
targets:
- {clusters: [retail/store-0042], image: ubuntu-24.04-k8s-v1.36.3-i40e-2.28, nicFirmware: "9.50"}
- {clusters: ["*"], image: ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview, nicFirmware: "10.0"}
timing: {postSeconds: 150}
`))
	if err != nil {
		t.Fatal(err)
	}
	x, err := Read(p.ExportDir())
	if err != nil {
		t.Fatal(err)
	}
	s := Import(x, cat, p.Options())
	if err := p.Apply(s, cat); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range s.Clusters {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, " "); got != "edge-gateway retail-store-0107 retail-store-0042" {
		t.Errorf("clusters in the wave's order: %s", got)
	}
	store := s.Clusters[2]
	if store.To.Image != "ubuntu-24.04-k8s-v1.36.3-i40e-2.28" || s.Clusters[1].To.Image != "ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview" {
		t.Errorf("targets: store-0042 to %s, store-0107 to %s; want each its first target's", store.To.Image, s.Clusters[1].To.Image)
	}
	if a, b := store.Hosts[0].NICs[0].NVM, s.Clusters[1].Hosts[0].NICs[0].NVM; a != "x710-nvm-9.50" || b != "x710-nvm-10.0-next" {
		t.Errorf("store-0042's port runs %s, store-0107's %s; want each its first target's firmware, 9.50 and 10.0", a, b)
	}
	for _, fp := range s.FailurePoints(cat) {
		if fp.Kind == KindNICDriver {
			t.Errorf("the NVM the plan flashes suits the driver, yet: %s", fp)
		}
	}
	left := s.LeftOut(x)
	if len(left) != 3 || left[1].Object != "Cluster core/inventory" || left[1].Reason != "not among the plan's clusters" {
		t.Errorf("left out %v: want payments, inventory and warehouse, not among the plan's clusters", left)
	}
	if s.Batch != 1 || s.Timing.PostSeconds != 150 {
		t.Errorf("batch %d, POST %gs: want the plan's 1 and 150", s.Batch, s.Timing.PostSeconds)
	}
	p.Targets[0].NICFirmware = "7.00"
	if err := p.Apply(Import(x, cat, p.Options()), cat); err == nil || !strings.Contains(err.Error(), `targets[0].nicFirmware: no NVM image of version "7.00"`) {
		t.Errorf("unknown firmware: %v", err)
	}
	s.WithFault(FaultBudgetNeverAllows)
	if _, blocks := budgetBlocks(store.Workload); store.Workload.Replicas == 0 || !blocks {
		t.Errorf("budget-never-allows left store-0042's %d replica(s) under %+v", store.Workload.Replicas, store.Workload.Budget)
	}
	// Anonymised, the clusters have other names; the plan still finds
	// them by their names in the export.
	p.Anonymise, p.Targets[0].NICFirmware = true, "9.50"
	anon := Import(x, cat, p.Options())
	if err := p.Apply(anon, cat); err != nil || len(anon.Clusters) != 3 || anon.Clusters[0].Source != "" || anon.Clusters[2].Hosts[0].NICs[0].NVM != "x710-nvm-9.50" {
		t.Errorf("an anonymised site under the plan: %v, %d clusters", err, len(anon.Clusters))
	}
	p.Wave.Order = []string{"retail/store-9999"}
	if err := p.CheckExport(x); err == nil || !strings.Contains(err.Error(), `wave.order[0]: "retail/store-9999" matches no cluster of the export`) {
		t.Errorf("a pattern that matches nothing: %v", err)
	}
}

// An upgrade's wall time splits into the hosts' modelled steps (power on
// to an OS, a write, a shutdown), counted once where they overlap and
// only within the upgrade, and the rest; a power-off ends its host's
// steps; the site's time counts the steps at their modelled length.
func TestAnUpgradeSplitsIntoHostStepsAndTheRest(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lab := func(ms int, host, reason string, data ...string) timeline.Entry {
		fields := map[string]string{"reason": reason, "kind": "boot"}
		for i := 0; i+1 < len(data); i += 2 {
			fields[data[i]] = data[i+1]
		}
		return timeline.Entry{Time: at(ms), Kind: timeline.KindLab, Name: host, New: fields}
	}
	entries := []timeline.Entry{
		lab(0, "h1", "WriteStarted"), // begun before the upgrade: counted from its step
		{Time: at(100), Kind: timeline.KindStep, Name: check.StepUpgrade},
		lab(150, "h1", "WriteFinished"),
		lab(1000, "h1", "OSShuttingDown"),
		lab(1300, "h1", "OSShutdown"),
		lab(1400, "h1", "DomainStarted", "kind", "power", "power", "On"),
		lab(1600, "h1", "NetworkBoot"), // the OS loaded; its boot goes on
		lab(1900, "h2", "WriteStarted"),
		lab(2000, "h1", "OSRunning"),
		lab(2300, "h2", "WriteFinished"),
		lab(3000, "h3", "OSShuttingDown"),
		lab(3200, "h3", "DomainStopped", "kind", "power", "power", "Off"), // cut short: the shutdown ends
		{Time: at(5100), Kind: timeline.KindStep, Name: check.StepDone},
	}
	s, ok := SplitUpgrade(entries)
	// Host: 100-150, 1000-1300, 1400-2300 (h1's boot and h2's write
	// overlap), 3000-3200.
	if want := (Split{Wall: 5 * time.Second, Host: 1450 * time.Millisecond, Finished: true}); !ok || s != want {
		t.Fatalf("split %+v, want %+v", s, want)
	}
	if got := s.Lab(0.01); got != 3550*time.Millisecond+145*time.Second {
		t.Errorf("in the site's time at scale 0.01: %s", got)
	}
	if _, ok := SplitUpgrade(entries[:1]); ok {
		t.Error("a timeline without an upgrade step split")
	}
	if s, _ := SplitUpgrade(entries[:len(entries)-1]); s.Finished || s.Wall != 3100*time.Millisecond {
		t.Errorf("an upgrade that never got to done: %+v, want it unfinished, counted to its last entry", s)
	}
}

// The prediction spreads each cluster's time over the repeats, adds the
// wave's batches up, says whether it fits the window, and lists what the
// runs broke and how each fault came out.
func TestThePredictionSpreadsRepeatsAndJudgesTheWindow(t *testing.T) {
	dir := t.TempDir()
	p, err := ParsePlan("plan.yaml", []byte(planHead+"window: 18m30s\nwave: {batch: 1}\nrepeats: 2\nfaults: [flaky-bmc]\n"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(wave, cluster string, wall, host time.Duration, broken bool) result.Result {
		return fakeRun(t, dir, wave, cluster, wall, host, broken, true)
	}
	waves := []Wave{
		{Name: "repeat-1", Results: []result.Result{run("r1", "a", time.Minute, 10*time.Second, false), run("r1", "b", 30*time.Second, 0, false)}},
		{Name: "repeat-2", Results: []result.Result{run("r2", "a", 2*time.Minute, 10*time.Second, false), run("r2", "b", 30*time.Second, 0, true)}},
		{Name: "fault-flaky-bmc", Fault: FaultFlakyBMC, Results: []result.Result{run("f", "a", time.Minute, 0, true), run("f", "b", time.Minute, 0, false)}},
	}
	pred, err := Predict(p, &Record{Site: "northwind", Waves: waves, FailurePoints: []FailurePoint{{Kind: KindSpares, Cluster: "c", Level: Fails}}})
	if err != nil {
		t.Fatal(err)
	}
	a := pred.Clusters[0]
	// a: 50 s of controllers + 10 s of host at 0.01 = 1000 s; then 110 s + 1000 s.
	if a.Cluster != "a" || a.Duration.P50 != 1050*time.Second || a.Duration.P95 != 1110*time.Second || a.Passed != 2 || a.Runs != 2 {
		t.Errorf("cluster a: %+v", a)
	}
	// Batch 1: a then b, 1050 + 30 and 1110 + 30 seconds.
	if pred.Wave.P50 != 1080*time.Second || pred.Wave.P95 != 1140*time.Second || pred.Fits != "at risk" {
		t.Errorf("wave %+v fits %q, want p50 18m and p95 19m at risk in a window of 18m30s", pred.Wave, pred.Fits)
	}
	if fits(pred.Wave, 19*time.Minute) != "yes" || fits(pred.Wave, 17*time.Minute) != "no" || fits(pred.Wave, 0) != "" {
		t.Errorf("fits: a window of the p95 fits, one below the p50 does not, none says nothing")
	}
	if len(pred.Met) != 2 || pred.Met[0].Wave != "repeat-2" || pred.Met[0].Cluster != "b" || pred.Met[1].Wave != "fault-flaky-bmc" {
		t.Errorf("met %+v: want b's break in repeat-2 and a's under the fault", pred.Met)
	}
	if f := pred.Faults; len(f) != 1 || f[0].Verdicts["a"] != "FAIL" || f[0].Verdicts["b"] != "PASS" {
		t.Errorf("faults %+v", f)
	}
	if r := pred.Clusters[1].Rules; len(r) != 1 || strings.Join(r[0].Statuses, ",") != "pass,fail" {
		t.Errorf("b's rules %+v: want both repeats' verdicts", r)
	}
	page := filepath.Join(dir, PredictionPage)
	if err := pred.WritePage(page); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`fits <b class="at risk">at risk</b>`, "<td>repeat-2</td><td>b</td><td>api-availability</td><td>down 40s", "<td>spares-too-few</td>", "18m0s"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// FuzzParsePlan: no plan text panics the parser, and one it accepts has
// at least one repeat.
func FuzzParsePlan(f *testing.F) {
	f.Add(planHead + "window: 2h\nrepeats: 3\nfaults: [flaky-bmc]\nwave: {batch: 2, order: [edge/*]}\n")
	f.Add(planHead + "targets: [{clusters: ['*'], version: v1.36.3, nicFirmware: '9.50'}]\ntiming: {postSeconds: 120}\n")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := ParsePlan("plan.yaml", []byte(text))
		if err == nil && (p.Repeats < 1 || p.Repeats > maxRepeats) {
			t.Errorf("accepted %d repeats", p.Repeats)
		}
	})
}

// fakeRun is a cluster's run of a wave: its timeline (an upgrade of
// wall, host of it a host's write; done only when finished) and result.
func fakeRun(t *testing.T, dir, wave, cluster string, wall, host time.Duration, broken, finished bool) result.Result {
	t.Helper()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, wave+cluster+".jsonl")
	tl, err := timeline.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tl.Add(timeline.Entry{Time: t0, Kind: timeline.KindStep, Name: check.StepUpgrade})
	if host > 0 {
		tl.Add(timeline.Entry{Time: t0.Add(time.Second), Kind: timeline.KindLab, Name: "h", New: map[string]string{"reason": "WriteStarted"}})
		tl.Add(timeline.Entry{Time: t0.Add(time.Second + host), Kind: timeline.KindLab, Name: "h", New: map[string]string{"reason": "WriteFinished"}})
	}
	if finished {
		tl.Add(timeline.Entry{Time: t0.Add(wall), Kind: timeline.KindStep, Name: check.StepDone})
	} else {
		tl.Add(timeline.Entry{Time: t0.Add(2 * time.Second), Kind: timeline.KindLab, Name: "h", New: map[string]string{"reason": "WriteRefused", "message": "no space left on device"}})
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	r := result.Result{Cluster: cluster + "-0", Strategy: "rolling", TimeScale: 0.01, Timeline: path,
		Checks: []check.Result{{Rule: "api-availability", Status: check.Pass, Note: "unavailable 0s"}}}
	if broken {
		r.Checks[0].Status, r.Checks[0].Violations = check.Fail, []check.Violation{{Rule: "api-availability", Message: "down 40s"}}
	}
	if !finished {
		r.Error = "upgrade: 0/1 machines up to date when its time was up"
	}
	return r
}

// A cluster whose upgrade never finished has no duration, and the wave
// it holds never ends: it does not fit any window.
func TestAnUpgradeThatNeverFinishesHoldsTheWave(t *testing.T) {
	dir := t.TempDir()
	p, err := ParsePlan("plan.yaml", []byte(planHead+"window: 10h\nrepeats: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	waves := []Wave{
		{Name: "repeat-1", Results: []result.Result{fakeRun(t, dir, "r1", "a", time.Minute, 0, false, true), fakeRun(t, dir, "r1", "b", time.Minute, 0, false, false)}},
		{Name: "repeat-2", Results: []result.Result{fakeRun(t, dir, "r2", "a", time.Minute, 0, false, true), fakeRun(t, dir, "r2", "b", time.Minute, 0, false, true)}},
	}
	points := []FailurePoint{{Cluster: "b", Kind: KindNoRoom, Level: Fails}, {Cluster: "b", Kind: KindAPIDown, Level: Hurts}, {Cluster: "a", Kind: KindSpares, Level: Fails}}
	pred, err := Predict(p, &Record{Site: "site", Waves: waves, FailurePoints: points})
	if err != nil {
		t.Fatal(err)
	}
	if m := pred.Met; len(m) != 1 || m[0].Lab != "h WriteRefused: no space left on device" || strings.Join(m[0].Predicted, ",") != KindNoRoom {
		t.Errorf("met %+v: want b's stop with the lab's refusal and the failure point that fails it", m)
	}
	b := pred.Clusters[1]
	if b.Unfinished != 1 || b.Duration.N != 1 || b.Passed != 1 || pred.Unfinished != 1 || pred.Wave.N != 1 || pred.Fits != "no" {
		t.Errorf("b %+v, wave %+v unfinished %d fits %q: want b's one unfinished repeat kept out of its spread, the wave unfinished once and not fitting",
			b, pred.Wave, pred.Unfinished, pred.Fits)
	}
	if !strings.Contains(pred.Text(), "did not finish in 1 of 2 repeat(s)") || !strings.Contains(pred.Met[0].What, "stopped: ") {
		t.Errorf("text:\n%s\nmet %+v", pred.Text(), pred.Met)
	}
}

// An API outage is told in the site's time as the upgrade is: its part
// in a host's modelled step at that step's length, the rest as it took.
func TestAnOutageIsSplitLikeTheUpgrade(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	path := filepath.Join(dir, "timeline.jsonl")
	tl, err := timeline.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []timeline.Entry{
		{Time: at(0), Kind: vocab.KindWorkloadAPI, Name: "api", New: map[string]string{vocab.FieldAPIAvailable: "true"}},
		{Time: at(0), Kind: timeline.KindStep, Name: check.StepUpgrade},
		{Time: at(1000), Kind: vocab.KindWorkloadAPI, Name: "api", New: map[string]string{vocab.FieldAPIAvailable: "false"}},
		{Time: at(1000), Kind: timeline.KindLab, Name: "h", New: map[string]string{"reason": "WriteStarted"}},
		{Time: at(1500), Kind: timeline.KindLab, Name: "h", New: map[string]string{"reason": "WriteFinished"}},
		{Time: at(2000), Kind: vocab.KindWorkloadAPI, Name: "api", New: map[string]string{vocab.FieldAPIAvailable: "true"}},
		{Time: at(3000), Kind: timeline.KindStep, Name: check.StepDone},
	} {
		tl.Add(e)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	runs, err := readRuns(Wave{Name: "repeat-1", Results: []result.Result{{Cluster: "a-0", TimeScale: 0.01, Timeline: path}}})
	if err != nil {
		t.Fatal(err)
	}
	// 500 ms in the write (50 s of lab time) and 500 ms outside it.
	if got := runs[0].apiDown; got != 50*time.Second+500*time.Millisecond || runs[0].apiLongest != got {
		t.Errorf("API down %s (longest %s), want 50.5s", got, runs[0].apiLongest)
	}
}
