package fleet

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"

	"k8s.io/client-go/rest"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

// Options are what a fleet run is given besides its fleet.
type Options struct {
	// RepoRoot finds fixtures/ (the reference provider's config).
	RepoRoot string
	// Dir is the artifacts folder: shared/ (the plane's logs, the site),
	// clusters/NAME/ (each run's timeline and result), and the report.
	Dir   string
	Scale timescale.Scale
	// Progress receives every run's progress lines, from many goroutines:
	// it must take each Write whole (nil: none).
	Progress io.Writer
	// Binaries built once (reference.Build).
	ProviderBinary, ExtensionBinary string
	// SampleEvery is how often the wave's cost is sampled (default 2 s).
	SampleEvery time.Duration
	// APIServerProfile is how long each of the API server's CPU profiles
	// lasts, and how far into the provisioning and into the wave it
	// starts (default 30 s). A profile the fleet's end cuts short is
	// named among the report's unread figures.
	APIServerProfile time.Duration
	// RateLimitedReconciles runs CAPI's managers as CAPI ships them (the
	// ReconcilerRateLimiting gate on, with its stale-cache guard; see
	// mgmt.Options). `upgradelab fleet` does by default: a fleet measures
	// what a real management cluster pays.
	RateLimitedReconciles bool
	// ManagerArgs are more flags for the plane's managers by name
	// (mgmt.Options.ManagerArgs): their client QPS and burst, their
	// concurrency.
	ManagerArgs map[string][]string
	// Management is where the plane runs (mgmt.Target; zero: embedded),
	// KindNodeImage a kind target's node image. On a kind cluster the
	// managers run as its Pods, so the report reads CPU and metrics only
	// of the processes on this machine: the harness (the lab, the
	// recorders) and, on another kubeconfig target, the managers.
	Management    mgmt.Target
	KindNodeImage string
	// Settle bounds each run's wait, once its Machines are done, for
	// CAPI's Cluster, counts and add-ons to catch up (runner.Options.Settle;
	// default DefaultSettle). The report spreads how long they took.
	Settle time.Duration
	// Provision bounds each cluster's provisioning (the provider config's
	// provision interval in a lone run); default DefaultProvision, never
	// less than the provider config's.
	Provision time.Duration
	// Upgrade bounds each cluster's upgrade (the provider config's
	// upgrade interval in a lone run); default DefaultUpgrade. Unlike
	// Provision it may be shorter than the provider config's: a
	// rehearsal bounds the wait for an upgrade it expects never to end.
	Upgrade time.Duration
	// InWave, when set, runs once the wave begins, on the shared site:
	// a fault of the whole wave (a rehearsal's flaky BMCs, a host that
	// does not come back). Its context ends with the fleet.
	InWave func(context.Context, *site.Site)
}

// DefaultProvision is a fleet's provisioning bound: fifteen minutes, three
// times the reference provider's lone interval. Every cluster is created
// at once, and CAPI's core manager takes a minute or more to create each
// one's first Machine (docs/FLEET.md), so a three-node control plane,
// whose Machines join one after another, needed more than five minutes
// where a lone run needs two. The report gives how long it took. What a
// fleet adds to the provisioning bound and the settle it adds to each
// scenario's own timeout (runner.Options.ExtraTime), which covers
// provisioning too.
const DefaultProvision = 15 * time.Minute

// DefaultUpgrade is a fleet's upgrade bound: thirty minutes, three times
// the reference provider's lone interval, for the same reason: in a wave
// of every cluster at once each replacement host waits its turn in the
// host controller's queue, and a rolling cluster replaces five Machines
// one after another.
const DefaultUpgrade = 30 * time.Minute

// DefaultSettle is a fleet's settle bound: five times a lone run's. On a
// loaded plane KCP's add-on moves came minutes after the Machines
// (docs/FLEET.md), and one minute judged harder than CAPI's own e2e,
// whose bound is 20. Five shows how late they come and still ends a run
// that never settles in reasonable time.
const DefaultSettle = 5 * runner.DefaultSettle

// Run provisions every cluster of fl on one plane and one lab, upgrades
// them in the fleet's wave, judges each cluster's timeline with every
// rule, and measures what it cost. The results are each cluster's, as a
// suite's; the Report is the fleet's.
func Run(ctx context.Context, fl *Fleet, o Options) (*Report, []result.Result, error) {
	started := time.Now()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, err
	}
	stopProfile, profileErr := startProfile(filepath.Join(o.Dir, HarnessProfile))
	if profileErr == nil {
		defer stopProfile() // on an early return
	}
	prov, extra, err := fleetProvider(o)
	if err != nil {
		return nil, nil, err
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%s [fleet %s] %s\n", time.Now().Format("15:04:05"), fl.File.Name, fmt.Sprintf(format, args...))
		}
	}
	say("starting one plane and one lab of %d hosts for %d clusters (%v)", len(fl.Lab.Spec.Hosts), len(fl.Clusters), fl.Strategies())
	var planeProgress io.Writer // a kind cluster and its Pods take tens of seconds
	if o.Management.Kind != "" && o.Management.Kind != mgmt.Embedded {
		planeProgress = o.Progress
	}
	env, err := runner.StartEnv(ctx, runner.EnvOptions{Provider: prov, Strategies: fl.Strategies(), RepoRoot: o.RepoRoot,
		Lab: fl.Lab, Dir: filepath.Join(o.Dir, "shared"), Scale: o.Scale,
		ProviderBinary: o.ProviderBinary, ExtensionBinary: o.ExtensionBinary, RateLimitedReconciles: o.RateLimitedReconciles,
		ManagerArgs: o.ManagerArgs, ExtensionArgs: extensionArgs(prov), Management: o.Management, KindNodeImage: o.KindNodeImage, PlaneProgress: planeProgress})
	if err != nil {
		return nil, nil, fmt.Errorf("fleet %s: the shared plane and lab: %w", fl.File.Name, err)
	}
	defer env.Stop()
	planeUp := time.Now()
	meter, err := newMeter(env.Plane, o.SampleEvery)
	if err != nil {
		return nil, nil, err
	}
	meter.mark(ctx, markStart)

	w := fleetWave(fl)
	settle := cmp.Or(o.Settle, DefaultSettle)
	samplerCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { meter.sample(samplerCtx) })
	// The API server's CPU, profiled once while the clusters provision
	// and once in the wave: what it spends itself on where it is busiest.
	prof := &apiServerProfiler{meter: meter, dir: o.Dir, length: max(cmp.Or(o.APIServerProfile, DefaultAPIServerProfile), time.Second)}
	now := make(chan struct{})
	close(now)
	prof.start(samplerCtx, 0, now, "while provisioning", APIServerProfileProvisioning)
	prof.start(samplerCtx, 1, w.begun, "in the wave", APIServerProfileWave)
	allEnded := make(chan struct{})
	if o.InWave != nil { // joined, as the sampler is, before the site stops
		sampling.Go(func() { inWave(samplerCtx, w, func(ctx context.Context) { o.InWave(ctx, env.Site) }) })
	}
	marked := markWaveStart(ctx, w, meter, allEnded, func() {
		say("every cluster provisioned in %s; the wave begins (%s)", time.Since(planeUp).Round(time.Second), batchName(fl.File.Wave.Batch))
	})
	results := runClusters(ctx, fl, o, prov, &runner.Shared{Env: env, Wave: w}, settle, extra)
	close(allEnded)
	<-marked
	meter.mark(ctx, markEnd)
	stopSampling()
	sampling.Wait()
	rep := newReport(fl, results, w, meter, started, planeUp)
	prof.addTo(rep)
	rep.CAPIRateLimiting, rep.ManagerArgs, rep.SettleBound = o.RateLimitedReconciles, o.ManagerArgs, settle
	rep.Management, rep.TimeScale = env.Plane.Target.String(), float64(o.Scale)
	rep.ProvisionBound, rep.UpgradeBound = prov.Intervals.Provision.Duration, prov.Intervals.Upgrade.Duration
	if profileErr == nil {
		profileErr = stopProfile()
	}
	if profileErr == nil {
		rep.Harness, profileErr = components(filepath.Join(o.Dir, HarnessProfile), 10)
	}
	if profileErr != nil {
		rep.Unread = append(rep.Unread, "the harness's CPU profile: "+profileErr.Error())
	}
	return rep, results, nil
}

// fleetWave is the fleet's wave, its batches in the fleet's order.
func fleetWave(fl *Fleet) *wave {
	w := newWave(len(fl.Clusters), fl.File.Wave.Batch, fl.File.Provision.Concurrent)
	var names []string
	for _, c := range fl.Clusters {
		names = append(names, c.Name)
	}
	w.orderBy(names)
	return w
}

// inWave runs fn once the wave begins, unless ctx ends first.
func inWave(ctx context.Context, w *wave, fn func(context.Context)) {
	select {
	case <-w.begun:
		fn(ctx)
	case <-ctx.Done():
	}
}

// fleetProvider is the reference provider with its provisioning bound
// widened and its upgrade bound set to the fleet's (Options or the
// defaults), and
// extra, what the fleet adds to the lone bounds, which it adds to each
// scenario's own timeout too, since that covers every step.
func fleetProvider(o Options) (prov *provider.Config, extra time.Duration, err error) {
	prov, err = provider.Load(filepath.Join(o.RepoRoot, runner.DefaultProvider))
	if err != nil {
		return nil, 0, err
	}
	lone, loneUpgrade := prov.Intervals.Provision.Duration, prov.Intervals.Upgrade.Duration
	prov.Intervals.Provision.Duration = max(lone, cmp.Or(o.Provision, DefaultProvision))
	prov.Intervals.Upgrade.Duration = cmp.Or(o.Upgrade, max(loneUpgrade, DefaultUpgrade))
	extra = prov.Intervals.Provision.Duration - lone + prov.Intervals.Upgrade.Duration - loneUpgrade
	return prov, extra, nil
}

// extensionArgs give the in-place extension's whole-update deadline the
// fleet's upgrade bound. A lone run's is an hour of lab time (36 s at
// 0.01) with a floor of ten of CAPI's hook retries; on a loaded plane
// CAPI calls the extension every ten seconds or so, and a single-node
// update of the 300-host fleet failed at 36 s while it was still
// draining and rebooting. An update may take as long as the harness
// waits for it, and no longer.
func extensionArgs(prov *provider.Config) []string {
	return []string{"--update-deadline=" + prov.Intervals.Upgrade.Duration.String()}
}

// runClusters runs every cluster of the fleet at once on the shared
// plane and lab, each on its own hosts, and returns their results in the
// fleet's order.
func runClusters(ctx context.Context, fl *Fleet, o Options, prov *provider.Config, shared *runner.Shared, settle, extra time.Duration) []result.Result {
	results := make([]result.Result, len(fl.Clusters))
	var wg sync.WaitGroup
	for i, c := range fl.Clusters {
		own := *shared
		own.Hosts, own.Cluster = c.Hosts, c.Name
		wg.Go(func() {
			results[i] = runner.Run(ctx, c.Scenario, clusterLab(fl.Lab, c.Hosts), fl.File.Form, runner.Options{
				RepoRoot: o.RepoRoot, Dir: filepath.Join(o.Dir, "clusters", c.Name), Scale: o.Scale,
				Progress: o.Progress, Name: c.Name, Provider: prov, RateLimitedReconciles: o.RateLimitedReconciles,
				Shared: &own, Settle: settle,
				ExtraTime: max(0, extra+settle-runner.DefaultSettle)})
		})
	}
	wg.Wait()
	return results
}

// markWaveStart marks the wave's start on the meter when it begins,
// telling begun; the channel it returns closes once the wave began or
// every run ended first.
func markWaveStart(ctx context.Context, w *wave, m *meter, allEnded <-chan struct{}, begun func()) <-chan struct{} {
	marked := make(chan struct{})
	go func() {
		defer close(marked)
		select {
		case <-w.begun:
		case <-allEnded:
		}
		select {
		case <-w.begun: // it may have begun as the last run ended
			m.mark(ctx, markWave)
			begun()
		default:
		}
	}()
	return marked
}

// apiServerProfiler takes the API server's CPU profiles, one per slot,
// each charged to the work it did.
type apiServerProfiler struct {
	meter  *meter
	dir    string
	length time.Duration
	wg     sync.WaitGroup
	// One slot each, in the report's order; each goroutine writes its own.
	profiled [2]*APIServerProfile
	errs     [2]error
}

// start profiles the API server into file for p.length, p.length after
// start closes, unless ctx ends first.
func (p *apiServerProfiler) start(ctx context.Context, slot int, start <-chan struct{}, phase, file string) {
	p.wg.Go(func() {
		select {
		case <-start:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(p.length):
		case <-ctx.Done():
			return
		}
		path := filepath.Join(p.dir, file)
		err := p.meter.profileAPIServer(ctx, path, p.length)
		var work []Component
		if err == nil {
			work, err = charge(path, 8, apiServerWorkOf)
		}
		if err != nil {
			p.errs[slot] = fmt.Errorf("the API server's CPU profile %s: %w", phase, err)
			return
		}
		p.profiled[slot] = &APIServerProfile{Phase: phase, File: file, Work: work}
	})
}

// addTo waits for the profiles and puts them, or why they are missing,
// in the report.
func (p *apiServerProfiler) addTo(rep *Report) {
	p.wg.Wait()
	for i, prof := range p.profiled {
		if prof != nil {
			rep.APIServer = append(rep.APIServer, *prof)
		}
		if p.errs[i] != nil {
			rep.Unread = append(rep.Unread, p.errs[i].Error())
		}
	}
}

func batchName(n int) string {
	if n == 0 {
		return "all at once"
	}
	return fmt.Sprintf("%d at a time", n)
}

// clusterLab is the fleet's lab as one cluster's run sees it: its hosts
// only (the rules and the report judge its hosts, not its neighbours').
func clusterLab(def *lab.Definition, hosts []string) *lab.Definition {
	spec := *def.Spec
	spec.Hosts = nil
	for _, h := range def.Spec.Hosts {
		if slices.Contains(hosts, h.Name) {
			spec.Hosts = append(spec.Hosts, h)
		}
	}
	out := *def
	out.Spec = &spec
	return &out
}

// DefaultAPIServerProfile is Options.APIServerProfile's default.
const DefaultAPIServerProfile = 30 * time.Second

// Marks are the moments the meter reads the plane's counters at.
const (
	markStart = "start" // the plane and lab up, nothing created
	markWave  = "wave"  // every cluster provisioned, the first upgrade starting
	markEnd   = "end"   // every run ended
)

// meter reads what the fleet costs: each process's CPU and memory, the
// API server's request counts, and each manager's workqueue and reconcile
// metrics, at each mark; between marks it samples the total RSS and the
// workqueue depths, whose peaks no end reading shows.
type meter struct {
	plane *mgmt.Plane
	every time.Duration
	api   *http.Client
	mgrs  *http.Client

	mu    sync.Mutex
	marks map[string]reading
	// peakRSS is the highest total RSS sampled; peakDepth each manager's
	// highest workqueue depth (all its queues added up).
	peakRSS   int64
	peakDepth map[string]float64
	// unread are the marks' reads that failed: their figures are missing
	// from the report, which says so.
	unread []string
}

// reading is the plane at one mark.
type reading struct {
	at       time.Time
	usage    map[string]proc.Usage
	requests float64
	// kinds are the API server's request counts by kind (requestKind).
	kinds    map[string]float64
	managers map[string]scrape
	// sched is how long the harness's goroutines waited for a CPU so
	// far (schedMetric).
	sched histogram
}

func newMeter(p *mgmt.Plane, every time.Duration) (*meter, error) {
	api, err := rest.HTTPClientFor(p.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("a client for the API server's metrics: %w", err)
	}
	if every == 0 {
		every = 2 * time.Second
	}
	return &meter{plane: p, every: every, api: api, mgrs: &http.Client{Timeout: 10 * time.Second},
		marks: map[string]reading{}, peakDepth: map[string]float64{}}, nil
}

// harness names the harness process (this one) among the plane's.
const harness = "harness"

// usage reads every process's Usage.
func (m *meter) usage() map[string]proc.Usage {
	out := map[string]proc.Usage{}
	procs := append(m.plane.Processes(), mgmt.Process{Name: harness, PID: os.Getpid()})
	for _, p := range procs {
		if u, ok := proc.ReadUsage(p.PID); ok {
			out[p.Name] = u
		}
	}
	return out
}

func (m *meter) mark(ctx context.Context, name string) {
	r := reading{at: time.Now(), usage: m.usage(), managers: map[string]scrape{}, sched: schedLatencies()}
	var unread []string
	if s, err := scrapeURL(ctx, m.api, strings.TrimSuffix(m.plane.RESTConfig.Host, "/")+"/metrics"); err == nil {
		r.requests = s.sum("apiserver_request_total")
		r.kinds = requestKinds(s)
	} else {
		unread = append(unread, fmt.Sprintf("%s: the API server's metrics: %v", name, err))
	}
	for mgr, url := range m.plane.MetricsURLs() {
		if s, err := scrapeURL(ctx, m.mgrs, url); err == nil {
			r.managers[mgr] = s
		} else {
			unread = append(unread, fmt.Sprintf("%s: %s's metrics: %v", name, mgr, err))
		}
	}
	m.mu.Lock()
	m.marks[name] = r
	m.unread = append(m.unread, unread...)
	m.mu.Unlock()
}

// profileAPIServer writes a CPU profile of the API server over d into
// path (its /debug/pprof, on by default in kube-apiserver).
func (m *meter) profileAPIServer(ctx context.Context, path string, d time.Duration) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(m.plane.RESTConfig.Host, "/"), int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := m.api.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		os.Remove(path) // cut short: no half profile left to be read
		return err
	}
	return f.Close()
}

// sample keeps the peaks until ctx ends.
func (m *meter) sample(ctx context.Context) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		var total int64
		for _, u := range m.usage() {
			total += u.RSS
		}
		depths := map[string]float64{}
		for name, url := range m.plane.MetricsURLs() {
			if s, err := scrapeURL(ctx, m.mgrs, url, "workqueue_depth"); err == nil {
				depths[name] = s.sum("workqueue_depth")
			}
		}
		m.mu.Lock()
		m.peakRSS = max(m.peakRSS, total)
		for name, d := range depths {
			m.peakDepth[name] = max(m.peakDepth[name], d)
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
