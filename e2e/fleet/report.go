package fleet

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/result"
)

// ReportFile and ReportText name the fleet's report in its folder.
const (
	ReportFile = "fleet.json"
	ReportText = "fleet.txt"
)

// Report is what one wave cost and how it went.
type Report struct {
	Fleet    string `json:"fleet"`
	Clusters int    `json:"clusters"`
	Hosts    int    `json:"hosts"`
	Form     string `json:"form"`
	// Batch is the wave's batch size (0: all at once).
	Batch int `json:"batch"`
	// ProvisionConcurrent is how many clusters provisioned at once (0:
	// all of them).
	ProvisionConcurrent int `json:"provisionConcurrent,omitempty"`
	// CAPIRateLimiting: CAPI's managers ran as CAPI ships them.
	CAPIRateLimiting bool `json:"capiRateLimiting"`
	// TimeScale is the lab's real time per modelled time.
	TimeScale float64 `json:"timeScale,omitempty"`
	// HarnessWaitP99 and HarnessWaitMax are how long the harness's
	// goroutines waited, runnable, for a CPU over the run (schedMetric):
	// the lab's steps ran that late, and a rule's bound in lab time
	// counts such a wait divided by TimeScale.
	HarnessWaitP99 time.Duration `json:"harnessWaitP99,omitempty"`
	HarnessWaitMax time.Duration `json:"harnessWaitMax,omitempty"`
	// Management is where the plane ran (mgmt.Target's --management
	// value: embedded, kubeconfig=PATH, kind[=NAME]).
	Management string `json:"management,omitempty"`
	// ManagerArgs are the flags the managers ran with beyond the harness's
	// own (Options.ManagerArgs).
	ManagerArgs map[string][]string `json:"managerArgs,omitempty"`
	// Wall is from the start until every run ended; PlaneStart the shared
	// plane's and lab's start; Provision from then until every cluster
	// was provisioned (the wave's start); Wave from then until the last
	// upgrade ended.
	Wall       time.Duration `json:"wall"`
	PlaneStart time.Duration `json:"planeStart"`
	Provision  time.Duration `json:"provision"`
	Wave       time.Duration `json:"wave"`
	// Upgrade spreads each upgraded cluster's time from its upgrade step
	// to done.
	Upgrade Spread `json:"upgrade"`
	// Settle spreads each upgraded cluster's wait after done for CAPI's
	// Cluster, counts and add-ons, which SettleBound bounds: a maximum at
	// the bound is a cluster that never caught up.
	Settle      Spread        `json:"settle"`
	SettleBound time.Duration `json:"settleBound"`
	// ProvisionEach spreads each cluster's provisioning (its own, from
	// its create to every Machine up to date, where Provision is the
	// fleet's until the wave), which ProvisionBound bounds.
	ProvisionEach  Spread        `json:"provisionEach"`
	ProvisionBound time.Duration `json:"provisionBound"`
	// UpgradeBound is each cluster's upgrade bound (Options.Upgrade).
	UpgradeBound time.Duration `json:"upgradeBound,omitempty"`
	Passed       int           `json:"passed"`
	Failed       int           `json:"failed"`
	Stopped      int           `json:"stopped"`
	// Processes: the plane's (kube-apiserver, etcd,
	// kube-controller-manager, each manager, the provider and the
	// extension among them) and the harness's, which runs the lab (BMCs,
	// agents, workload API servers) and the recorders.
	Processes []ProcessCost `json:"processes"`
	// PeakTotalRSS is the highest sum of every process's RSS sampled.
	PeakTotalRSS int64 `json:"peakTotalRSS"`
	// HarnessRSSPerHost is the harness's peak RSS over the lab's hosts.
	HarnessRSSPerHost int64 `json:"harnessRSSPerHost"`
	// APIRequestsPerSecond: the API server's requests over the whole run
	// and during the wave.
	APIRequestsPerSecond       float64       `json:"apiRequestsPerSecond"`
	APIRequestsPerSecondInWave float64       `json:"apiRequestsPerSecondInWave"`
	Managers                   []ManagerCost `json:"managers"`
	// Harness is where the harness's CPU went over the whole run, by
	// component, from its CPU profile (HarnessProfile).
	Harness []Component `json:"harness,omitempty"`
	// APIRequests are the API server's most frequent requests over the
	// run, by kind: which objects the managers write and read most.
	APIRequests []RequestKind `json:"apiRequests,omitempty"`
	// APIServer is where the API server's CPU went, from its profiles
	// (APIServerProfileProvisioning, APIServerProfileWave).
	APIServer []APIServerProfile `json:"apiServer,omitempty"`
	// Unread are the metrics that could not be read at a mark: the
	// figures made from them are missing, not zero.
	Unread []string `json:"unread,omitempty"`
}

// RequestKind is one kind of API server request (verb, resource and
// subresource, response code) and how many there were.
type RequestKind struct {
	Kind      string  `json:"kind"`
	Count     float64 `json:"count"`
	PerSecond float64 `json:"perSecond"`
}

// APIServerProfile is one of the API server's CPU profiles, charged to
// the kinds of work it did (apiServerWork); Component.Package holds the
// work's name.
type APIServerProfile struct {
	Phase string      `json:"phase"`
	File  string      `json:"file"`
	Work  []Component `json:"work"`
}

// Spread is a distribution's median, 95th percentile and maximum
// (nearest rank).
type Spread struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P95 time.Duration `json:"p95"`
	Max time.Duration `json:"max"`
}

// ProcessCost is one process's CPU (over the run and during the wave)
// and peak RSS.
type ProcessCost struct {
	Name    string        `json:"name"`
	CPU     time.Duration `json:"cpu"`
	WaveCPU time.Duration `json:"waveCPU"`
	PeakRSS int64         `json:"peakRSS"`
}

// ManagerCost is one manager's controllers during the wave, from its
// metrics endpoint: its deepest workqueues (all queues added up, sampled)
// and its reconciles' count and latency.
type ManagerCost struct {
	Name           string  `json:"name"`
	PeakQueueDepth float64 `json:"peakQueueDepth"`
	Reconciles     uint64  `json:"reconciles"`
	// ReconcileP50 and P95 in seconds (NaN-free: -1 when none ran).
	ReconcileP50 float64 `json:"reconcileP50"`
	ReconcileP95 float64 `json:"reconcileP95"`
	// Slowest is the controller with the highest p95 in the wave.
	Slowest string `json:"slowest,omitempty"`
}

// SpreadOf is the p50, p95 and maximum of durations (nearest rank).
func SpreadOf(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	rank := func(q float64) time.Duration { return ds[max(int(math.Ceil(q*float64(len(ds))))-1, 0)] }
	return Spread{N: len(ds), P50: rank(0.5), P95: rank(0.95), Max: ds[len(ds)-1]}
}

const reconcileMetric = "controller_runtime_reconcile_time_seconds"

func newReport(fl *Fleet, results []result.Result, w *wave, m *meter, started, planeUp time.Time) *Report {
	r := &Report{Fleet: fl.File.Name, Clusters: len(fl.Clusters), Hosts: len(fl.Lab.Spec.Hosts), Form: string(fl.File.Form),
		Batch: fl.File.Wave.Batch, ProvisionConcurrent: fl.File.Provision.Concurrent, Wall: time.Since(started), PlaneStart: planeUp.Sub(started)}
	began, _, ends := w.times()
	if !began.IsZero() {
		r.Provision = began.Sub(planeUp)
		last := began
		for _, e := range ends {
			if e.After(last) {
				last = e
			}
		}
		r.Wave = last.Sub(began)
	}
	var upgrades, settles, provisions []time.Duration
	for _, res := range results {
		for _, ph := range res.Profile.Phases {
			if ph.Name == result.PhaseProvision {
				provisions = append(provisions, ph.Took)
			}
		}
		switch res.Verdict() {
		case "PASS":
			r.Passed++
		case "FAIL":
			r.Failed++
		default:
			r.Stopped++
		}
		if res.Upgrade > 0 {
			upgrades = append(upgrades, res.Upgrade)
			for _, ph := range res.Profile.Phases {
				if ph.Name == result.PhaseSettle {
					settles = append(settles, ph.Took)
				}
			}
		}
	}
	r.Upgrade, r.Settle, r.ProvisionEach = SpreadOf(upgrades), SpreadOf(settles), SpreadOf(provisions)
	m.mu.Lock()
	defer m.mu.Unlock()
	start, wave, end := m.marks[markStart], m.marks[markWave], m.marks[markEnd]
	if wave.at.IsZero() {
		wave = end // no wave began: every run stopped first
	}
	for name, u := range end.usage {
		r.Processes = append(r.Processes, ProcessCost{Name: name, CPU: u.CPU - start.usage[name].CPU,
			WaveCPU: u.CPU - wave.usage[name].CPU, PeakRSS: u.PeakRSS})
		if name == harness && r.Hosts > 0 {
			r.HarnessRSSPerHost = u.PeakRSS / int64(r.Hosts)
		}
	}
	slices.SortFunc(r.Processes, func(a, b ProcessCost) int { return int(b.PeakRSS - a.PeakRSS) })
	// The total is sampled every SampleEvery and can miss a peak one
	// process's own high-water mark kept: it was at least that.
	r.PeakTotalRSS = m.peakRSS
	for _, p := range r.Processes {
		r.PeakTotalRSS = max(r.PeakTotalRSS, p.PeakRSS)
	}
	r.Unread = slices.Clone(m.unread)
	if d := end.at.Sub(start.at).Seconds(); d > 0 {
		r.APIRequestsPerSecond = (end.requests - start.requests) / d
	}
	if d := end.at.Sub(wave.at).Seconds(); d > 0 {
		r.APIRequestsPerSecondInWave = (end.requests - wave.requests) / d
	}
	r.APIRequests = topRequests(start.kinds, end.kinds, end.at.Sub(start.at), 10)
	r.HarnessWaitP99, r.HarnessWaitMax = end.sched.since(start.sched).waits()
	for name, s := range end.managers {
		before := wave.managers[name]
		h := s.histogram(reconcileMetric).since(before.histogram(reconcileMetric))
		mc := ManagerCost{Name: name, PeakQueueDepth: m.peakDepth[name], Reconciles: h.count(),
			ReconcileP50: finite(h.quantile(0.5)), ReconcileP95: finite(h.quantile(0.95))}
		worst := -1.0
		for _, c := range controllers(s) {
			ch := s.controllerHistogram(c).since(before.controllerHistogram(c))
			if q := ch.quantile(0.95); !math.IsNaN(q) && q > worst {
				worst, mc.Slowest = q, c
			}
		}
		r.Managers = append(r.Managers, mc)
	}
	slices.SortFunc(r.Managers, func(a, b ManagerCost) int { return strings.Compare(a.Name, b.Name) })
	return r
}

// topRequests are the top request kinds counted between two readings,
// the most frequent first.
func topRequests(before, after map[string]float64, over time.Duration, top int) []RequestKind {
	var out []RequestKind
	for kind, n := range after {
		if d := n - before[kind]; d > 0 {
			out = append(out, RequestKind{Kind: kind, Count: d})
		}
	}
	slices.SortFunc(out, func(a, b RequestKind) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Kind, b.Kind))
	})
	out = out[:min(len(out), top)]
	for i := range out {
		if over > 0 {
			out[i].PerSecond = out[i].Count / over.Seconds()
		}
	}
	return out
}

func finite(f float64) float64 {
	if math.IsNaN(f) {
		return -1
	}
	return f
}

// controllers are the controller labels of the reconcile histogram.
func controllers(s scrape) []string {
	var out []string
	for _, m := range s.family(reconcileMetric) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && !slices.Contains(out, l.GetValue()) {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

// controllerHistogram is the reconcile histogram of one controller.
func (s scrape) controllerHistogram(controller string) histogram {
	var mine []*dto.Metric
	for _, m := range s.family(reconcileMetric) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == controller {
				mine = append(mine, m)
			}
		}
	}
	return histogramOf(mine)
}

// ReadReport reads a fleet.json that Write kept.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Hosts < 1 {
		return nil, fmt.Errorf("%s: hosts: %d; not a fleet report", path, r.Hosts)
	}
	return r, nil
}

// Write keeps the report as fleet.json and fleet.txt in dir.
func (r *Report) Write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ReportText), []byte(r.String()), 0o644)
}

// labWait says what a wait of wall time is in the lab's time.
func labWait(wall time.Duration, scale float64) string {
	if scale <= 0 {
		return ""
	}
	return fmt.Sprintf(": at time scale %g, %s of lab time in every bound a rule holds in lab time", scale, time.Duration(float64(wall)/scale).Round(time.Second))
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

func secs(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// String is the report as `upgradelab fleet` prints it.
func (r *Report) String() string {
	var b strings.Builder
	limit := "CAPI's reconcile rate limit and stale-cache guard on, as CAPI ships them"
	if !r.CAPIRateLimiting {
		limit = "CAPI's reconcile rate limit and its stale-cache guard off"
	}
	fmt.Fprintf(&b, "fleet %s: %d clusters (%s) on %d hosts, provisioned %s, wave %s; %s\n", r.Fleet, r.Clusters, r.Form, r.Hosts, batchName(r.ProvisionConcurrent), batchName(r.Batch), limit)
	if r.Management != "" && r.Management != string(mgmt.Embedded) {
		fmt.Fprintf(&b, "management plane: --management %s; the processes below are the ones on this machine\n", r.Management)
	}
	for _, name := range slices.Sorted(maps.Keys(r.ManagerArgs)) {
		fmt.Fprintf(&b, "%s ran with %s\n", name, strings.Join(r.ManagerArgs[name], " "))
	}
	fmt.Fprintf(&b, "verdicts: %d passed, %d failed, %d stopped\n", r.Passed, r.Failed, r.Stopped)
	fmt.Fprintf(&b, "wall %s: plane and lab %s, provisioning %s, wave %s\n", secs(r.Wall), secs(r.PlaneStart), secs(r.Provision), secs(r.Wave))
	if r.ProvisionEach.N > 0 {
		fmt.Fprintf(&b, "provisioning per cluster (%d, at most %s): p50 %s, p95 %s, max %s\n", r.ProvisionEach.N, secs(r.ProvisionBound), secs(r.ProvisionEach.P50), secs(r.ProvisionEach.P95), secs(r.ProvisionEach.Max))
	}
	fmt.Fprintf(&b, "upgrade per cluster (%d, at most %s): p50 %s, p95 %s, max %s\n", r.Upgrade.N, secs(r.UpgradeBound), secs(r.Upgrade.P50), secs(r.Upgrade.P95), secs(r.Upgrade.Max))
	if r.Settle.N > 0 {
		fmt.Fprintf(&b, "settle after done (%d, at most %s): p50 %s, p95 %s, max %s\n", r.Settle.N, secs(r.SettleBound), secs(r.Settle.P50), secs(r.Settle.P95), secs(r.Settle.Max))
	}
	fmt.Fprintf(&b, "memory: peak total RSS %s; harness %s per host\n", mib(r.PeakTotalRSS), fmt.Sprintf("%.1f MiB", float64(r.HarnessRSSPerHost)/(1<<20)))
	if r.HarnessWaitMax > 0 {
		fmt.Fprintf(&b, "harness: goroutines waited for a CPU up to %s (p99 %s)%s\n", r.HarnessWaitMax.Round(time.Millisecond), r.HarnessWaitP99.Round(time.Millisecond), labWait(r.HarnessWaitMax, r.TimeScale))
	}
	fmt.Fprintf(&b, "API server: %.0f requests/s over the run, %.0f in the wave\n\n", r.APIRequestsPerSecond, r.APIRequestsPerSecondInWave)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "process\tCPU\tCPU in wave\tpeak RSS")
	for _, p := range r.Processes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, secs(p.CPU), secs(p.WaveCPU), mib(p.PeakRSS))
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "manager\tpeak queue depth\treconciles in wave\tp50\tp95\tslowest controller (p95)")
	for _, m := range r.Managers {
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%s\t%s\t%s\n", m.Name, m.PeakQueueDepth, m.Reconciles, seconds(m.ReconcileP50), seconds(m.ReconcileP95), m.Slowest)
	}
	tw.Flush()
	if len(r.APIRequests) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "API server's most frequent requests\tcount\tper second")
		for _, k := range r.APIRequests {
			fmt.Fprintf(tw, "%s\t%.0f\t%.1f\n", k.Kind, k.Count, k.PerSecond)
		}
		tw.Flush()
	}
	for _, p := range r.APIServer {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "API server CPU %s (%s)\tCPU\tshare\n", p.Phase, p.File)
		for _, c := range p.Work {
			fmt.Fprintf(tw, "%s\t%s\t%.0f%%\n", c.Package, secs(c.CPU), 100*c.Share)
		}
		tw.Flush()
	}
	if len(r.Harness) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "harness CPU by component (%s)\tCPU\tshare\n", HarnessProfile)
		for _, c := range r.Harness {
			fmt.Fprintf(tw, "%s\t%s\t%.0f%%\n", c.Package, secs(c.CPU), 100*c.Share)
		}
		tw.Flush()
	}
	for _, u := range r.Unread {
		fmt.Fprintf(&b, "not read (the figures from it are missing): %s\n", u)
	}
	return b.String()
}

func seconds(s float64) string {
	if s < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fs", s)
}
