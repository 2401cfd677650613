//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/rpc"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/report"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/internal/timescale"
)

// scenarioGlob picks the scenario files: UPGRADELAB_SCENARIOS (globs
// separated by spaces), or every file of scenarios/ (`make e2e-faults`
// points it at scenarios/faults/).
// An environment variable, as Ginkgo builds the spec tree before flags
// are parsed.
var scenarioGlob = func() string {
	if g := os.Getenv("UPGRADELAB_SCENARIOS"); g != "" {
		return g
	}
	return "../scenarios/*.yaml"
}()

// providerConfigs are the providers the scenarios run against:
// UPGRADELAB_PROVIDERS (config files relative to the repository, separated
// by commas or spaces), or the reference provider and CAPI's in-memory
// provider, so the conformance table shows a provider nobody here wrote
// beside ours.
var providerConfigs = func() []*provider.Config {
	list := os.Getenv("UPGRADELAB_PROVIDERS")
	if list == "" {
		list = "fixtures/providers/baremetal.yaml fixtures/providers/inmemory.yaml"
	}
	var out []*provider.Config
	for _, p := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !filepath.IsAbs(p) {
			p = filepath.Join("..", p)
		}
		c, err := provider.Load(p)
		if err != nil {
			panic(err) // a bad provider config stops the suite before it starts, naming file and field
		}
		out = append(out, c)
	}
	return out
}()

// repeats is how many times each scenario run is made
// (UPGRADELAB_REPEAT, default 1; `make e2e-faults REPEAT=5`): each repeat
// is a spec of its own with its own folder, so a parallel suite spreads
// the repeats over its processes.
var repeats = func() int {
	v := os.Getenv("UPGRADELAB_REPEAT")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		panic(fmt.Sprintf("UPGRADELAB_REPEAT=%q: want a whole number of at least 1", v))
	}
	return n
}()

// plannedRuns are the scenario specs in the order a parallel suite hands
// them out (plan.Runs: provider by provider, biggest labs first).
var plannedRuns = func() []plan.Run {
	runs, err := plan.Runs(plannedScenarios, providerConfigs, repeats)
	if err != nil {
		panic(err)
	}
	return runs
}()

// plannedScenarios are the scenario files the suite plans from, on the
// backend it runs.
var plannedScenarios = func() []plan.Loaded {
	scenarios, err := plan.Scenarios(strings.Fields(scenarioGlob)...)
	if err != nil {
		panic(err) // a bad scenario file stops the suite before it starts, naming file and field
	}
	if scenarios, err = plan.OnBackend(scenarios, os.Getenv("UPGRADELAB_BACKEND")); err != nil {
		panic(fmt.Sprintf("UPGRADELAB_BACKEND: %v", err))
	}
	return scenarios
}()

// selected says whether the label filter lets any run of prov through:
// what it alone needs is built only then.
func selected(prov *provider.Config) bool {
	filter, err := types.ParseLabelFilter(GinkgoLabelFilter())
	if err != nil {
		return true
	}
	for _, p := range plannedRuns {
		if p.Provider == prov && filter(p.Labels()) {
			return true
		}
	}
	return false
}

// resultEntry is the report entry each scenario spec leaves its
// result.Result in: a parallel suite's processes send their specs'
// reports to the first, whose ReportAfterSuite writes the report.
const resultEntry = "upgradelab-run"

// scenarioResults reads every run's result and placement from the
// suite's report.
func scenarioResults(r Report) ([]result.Result, report.Layout) {
	layout := report.Layout{Processes: r.SuiteConfig.ParallelTotal}
	var results []result.Result
	for _, spec := range r.SpecReports {
		for _, e := range spec.ReportEntries {
			if e.Name != resultEntry {
				continue
			}
			var res result.Result
			raw, err := json.Marshal(e.Value.GetRawValue())
			if err == nil {
				err = json.Unmarshal(raw, &res)
			}
			if err != nil {
				fmt.Fprintf(os.Stdout, "the result of %q: %v\n", spec.FullText(), err)
				continue
			}
			results = append(results, res)
			layout.Runs = append(layout.Runs, report.Placement{Run: report.RunAnchor(res), Process: spec.ParallelProcess,
				Start: spec.StartTime, End: spec.EndTime})
		}
	}
	return results, layout
}

// progress is where a run's progress lines go: GinkgoWriter (the spec's
// output, shown as it comes in a serial suite), and in a parallel suite
// also straight to the terminal through the Ginkgo CLI, which otherwise
// shows a spec's output only once the spec ends.
func progress() io.Writer {
	cfg, _ := GinkgoConfiguration()
	if cfg.ParallelTotal <= 1 {
		return GinkgoWriter
	}
	return io.MultiWriter(GinkgoWriter, live(cfg.ParallelHost))
}

// liveOutput writes to the Ginkgo CLI's own output through its parallel
// server, the way Ginkgo's processes forward their live output while a
// synchronized suite node runs (ginkgo/v2 internal/parallel_support: the
// net/rpc method Server.EmitOutput, or POST /emit-output when
// GINKGO_PARALLEL_PROTOCOL=HTTP). Each progress line is one Write, so
// lines of different runs never mix. A failed write is dropped: the line
// is still in the spec's own output.
type liveOutput struct {
	server string
	mu     sync.Mutex
	rpc    *rpc.Client
}

func (l *liveOutput) Write(p []byte) (int, error) {
	if os.Getenv("GINKGO_PARALLEL_PROTOCOL") == "HTTP" {
		if resp, err := http.Post(l.server+"/emit-output", "text/plain;charset=UTF-8", bytes.NewReader(p)); err == nil {
			resp.Body.Close()
		}
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rpc == nil {
		c, err := rpc.DialHTTPPath("tcp", l.server, "/")
		if err != nil {
			return len(p), nil
		}
		l.rpc = c
	}
	var n int
	if err := l.rpc.Call("Server.EmitOutput", p, &n); err != nil {
		l.rpc.Close()
		l.rpc = nil
	}
	return len(p), nil
}

var (
	liveOnce sync.Once
	liveOut  *liveOutput
)

// live is this process's one connection to the CLI's parallel server.
func live(server string) *liveOutput {
	liveOnce.Do(func() { liveOut = &liveOutput{server: server} })
	return liveOut
}

// Each scenario file, in each of its forms, against each provider that
// supports its strategy, is one spec labelled with the provider, the
// scenario's name, strategy and form (`make e2e GINKGO_LABELS=in-place`
// runs only those). A broken rule fails the spec with the moment, the
// objects and the rule.
//
// How a parallel suite lays them out: each run is a top-level container
// of its own whose SpecPriority is its lab's host count, so the longest
// runs are handed out first (Ginkgo otherwise orders specs of one line
// by their text). The runs of a provider whose managers bind fixed ports
// (provider.Config.FixedPorts: CAPD's in-memory backend) cannot each
// have a plane of their own at once: they form one Ordered container,
// handed out first. Its runs that may share a plane (runner.JoinsBatch)
// run together on one (runner.Together), each spec waiting for its own
// run; then each of the others (faults, which may act on the plane or a
// manager, so on every run sharing it, or a time scale of its own) has a
// plane of its own, one after another.
var _ = func() bool {
	batches := map[*provider.Config][]plan.Run{}
	for _, p := range plannedRuns {
		if len(p.Provider.FixedPorts()) > 0 {
			batches[p.Provider] = append(batches[p.Provider], p)
			continue
		}
		Describe("upgrade scenarios", Label("scenario"), SpecPriority(len(p.Lab.Spec.Hosts)), func() { scenarioSpec(p) })
	}
	for _, prov := range providerConfigs {
		if runs := batches[prov]; len(runs) > 0 {
			together, alone := splitBatch(runs)
			Describe("upgrade scenarios", Label("scenario"), Ordered, ContinueOnFailure, SpecPriority(batchPriority), func() {
				batchSpecs(prov, together)
				for _, p := range alone {
					scenarioSpec(p)
				}
			})
		}
	}
	return true
}()

// batchPriority puts a provider's batch of runs before every single run.
const batchPriority = 1000

// splitBatch parts a fixed-port provider's runs into those that may
// share one plane at once (runner.JoinsBatch) and the rest.
func splitBatch(runs []plan.Run) (together, alone []plan.Run) {
	for _, p := range runs {
		if runner.JoinsBatch(p.Scenario) == nil {
			together = append(together, p)
		} else {
			alone = append(alone, p)
		}
	}
	return together, alone
}

// batchSpecs are the specs of runs that share one plane at once, in an
// Ordered container of their own: its BeforeAll starts those the label
// filter selects (runner.Together) in a folder of the provider's own,
// each spec waits for its run's result and judges it as scenarioSpec
// does, and its AfterAll stops what is left before the runs with faults
// that follow need the fixed ports. (--focus and --skip skip a batch
// run's spec, not the run.)
func batchSpecs(prov *provider.Config, runs []plan.Run) {
	if len(runs) == 0 {
		return
	}
	Describe("runs together on one plane", Ordered, func() { batchOf(prov, runs) })
}

// batchOf is batchSpecs' container's nodes.
func batchOf(prov *provider.Config, runs []plan.Run) {
	results := make([]chan result.Result, len(runs))
	for i := range results {
		results[i] = make(chan result.Result, 1)
	}
	var stop context.CancelFunc
	finished := make(chan struct{})
	BeforeAll(func() {
		filter, err := types.ParseLabelFilter(GinkgoLabelFilter())
		Expect(err).NotTo(HaveOccurred())
		var specs []runner.Spec
		var index []int
		for i, p := range runs {
			if filter(p.Labels()) {
				specs = append(specs, runSpec(p))
				index = append(index, i)
			}
		}
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		dir, _ := filepath.Abs(filepath.Join(artifactsDir(), prov.Name+"-batch"))
		o := runOptions(runs[0])
		o.Dir = dir
		go func() {
			defer close(finished)
			runner.Together(ctx, specs, o, *batchAtOnceFlag, func(i int, res result.Result) { results[index[i]] <- res })
		}()
	})
	AfterAll(func() {
		if stop == nil { // BeforeAll failed before it started the batch
			return
		}
		stop()
		<-finished
	})
	for i, p := range runs {
		It(specName(p), Label(p.Labels()[1:]...), func(ctx context.Context) {
			select {
			case res := <-results[i]:
				judge(res)
			case <-ctx.Done():
				Fail("the run did not end within its spec's time")
			}
		}, SpecTimeout(specTimeout(p)))
	}
}

// runSpec is p as one run of a batch.
func runSpec(p plan.Run) runner.Spec {
	return runner.Spec{Scenario: p.Scenario, Lab: p.Lab, Form: p.Form, Dir: runDir(p), Name: p.Name()}
}

// runDir is p's folder in the suite's artifacts.
func runDir(p plan.Run) string {
	dir, _ := filepath.Abs(filepath.Join(artifactsDir(), p.Dir()))
	return dir
}

// scenarioSpec is one run's spec.
func scenarioSpec(p plan.Run) {
	It(specName(p), Label(p.Labels()[1:]...), func(ctx context.Context) {
		o := runOptions(p)
		o.Dir = runDir(p)
		judge(runner.Run(ctx, p.Scenario, p.Lab, p.Form, o))
	}, SpecTimeout(specTimeout(p)))
}

// specName is how the suite names p's spec.
func specName(p plan.Run) string {
	name := fmt.Sprintf("%s (%s) on %s", p.Scenario.Name, p.Form, p.Provider.Name)
	if p.HostOS != "" {
		name = fmt.Sprintf("%s (%s, %s hosts) on %s", p.Scenario.Name, p.Form, p.HostOS, p.Provider.Name)
	}
	if p.Repeats > 1 {
		name += fmt.Sprintf(" #%d", p.Repeat)
	}
	return name
}

// runOptions are p's run options but its folder.
func runOptions(p plan.Run) runner.Options {
	return runner.Options{
		RepoRoot: "..", Scale: timescale.Scale(*timeScaleFlag), Progress: progress(), Name: p.Name(),
		ProviderBinary: binaries.Provider, ExtensionBinary: binaries.Extension, Provider: p.Provider,
		RateLimitedReconciles: *rateLimitFlag, Management: managementTarget(), KindNodeImage: *kindNodeImageFlag,
		Planes: keptPlanes(),
	}
}

// specTimeout bounds p's spec: its run's own limit and a margin.
func specTimeout(p plan.Run) time.Duration {
	return runner.Limit(p.Scenario, p.Provider, 0, timescale.Scale(*timeScaleFlag)) + 2*time.Minute
}

// judge reports res for the suite's report and fails the spec when the
// run stopped early or broke a rule.
func judge(res result.Result) {
	AddReportEntry(resultEntry, res, ReportEntryVisibilityNever)
	// In the spec's output, so in the JUnit test case too.
	fmt.Fprintf(GinkgoWriter, "rules: %s\n", check.Summary(res.Checks))
	Expect(res.Error).To(BeEmpty(), "the run stopped early")
	var broken []string
	for _, v := range check.Failed(res.Checks) {
		broken = append(broken, v.String())
	}
	Expect(broken).To(BeEmpty(), "broken rules (timeline %s):\n%s", res.Timeline, strings.Join(broken, "\n"))
}
