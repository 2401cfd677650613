package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/fleet"
)

// `fleet curve --with A --with B` and no --hosts runs nothing: it draws
// the curve of the two reports (no plane, no build).
func TestACurveIsDrawnFromEarlierReportsAlone(t *testing.T) {
	dir := t.TempDir()
	var with []string
	for _, r := range []*fleet.Report{
		{Fleet: "hundred", Hosts: 100, Clusters: 55, Passed: 55, Wall: 17 * time.Minute, PeakTotalRSS: 3 << 30},
		{Fleet: "thousand", Hosts: 1000, Clusters: 250, Passed: 10, Stopped: 240, Wall: 40 * time.Minute, PeakTotalRSS: 9 << 30},
	} {
		sub := filepath.Join(dir, r.Fleet)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := r.Write(sub); err != nil {
			t.Fatal(err)
		}
		with = append(with, "--with", filepath.Join(sub, fleet.ReportFile))
	}
	art := filepath.Join(dir, "curve")
	out, err := runCLI(t, append([]string{"fleet", "curve", "--artifacts", art}, with...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range []string{fleet.CurveText, fleet.CurveFile, fleet.CurvePlot} {
		if _, err := os.Stat(filepath.Join(art, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out, "1000") || !strings.Contains(out, "100") || strings.Contains(out, "building") {
		t.Errorf("the curve's table names both sizes and nothing was built:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(art, "hosts-10")); err == nil {
		t.Error("a size was run")
	}
}
