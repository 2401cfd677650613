package fleet

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A fleet scaled to a lab size keeps its mix: every group scaled, none
// below one cluster, the lab the size asked for or what the clusters
// take when that is more.
func TestAFleetScalesToALabSize(t *testing.T) {
	for _, c := range []struct {
		hosts, clusters, labHosts int
		groups                    []int
	}{
		{10, 6, 13, []int{4, 1, 1}}, // the rolling cluster alone takes 6 hosts
		{100, 55, 100, []int{40, 10, 5}},
		{300, 165, 300, []int{120, 30, 15}},
		{1000, 550, 1000, []int{400, 100, 50}},
	} {
		fl, err := LoadScaled("../../fixtures/fleets/hundred.yaml", c.hosts)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, cl := range fl.Clusters {
			counts[cl.Name[:strings.LastIndex(cl.Name, "-")]]++
		}
		got := []int{counts["sn"], counts["si"], counts["roll"]}
		if len(fl.Clusters) != c.clusters || len(fl.Lab.Spec.Hosts) != c.labHosts || got[0] != c.groups[0] || got[1] != c.groups[1] || got[2] != c.groups[2] {
			t.Errorf("scaled to %d: %d clusters %v on %d hosts; want %d %v on %d", c.hosts, len(fl.Clusters), got, len(fl.Lab.Spec.Hosts), c.clusters, c.groups, c.labHosts)
		}
	}
	if _, err := LoadScaled("../../fixtures/fleets/hundred.yaml", 2000); err == nil || !strings.Contains(err.Error(), "at most 1000") {
		t.Fatalf("2000 hosts (1100 clusters): %v", err)
	}
}

// The curve is written as a table, JSON and an SVG that parses, with a
// line per series and a point per size.
func TestTheCurveIsWrittenAndPlotted(t *testing.T) {
	var reps []*Report
	for i, n := range []int{100, 13} {
		name := "hundred"
		if n == 13 {
			name = "hundred-10" // scaled to 10 hosts, its clusters took 13
		}
		reps = append(reps, &Report{Fleet: name, Hosts: n, Clusters: n / 2, Passed: n / 2, Wall: time.Duration(i+1) * time.Minute,
			Wave: time.Minute, Upgrade: Spread{N: n / 2, P95: 30 * time.Second}, PeakTotalRSS: int64(n) << 24,
			Processes: []ProcessCost{{Name: harness, PeakRSS: 1 << 29}, {Name: "kube-apiserver", PeakRSS: 1 << 30}}})
	}
	// A size where every cluster stopped in provisioning: no wave, no
	// upgrade, so no point on those two lines (a zero would read as
	// instant).
	reps = append(reps, &Report{Fleet: "thousand", Hosts: 1000, Clusters: 250, Stopped: 250, Wall: 16 * time.Minute, Provision: 15 * time.Minute,
		PeakTotalRSS: 5 << 30, Processes: []ProcessCost{{Name: harness, PeakRSS: 1 << 29}, {Name: "kube-apiserver", PeakRSS: 3 << 30}}})
	dir := t.TempDir()
	if err := WriteCurve(dir, reps); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, CurvePlot))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Lines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("curve.svg does not parse: %v", err)
	}
	if len(doc.Lines) != 7 {
		t.Fatalf("%d lines; want 4 times and 3 memories", len(doc.Lines))
	}
	for i, l := range doc.Lines {
		want := 3
		if i == 2 || i == 3 { // wave, upgrade p95
			want = 2
		}
		if n := len(strings.Fields(l.Points)); n != want {
			t.Fatalf("line %d has %d points; want %d: %q", i, n, want, l.Points)
		}
	}
	if !strings.Contains(string(svg), "fleet hundred, thousand:") {
		t.Errorf("the title does not name both fleets:\n%s", svg[:min(len(svg), 400)])
	}
	table, err := os.ReadFile(filepath.Join(dir, CurveText))
	if err != nil {
		t.Fatal(err)
	}
	if string(table) != CurveTable(reps) {
		t.Fatalf("the printed table is not the written one (given largest first):\n%s", CurveTable(reps))
	}
	rows := strings.Split(strings.TrimSpace(string(table)), "\n")
	if len(rows) != 4 || !strings.HasPrefix(rows[1], "13 ") || !strings.HasPrefix(rows[2], "100 ") || !strings.HasPrefix(rows[3], "1000 ") {
		t.Fatalf("the table is not smallest first:\n%s", table)
	}
}

// A fleet.json written by one run is a point of a later curve.
func TestAReportReadsBackAsWritten(t *testing.T) {
	dir := t.TempDir()
	want := &Report{Fleet: "hundred", Hosts: 100, Clusters: 55, Passed: 40, Wall: 7 * time.Minute,
		Processes: []ProcessCost{{Name: harness, PeakRSS: 1 << 28}}, ManagerArgs: map[string][]string{"capi": {"--kube-api-qps=100"}}}
	if err := want.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("read back:\n%s\nwritten:\n%s", got, want)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"hosts": "many"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(bad); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("a bad report: %v", err)
	}
}
