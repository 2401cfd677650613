package result

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
)

// testdata/old-results.json is three runs of a real suite's results.json
// (make e2e GINKGO_LABELS=baremetal); new-results.json is the next
// night's as it would come: scale-in broke kcp-one-deleting, the
// single-node upgrade took twice as long, cold-spare-rolling did not run,
// reset-reprovisioning is new.
func TestDiffNamesWhatChangedBetweenTwoNights(t *testing.T) {
	old, new := twoNights(t)
	changes := Diff(old, new, DiffOptions{Slower: 0.25, MinSlower: 5 * time.Second})
	var out bytes.Buffer
	WriteDiff(&out, changes)
	for _, want := range []string{
		"! baremetal three-node-scale-in/plain: kcp-one-deleting started failing (was pass): 2 Machines of KCP sc-cp deleting at once",
		"! baremetal single-node-in-place/plain: upgrade took 12.8s, was 6.4s (+100%)",
		"! baremetal cold-spare-rolling/plain/mixed: no longer run",
		"  baremetal reset-reprovisioning/plain: new run: PASS",
		"4 change(s), 3 regression(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, out.String())
		}
	}
	if n := Regressions(changes); n != 3 {
		t.Errorf("%d regressions, want 3", n)
	}
	// A night like the last is no change; a slowdown under the
	// threshold is none either.
	if c := Diff(old, old, DiffOptions{Slower: 0.25, MinSlower: 5 * time.Second}); len(c) != 0 {
		t.Errorf("the same results differ: %+v", c)
	}
	if c := Diff(old[:1], new[:1], DiffOptions{Slower: 1.5, MinSlower: 5 * time.Second}); len(c) != 0 {
		t.Errorf("a 100%% slowdown under a 150%% threshold: %+v", c)
	}
}

// Two suites that must agree (the same scenarios at two time scales)
// differ wherever a rule is judged otherwise, either way, and not by
// their times.
func TestVerdictDiffNamesEveryRuleJudgedOtherwise(t *testing.T) {
	old, new := twoNights(t)
	changes := Diff(old, new, DiffOptions{Verdicts: true})
	var out bytes.Buffer
	WriteDiff(&out, changes)
	if !strings.Contains(out.String(), "! baremetal three-node-scale-in/plain: kcp-one-deleting is fail, was pass: 2 Machines of KCP sc-cp deleting at once") {
		t.Errorf("verdict diff lacks the rule that failed at one side only:\n%s", out.String())
	}
	if strings.Contains(out.String(), "upgrade took") {
		t.Errorf("verdict diff compares times:\n%s", out.String())
	}
	// Fixed is a difference too: the other way round, the same rule.
	back := Diff(new, old, DiffOptions{Verdicts: true})
	if !slices.ContainsFunc(back, func(c Change) bool {
		return c.Regression && strings.Contains(c.What, "kcp-one-deleting is pass, was fail")
	}) {
		t.Errorf("a rule that passes on the second side only is no regression: %+v", back)
	}
	if c := Diff(old, old, DiffOptions{Verdicts: true}); len(c) != 0 {
		t.Errorf("the same results differ: %+v", c)
	}
	// A run on one side only, or stopped on one side only, is a
	// difference whichever side it is on.
	if !slices.ContainsFunc(changes, func(c Change) bool { return c.Regression && strings.Contains(c.What, "new run") }) {
		t.Errorf("a run on the second side only is no regression: %+v", changes)
	}
	if !slices.ContainsFunc(back, func(c Change) bool { return c.Regression && c.What == "no longer run" }) {
		t.Errorf("a run on the first side only is no regression: %+v", back)
	}
	stopped := slices.Clone(old)
	stopped[0].Error = "the plane did not start"
	for _, pair := range [][2][]Result{{stopped, old}, {old, stopped}} {
		if !slices.ContainsFunc(Diff(pair[0], pair[1], DiffOptions{Verdicts: true}), func(c Change) bool {
			return c.Regression && strings.Contains(c.What, "the plane did not start")
		}) {
			t.Errorf("a run stopped on one side only is no regression")
		}
	}
}

func TestTableShowsEachRunAndWhatItBroke(t *testing.T) {
	new, err := Read("testdata/new-results.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteTable(&out, new)
	for _, want := range []string{
		"FAIL     baremetal three-node-scale-in/plain",
		"PASS     baremetal single-node-in-place/plain",
		"baremetal three-node-scale-in/plain broke 02:14:07.310 kcp-one-deleting: 2 Machines of KCP sc-cp deleting at once [Machine/sc-cp-a, Machine/sc-cp-b]",
		"3 run(s), 1 failed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestJUnitHasACasePerRunAndAFailurePerBrokenRun(t *testing.T) {
	new, err := Read("testdata/new-results.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), JUnitFile)
	if err := WriteJUnit(path, new); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{`tests="3" failures="1" errors="0"`, `<testcase name="baremetal three-node-scale-in/plain" classname="baremetal"`, `kcp-one-deleting: 2 Machines of KCP sc-cp deleting at once`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("junit.xml lacks %q:\n%s", want, b)
		}
	}
}

// What Write writes, Read reads back whole.
func TestWriteThenRead(t *testing.T) {
	old, err := Read("testdata/old-results.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), File)
	if err := Write(path, old); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, old) {
		t.Fatalf("read back %d results unlike the %d written", len(back), len(old))
	}
}

func TestReadNamesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	os.WriteFile(path, []byte(`{"not": "a list"}`), 0o644)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v; want one naming %s", err, path)
	}
}

// A run on real VMs is another run than the same scenario on modelled
// hardware: its key (what a report diff matches across suites) says so.
func TestKeyNamesTheBackend(t *testing.T) {
	modelled := Result{Provider: "baremetal", Scenario: "single-node-in-place", Form: "plain", HostOS: "ab"}
	onVMs := modelled
	onVMs.Backend = "qemu"
	if modelled.Key() != "baremetal single-node-in-place/plain" || onVMs.Key() != "baremetal single-node-in-place/plain/qemu" {
		t.Fatalf("keys %q and %q", modelled.Key(), onVMs.Key())
	}
	inFleet := modelled
	inFleet.Cluster = "sn-3"
	if inFleet.Key() != "baremetal single-node-in-place/plain sn-3" {
		t.Fatalf("a fleet's cluster: key %q", inFleet.Key())
	}
}

// A run that stopped is one regression, said once: the rules it never
// reached are neither fixed nor newly broken.
func TestAStoppedRunIsOneChange(t *testing.T) {
	old := []Result{{Provider: "p", Scenario: "s", Checks: []check.Result{{Rule: "end-nodes-ready", Status: check.Fail}, {Rule: "same-hosts", Status: check.Pass}}}}
	new := []Result{{Provider: "p", Scenario: "s", Error: "the plane did not start",
		Checks: []check.Result{{Rule: "end-nodes-ready", Status: check.NotRun}, {Rule: "same-hosts", Status: check.NotRun}}}}
	changes := Diff(old, new, DiffOptions{Slower: 0.25})
	if len(changes) != 1 || !changes[0].Regression || !strings.Contains(changes[0].What, "stopped early") {
		t.Errorf("changes %+v, want the stop alone", changes)
	}
}

// A profile prints each process's peak memory when it was read, and no
// memory line when none was.
func TestProfilePrintsPeakMemory(t *testing.T) {
	p := Profile{Phases: []PhaseTime{{Name: PhaseUpgrade, Took: time.Minute}},
		CPU: []ProcessCPU{{Name: "capm3", CPU: time.Second, PeakRSS: 96 << 20}, {Name: "harness", CPU: 2 * time.Second}}}
	if got := p.String(); !strings.HasSuffix(got, "\npeak rss: capm3 96 MiB") {
		t.Errorf("profile:\n%s\nwant it to end with capm3's peak RSS alone", got)
	}
	p.CPU[0].PeakRSS = 0
	if got := p.String(); strings.Contains(got, "peak rss") {
		t.Errorf("profile without memory read:\n%s", got)
	}
}

// twoNights are testdata's results of two nights: a rule that started
// failing, a slower upgrade, a run gone and a new one.
func twoNights(t *testing.T) (old, new []Result) {
	t.Helper()
	var err error
	if old, err = Read("testdata/old-results.json"); err != nil {
		t.Fatal(err)
	}
	if new, err = Read("testdata/new-results.json"); err != nil {
		t.Fatal(err)
	}
	return old, new
}
