package benchtable

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/result"
)

// What make bench prints, log lines and all.
const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/upgradelab/upgradelab/e2e/mgmt
cpu: AMD EPYC
BenchmarkPlaneStart-2   	       3	4551234567 ns/op	         4.551 s-to-ready/op
PASS
pkg: github.com/upgradelab/upgradelab/e2e/runner
    bench_test.go:40: 12:00:01 [baremetal single-node-in-place/plain] step 1/6: starting
BenchmarkScenario/single-node-in-place-2         	       1	61000000000 ns/op	        61.20 s-wall/op	        14.40 s-upgrade/op	         5.500 s-start/op	        20.10 s-cpu-kube-apiserver/op
pkg: github.com/upgradelab/upgradelab/sim/workload
BenchmarkEviction-2   	    1000	    190123 ns/op
pkg: github.com/upgradelab/upgradelab/sim/bmc
BenchmarkBMCRequests-2   	   28000	     71000 ns/op	     14084 req/s
BenchmarkSomethingNew-2   	   10	     5000 ns/op	     3.5 widgets/op
`

var here = Env{Machine: "2 cores, 24 GiB, AMD EPYC", Date: "2026-12-04", Commit: "abc123"}

func TestGoBenchmarksBecomeRowsWithTheirCommand(t *testing.T) {
	rows, err := FromGoBench(strings.NewReader(benchOutput), here)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Row{}
	for _, r := range rows {
		got[r.What] = r
	}
	for what, want := range map[string]struct{ figure, command string }{
		"management plane start, until every manager answers /readyz":  {"4.55 s", `go test -run '^$' -bench '^BenchmarkPlaneStart$' ./e2e/mgmt/`},
		"scenario single-node-in-place alone, plain form: wall time":   {"1m1s", `go test -run '^$' -bench '^BenchmarkScenario$/^single-node-in-place$' ./e2e/runner/`},
		"scenario single-node-in-place alone, plain form: its upgrade": {"14.4 s", ""},
		"one eviction through a workload cluster's Eviction API":       {"190 µs", ""},
		"one BMC, authenticated Redfish GETs":                          {"14,084/s", ""},
		"BenchmarkSomethingNew widgets/op":                             {"3.5 widgets/op", ""},
		"BenchmarkSomethingNew ns/op":                                  {"5 µs", ""},
	} {
		r, ok := got[what]
		if !ok {
			t.Errorf("no row %q in %+v", what, rows)
			continue
		}
		if r.Figure != want.figure || want.command != "" && r.Command != want.command {
			t.Errorf("%s: %q by %q, want %q by %q", what, r.Figure, r.Command, want.figure, want.command)
		}
		if r.Machine != here.Machine || r.Commit != here.Commit || r.Date != here.Date {
			t.Errorf("%s: measured on %q at %q on %q", what, r.Machine, r.Commit, r.Date)
		}
	}
	// A scenario's phases and processes are its profile's, not the table's.
	if len(rows) != 7 {
		t.Errorf("%d rows, want 7: %+v", len(rows), rows)
	}
}

// The table is read back as written; a row measured again replaces its
// old self in its place, the others keep their own date and commit, and
// the text above the table is kept.
func TestTheTableKeepsWhatWasNotMeasuredAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	old := Table{Rows: []Row{
		{What: "a", Figure: "1 s", Command: "make a", Machine: "m1", Date: "2026-11-01", Commit: "old"},
		{What: "b | with a pipe", Figure: "2 s", Command: "go test -bench 'X|Y'", Machine: "m1", Date: "2026-11-01", Commit: "old"},
	}}
	if err := old.Write(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "# Benchmarks", "# Benchmarks\n\nA note a maintainer wrote.", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	table, err := ReadTable(path)
	if err != nil {
		t.Fatal(err)
	}
	table.Merge([]Row{{What: "a", Figure: "0.5 s", Command: "make a", Machine: "m2", Date: "2026-12-04", Commit: "new"}, {What: "c", Figure: "3 s", Command: "make c", Machine: "m2", Date: "2026-12-04", Commit: "new"}})
	if err := table.Write(path); err != nil {
		t.Fatal(err)
	}
	again, err := ReadTable(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{What: "a", Figure: "0.5 s", Command: "make a", Machine: "m2", Date: "2026-12-04", Commit: "new"},
		old.Rows[1],
		{What: "c", Figure: "3 s", Command: "make c", Machine: "m2", Date: "2026-12-04", Commit: "new"},
	}
	if len(again.Rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", again.Rows, want)
	}
	for i := range want {
		if again.Rows[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, again.Rows[i], want[i])
		}
	}
	if !strings.Contains(again.Preamble, "A note a maintainer wrote.") {
		t.Errorf("the text above the table was lost: %q", again.Preamble)
	}
}

func TestABrokenRowNamesTheFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte("# B\n"+marker+"\n\n| what | figure |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTable(path); err == nil || !strings.Contains(err.Error(), path+":4: a row of 2 cells, want 6") {
		t.Fatalf("got %v", err)
	}
}

// An e2e folder gives the suite's row under its make target; a timing
// file a whole command's, a failed one saying it failed.
func TestSuitesAndTimedCommandsBecomeRows(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	results := []result.Result{{Scenario: "a", Started: t0, Duration: 2 * time.Minute}, {Scenario: "b", Started: t0.Add(time.Minute), Duration: 3 * time.Minute, Error: "stopped"}}
	b, _ := json.Marshal(results)
	os.WriteFile(filepath.Join(dir, result.File), b, 0o644)
	if _, err := FromFolder(dir); err == nil || !strings.Contains(err.Error(), EnvFile) {
		t.Fatalf("a suite without %s: %v", EnvFile, err)
	}
	if err := WriteEnv(dir, Env{Target: "e2e-faults", Machine: "m", Date: "2026-12-04", Commit: "c1"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "fresh.timing.json"), []byte(`{"what": "make e2e on a fresh machine", "command": "make e2e", "seconds": 2400, "exit": 2, "machine": "m", "date": "2026-12-04", "commit": "c2"}`), 0o644)
	rows, err := FromFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{What: "make e2e-faults: its runs, once built", Figure: "4m0s (1/2 passed)", Command: "make e2e-faults", Machine: "m", Date: "2026-12-04", Commit: "c1"},
		{What: "make e2e on a fresh machine", Figure: "40m0s (failed: exit status 2)", Command: "make e2e", Machine: "m", Date: "2026-12-04", Commit: "c2"},
	}
	if len(rows) != 2 || rows[0] != want[0] || rows[1] != want[1] {
		t.Errorf("rows %+v, want %+v", rows, want)
	}
	if _, err := FromFolder(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no measurement") {
		t.Errorf("an empty folder: %v", err)
	}
}

func FuzzReadTable(f *testing.F) {
	f.Add("# B\n" + marker + "\n\n| what | figure | command | machine | date | commit |\n|---|---|---|---|---|---|\n| a \\| b | 1 s | `x` | m | d | `c` |\n")
	f.Fuzz(func(t *testing.T, doc string) {
		table, err := ParseTable("B.md", []byte(doc))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "B.md:") {
				t.Fatalf("error without the file and line: %v", err)
			}
			return
		}
		// What was read is written and read back the same.
		again, err := ParseTable("B.md", table.Bytes())
		if err != nil {
			t.Fatalf("a written table does not read back: %v", err)
		}
		if len(again.Rows) != len(table.Rows) {
			t.Fatalf("%d rows written, %d read back", len(table.Rows), len(again.Rows))
		}
		for i := range table.Rows {
			if again.Rows[i] != table.Rows[i] {
				t.Fatalf("row %d written as %+v, read back as %+v", i, table.Rows[i], again.Rows[i])
			}
		}
	})
}

// A partial suite is a row of its own: its command names the selection.
func TestAPartialSuiteIsARowOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	b, _ := json.Marshal([]result.Result{{Scenario: "a", Started: time.Now(), Duration: time.Minute}})
	os.WriteFile(filepath.Join(dir, result.File), b, 0o644)
	if err := WriteEnv(dir, Env{Target: "e2e", Labels: "inmemory", Repeat: 3, Machine: "m", Date: "d", Commit: "c"}); err != nil {
		t.Fatal(err)
	}
	rows, err := FromFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "make e2e GINKGO_LABELS='inmemory' REPEAT=3"; len(rows) != 1 || rows[0].Command != want || !strings.HasPrefix(rows[0].What, want) {
		t.Errorf("rows %+v, want the command %q in what and command", rows, want)
	}
}

// bench.txt is read with the environment.json make bench wrote before it
// ran: figures are never stamped with the day they were reported.
func TestBenchOutputNeedsWhereItWasMeasured(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(benchOutput), 0o644)
	if _, err := FromFolder(dir); err == nil || !strings.Contains(err.Error(), EnvFile) {
		t.Fatalf("bench.txt without %s: %v", EnvFile, err)
	}
	WriteEnv(dir, Env{Target: "bench", Machine: "m", Date: "2026-11-30", Commit: "c0"})
	rows, err := FromFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Date != "2026-11-30" || r.Commit != "c0" || !strings.HasPrefix(r.Command, "make bench (Benchmark") {
			t.Errorf("row %+v: want the date, commit and make target of environment.json", r)
		}
	}
}

func TestFiguresKeepTheirPrecision(t *testing.T) {
	for _, tc := range []struct {
		v          float64
		unit, want string
	}{
		{0.4, "req/s", "0.4/s"}, {14084.2, "req/s", "14,084/s"}, {750, "ns/op", "750 ns"}, {190123, "ns/op", "190 µs"},
		{116, "ms-100-answering/op", "116 ms"}, {93.04, "s-all/op", "1m33s"}, {2.1, "peak-rss-MiB", "2.1 MiB"}, {3394, "peak-rss-MiB", "3,394 MiB"},
	} {
		if got := figure(tc.v, tc.unit); got != tc.want {
			t.Errorf("figure(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}

// A suite's runs that recorded their CPU give three more rows: the
// cheapest and the costliest run, each named, every process counted, and
// all of them together. A batch's shared plane, counted in one of its
// runs, is in the sum only: it is no one run's cost.
func TestASuitesCheapestAndCostliestRunsAreRows(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	run := func(s string, cpu ...time.Duration) result.Result {
		r := result.Result{Provider: "baremetal", Scenario: s, Form: "plain", Started: t0, Duration: time.Minute}
		for i, c := range cpu {
			r.Profile.CPU = append(r.Profile.CPU, result.ProcessCPU{Name: fmt.Sprint("p", i), CPU: c})
		}
		return r
	}
	batch := run("cold-spare-rolling", 90*time.Second, 30*time.Second)
	batch.Provider, batch.Profile.Batch = "inmemory", 4
	b, _ := json.Marshal([]result.Result{
		run("cold-spare-rolling", 30*time.Second, 12*time.Second),
		run("single-node-in-place", 10*time.Second, 4*time.Second),
		run("not-profiled"),
		run("three-node-scale-in", 20*time.Second, 10*time.Second),
		batch,
	})
	rows := suiteRows(t, b)
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r.What+" = "+r.Figure)
	}
	want := []string{
		"make e2e: CPU of its cheapest run, every process serving it = 14s (baremetal single-node-in-place/plain)",
		"make e2e: CPU of its costliest run, every process serving it = 42s (baremetal cold-spare-rolling/plain)",
		"make e2e: CPU of all its runs together, every process serving them = 3m26s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("CPU rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A suite whose only profiled runs are a batch's still gives the sum of
// its CPU, and no cheapest or costliest run.
func TestASuiteOfOneBatchGivesOnlyItsCPUSum(t *testing.T) {
	r := result.Result{Provider: "inmemory", Scenario: "three-node-scale-in", Form: "plain", Started: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), Duration: time.Minute}
	r.Profile.CPU, r.Profile.Batch = []result.ProcessCPU{{Name: "kube-apiserver", CPU: time.Minute}}, 2
	b, _ := json.Marshal([]result.Result{r, {Provider: "inmemory", Scenario: "cold-spare-rolling", Form: "plain", Started: r.Started, Duration: time.Minute}})
	rows := suiteRows(t, b)
	if len(rows) != 2 || rows[1].What != "make e2e: CPU of all its runs together, every process serving them" || rows[1].Figure != "1m0s" {
		t.Errorf("rows %+v, want the suite's and its CPU sum of 1m0s", rows)
	}
}

// suiteRows are the rows of a make e2e folder whose results.json holds
// results.
func suiteRows(t *testing.T, results []byte) []Row {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, result.File), results, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteEnv(dir, Env{Target: "e2e", Machine: "m", Date: "d", Commit: "c"}); err != nil {
		t.Fatal(err)
	}
	rows, err := FromFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
