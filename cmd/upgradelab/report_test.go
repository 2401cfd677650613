package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

const (
	oldResults = "../../e2e/result/testdata/old-results.json"
	newResults = "../../e2e/result/testdata/new-results.json"
)

// `upgradelab report` prints the table and fails when a run failed; `report
// diff` prints what changed and fails on a regression, so a nightly job
// can stop on either.
func TestReportAndDiffExitNonZeroOnFailuresAndRegressions(t *testing.T) {
	out, err := runCLI(t, "report", oldResults)
	if err != nil || !strings.Contains(out, "3 run(s), 0 failed") {
		t.Errorf("report of a passing suite: %v\n%s", err, out)
	}
	out, err = runCLI(t, "report", newResults)
	if !errors.Is(err, errRulesBroken) || !strings.Contains(out, "FAIL     baremetal three-node-scale-in/plain") {
		t.Errorf("report of a failing suite: %v\n%s", err, out)
	}
	out, err = runCLI(t, "report", "diff", oldResults, newResults)
	if !errors.Is(err, errRegressions) || !strings.Contains(out, "3 regression(s)") {
		t.Errorf("diff with regressions: %v\n%s", err, out)
	}
	out, err = runCLI(t, "report", "diff", oldResults, oldResults)
	if err != nil || !strings.Contains(out, "no change") {
		t.Errorf("diff of a suite with itself: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "report", "does-not-exist"); err == nil || !strings.Contains(err.Error(), "does-not-exist") {
		t.Errorf("report of a missing folder: %v", err)
	}
}
