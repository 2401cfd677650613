package benchtable

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/result"
)

// metric is how the table shows one metric of one benchmark.
type metric struct {
	bench, unit string
	// what the figure is; "%s" takes the sub-benchmark's name.
	what string
}

// metrics are the figures the table keeps from `go test -bench` output.
// A metric of a known benchmark not listed here (a scenario's phases,
// its processes' CPU) is detail for the run's profile, not the table; a
// benchmark not listed at all keeps every metric, named as Go names it.
var metrics = []metric{
	{"BenchmarkPlaneStart", "s-to-ready/op", "management plane start, until every manager answers /readyz"},
	{"BenchmarkLab100HostsUpAndPoweredOn", "ms-up/op", "100-host lab up"},
	{"BenchmarkLab100HostsUpAndPoweredOn", "ms-all-running/op", "100-host lab, every host powered on"},
	{"BenchmarkLab100HostsUpAndPoweredOn", "MiB-heap/op", "100-host lab, heap"},
	{"BenchmarkBMCRequests", "req/s", "one BMC, authenticated Redfish GETs"},
	{"BenchmarkFleet100BMCs", "ms-100-answering/op", "100 BMCs (Redfish and IPMI) started and answering"},
	{"BenchmarkIpmitoolCommands", "cmd/s", "one BMC, IPMI commands through ipmitool"},
	{"BenchmarkEviction", "ns/op", "one eviction through a workload cluster's Eviction API"},
	{"BenchmarkImportAThousandHosts", "ns/op", "rehearse import: a site export of 1000 inspected BareMetalHosts read and mapped onto the lab"},
	{"BenchmarkScenario", "s-wall/op", "scenario %s alone, plain form: wall time"},
	{"BenchmarkScenario", "s-upgrade/op", "scenario %s alone, plain form: its upgrade"},
	{"BenchmarkFourScenariosTogether", "s-all/op", "the four scenarios at once, each on its own plane and lab"},
	{"BenchmarkFleetWave100", "wall-s", "fleet of 100 hosts (55 clusters): wall time"},
	{"BenchmarkFleetWave100", "wave-s", "fleet of 100 hosts: the upgrade wave"},
	{"BenchmarkFleetWave100", "upgrade-p95-s", "fleet of 100 hosts: upgrade per cluster, p95"},
	{"BenchmarkFleetWave100", "peak-rss-MiB", "fleet of 100 hosts: peak RSS of every process"},
	{"BenchmarkFleetWave100", "passed", "fleet of 100 hosts: clusters passed"},
	{"BenchmarkBootToAgent", "s/boot", "one real VM (TCG) from power-on to its guest's API"},
	{"BenchmarkBootToAgent", "MiB-RSS/VM", "one real VM (TCG): QEMU's RSS"},
	{"BenchmarkSixVMsBootToAgent", "s/lab", "six real VMs booting at once, to their guests' APIs"},
	{"BenchmarkIronicProvisionsAHost", "s-answering/op", "Ironic and inspector (Debian's) answering their APIs after their start"},
	{"BenchmarkIronicProvisionsAHost", "s-enroll-to-available/op", "Ironic: a host from enrollment to available (in-band inspection, cleaning; time scale 0.05)"},
	{"BenchmarkIronicProvisionsAHost", "s-available-to-active/op", "Ironic: a host from available to active (deploy; time scale 0.05)"},
	{"BenchmarkIronicProvisionsAHost", "MiB-ironic-peak-rss", "Ironic and inspector: peak RSS together"},
	{"BenchmarkMetal3ScaleIn", "s-wall/op", "CAPM3 on baremetal-operator and Ironic: three-node-scale-in (plain) alone, wall time (time scale 0.05)"},
	{"BenchmarkMetal3ScaleIn", "s-upgrade/op", "CAPM3 on baremetal-operator and Ironic: three-node-scale-in (plain), its upgrade"},
	{"BenchmarkMetal3ScaleIn", "MiB-metal3-peak-rss", "the Metal3 stack in one run (Ironic, inspector, BMO, CAPM3): peak RSS together"},
}

// FromGoBench is the table's rows of `go test -bench` output: each
// benchmark line's figures, named by metrics, with the command that
// measures that benchmark alone.
func FromGoBench(r io.Reader, env Env) ([]Row, error) {
	var rows []Row
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/upgradelab/upgradelab/")
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a benchmark's log line, not its result
		}
		name := fields[0]
		if i := strings.LastIndex(name, "-"); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
			name = name[:i] // the GOMAXPROCS suffix
		}
		bench, sub, _ := strings.Cut(name, "/")
		for i := 2; i+1 < len(fields); i += 2 {
			value, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: figure %q is not a number", line, fields[i])
			}
			what, ok := describe(bench, sub, fields[i+1])
			if !ok {
				continue
			}
			rows = append(rows, Row{What: what, Figure: figure(value, fields[i+1]), Machine: env.Machine, Date: env.Date, Commit: env.Commit,
				Command: benchCommand(env.Target, name, pkg)})
		}
	}
	return rows, sc.Err()
}

// benchCommand is the command that measured a benchmark: the make
// target with its flags (benchtime, timeout), naming the benchmark, or
// go test when no target is known.
func benchCommand(target, name, pkg string) string {
	if target != "" {
		return fmt.Sprintf("make %s (%s in ./%s)", target, name, pkg)
	}
	return fmt.Sprintf("go test -run '^$' -bench '^%s$' ./%s/", strings.ReplaceAll(name, "/", "$/^"), pkg)
}

// describe names a benchmark's metric for the table, or says it is not
// one the table keeps.
func describe(bench, sub, unit string) (string, bool) {
	known := false
	for _, m := range metrics {
		if m.bench != bench {
			continue
		}
		known = true
		if m.unit == unit {
			if strings.Contains(m.what, "%s") {
				return fmt.Sprintf(m.what, sub), true
			}
			return m.what, true
		}
	}
	if known {
		return "", false
	}
	name := bench
	if sub != "" {
		name += "/" + sub
	}
	return name + " " + unit, true
}

// figure writes a value in its unit as a reader wants it: durations as
// durations, rates and sizes with their unit, three significant digits
// below a hundred.
func figure(v float64, unit string) string {
	var seconds float64
	switch {
	case unit == "ns/op":
		seconds = v / 1e9
	case strings.HasPrefix(unit, "ms-"):
		seconds = v / 1e3
	case strings.HasPrefix(unit, "s-") || strings.HasPrefix(unit, "s/") || strings.HasSuffix(unit, "-s"):
		seconds = v
	case strings.HasSuffix(unit, "/s"):
		_, per, _ := strings.Cut(unit, "/")
		return number(v) + "/" + per
	case strings.Contains(unit, "MiB"):
		return number(v) + " MiB"
	default:
		return number(v) + " " + unit
	}
	return duration(seconds)
}

// duration is seconds as a reader wants them: in the unit that keeps the
// figure between 1 and 1000, minutes and seconds from a minute on.
func duration(seconds float64) string {
	switch {
	case seconds < 1e-6:
		return number(seconds*1e9) + " ns"
	case seconds < 1e-3:
		return number(seconds*1e6) + " µs"
	case seconds < 1:
		return number(seconds*1e3) + " ms"
	case seconds < 60:
		return number(seconds) + " s"
	}
	return (time.Duration(seconds * float64(time.Second))).Round(time.Second).String()
}

// number is v with three significant digits below a hundred, else whole
// with thousands separated.
func number(v float64) string {
	if math.Abs(v) < 100 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// FromSuite is an e2e artifacts folder's rows: how many runs passed and
// the runs' wall time, under the make target that ran them, then the CPU
// of its cheapest and its costliest run (cpuRows).
func FromSuite(dir string) ([]Row, error) {
	results, err := result.Read(filepath.Join(dir, result.File))
	if err != nil {
		return nil, err
	}
	env, err := ReadEnv(dir)
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("%s: no run in %s", dir, result.File)
	}
	passed := 0
	first, last := results[0].Started, results[0].Started
	for _, r := range results {
		if !r.Failed() {
			passed++
		}
		if r.Started.Before(first) {
			first = r.Started
		}
		if end := r.Started.Add(r.Duration); end.After(last) {
			last = end
		}
	}
	command := "make " + cmp.Or(env.Target, "e2e")
	if env.Labels != "" {
		command += fmt.Sprintf(" GINKGO_LABELS='%s'", env.Labels)
	}
	if env.Repeat > 1 {
		command += fmt.Sprintf(" REPEAT=%d", env.Repeat)
	}
	suite := Row{What: command + ": its runs, once built", Command: command, Machine: env.Machine, Date: env.Date, Commit: env.Commit,
		Figure: fmt.Sprintf("%s (%d/%d passed)", last.Sub(first).Round(time.Second), passed, len(results))}
	return append([]Row{suite}, cpuRows(results, suite)...), nil
}

// cpuRows are the CPU of the suite's cheapest and costliest run, every
// process that served it counted (the plane, the managers, the harness:
// result.Profile), the run named in the figure (a row is replaced by
// what it measures, whichever run it was), and of all its runs together
// (a plane a process keeps for its runs counts its start once, in the
// first of them, and a batch's shared plane once, in one of its runs:
// the sum compares across suites where a single run does not); none
// when no run recorded its CPU. A batch's count is no one run's cost,
// so it is neither the cheapest nor the costliest.
func cpuRows(results []result.Result, suite Row) []Row {
	var least, most *result.Result
	var lo, hi, all time.Duration
	for i := range results {
		total := results[i].Profile.TotalCPU()
		all += total
		if total == 0 || results[i].Profile.Batch > 1 {
			continue
		}
		if least == nil || total < lo {
			least, lo = &results[i], total
		}
		if most == nil || total > hi {
			most, hi = &results[i], total
		}
	}
	sum := suite
	sum.What = fmt.Sprintf("%s: CPU of all its runs together, every process serving them", suite.Command)
	sum.Figure = all.Round(time.Second).String()
	switch {
	case all == 0:
		return nil
	case least == nil: // every profiled run was a batch's
		return []Row{sum}
	}
	row := func(which string, r *result.Result, cpu time.Duration) Row {
		out := suite
		out.What = fmt.Sprintf("%s: CPU of its %s run, every process serving it", suite.Command, which)
		out.Figure = fmt.Sprintf("%s (%s)", cpu.Round(100*time.Millisecond), r.Key())
		return out
	}
	return []Row{row("cheapest", least, lo), row("costliest", most, hi), sum}
}

// Timing is what scripts/timed writes of one command.
type Timing struct {
	What    string  `json:"what"`
	Command string  `json:"command"`
	Seconds float64 `json:"seconds"`
	Exit    int     `json:"exit"`
	Env
}

// FromTiming is a timing file's row. A command that failed is a figure
// of its failure: the row says so.
func FromTiming(path string) (Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Row{}, err
	}
	var t Timing
	if err := json.Unmarshal(b, &t); err != nil {
		return Row{}, fmt.Errorf("%s: not a timing file: %w", path, err)
	}
	if t.What == "" || t.Command == "" || t.Seconds <= 0 {
		return Row{}, fmt.Errorf("%s: a timing needs what, command and seconds", path)
	}
	fig := duration(t.Seconds)
	if t.Exit != 0 {
		fig += fmt.Sprintf(" (failed: exit status %d)", t.Exit)
	}
	return Row{What: t.What, Figure: fig, Command: t.Command, Machine: t.Machine, Date: t.Date, Commit: t.Commit}, nil
}

// FromFolder reads every measurement in dir: bench.txt (go test -bench
// output, measured where and when its environment.json says), an e2e
// suite's results, and *.timing.json.
func FromFolder(dir string) ([]Row, error) {
	var rows []Row
	found := false
	if f, err := os.Open(filepath.Join(dir, "bench.txt")); err == nil {
		found = true
		env, err := ReadEnv(dir)
		if err != nil {
			f.Close()
			return nil, err
		}
		r, err := FromGoBench(f, env)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		rows = append(rows, r...)
	}
	if _, err := os.Stat(filepath.Join(dir, result.File)); err == nil {
		found = true
		r, err := FromSuite(dir)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	timings, _ := filepath.Glob(filepath.Join(dir, "*.timing.json"))
	for _, path := range timings {
		found = true
		r, err := FromTiming(path)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	if !found {
		return nil, fmt.Errorf("%s holds no measurement (bench.txt, %s with %s, or *.timing.json)", dir, result.File, EnvFile)
	}
	return rows, nil
}
