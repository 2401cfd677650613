package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/e2e/timeline"
)

// testdata/single-node-run/timeline.jsonl is the timeline a real run of
// single-node-in-place (plain, A/B, the reference provider) recorded.
// `upgradelab check` judges it again with the params a run writes: it
// passes, and the same timeline with a manager's RBAC refusal added fails
// naming the rule.
func TestCheckJudgesARecordedTimelineAgain(t *testing.T) {
	s, def, err := plan.Load("../../scenarios/single-node-in-place.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prov, err := provider.Load("../../fixtures/providers/baremetal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := timeline.Read("testdata/single-node-run/" + result.TimelineFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, _ := json.Marshal(runner.Params(s, def, prov, entries))
	os.WriteFile(filepath.Join(dir, result.ParamsFile), b, 0o644)
	data, _ := os.ReadFile("testdata/single-node-run/" + result.TimelineFile)
	os.WriteFile(filepath.Join(dir, result.TimelineFile), data, 0o644)

	out, err := runCLI(t, "check", dir)
	if err != nil || !regexp.MustCompile(`(?m)^rbac-sufficient +pass `).MatchString(out) {
		t.Fatalf("check of a passing run: %v\n%s", err, out)
	}

	tl, err := timeline.Create(filepath.Join(dir, result.TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1].Time
	for _, e := range entries {
		tl.Add(e)
	}
	tl.Add(timeline.Entry{Time: last, Kind: check.KindForbidden, Name: "baremetal", New: map[string]string{check.FieldCount: "2",
		check.FieldFirst: `secrets is forbidden: User "system:serviceaccount:upgradelab-baremetal-system:upgradelab-baremetal-manager" cannot list resource "secrets"`}})
	tl.Close()
	out, err = runCLI(t, "check", dir)
	if !errors.Is(err, errRulesBroken) || !strings.Contains(out, "rbac-sufficient: manager baremetal was refused 2 request(s)") {
		t.Fatalf("check with a refusal: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "check", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a run's folder") {
		t.Fatalf("check of an empty folder: %v", err)
	}
}
