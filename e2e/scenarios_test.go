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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/report"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/timescale"
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

// plannedRun is one spec of the scenario container.
type plannedRun struct {
	scenario *scenario.Scenario
	lab      *lab.Definition
	provider *provider.Config
	form     scenario.Form
	// hostOS is the scenario's hostOS entry the lab was set to ("" for
	// the lab file as it is, also when the entry is what the file says).
	hostOS string
	repeat int // 1..repeats
}

func (p plannedRun) labels() []string {
	l := []string{"scenario", p.provider.Name, p.scenario.Name, string(p.scenario.Strategy), string(p.form)}
	if p.provider.Lab {
		// Filter by host OS: GINKGO_LABELS=ostree, mixed, ab.
		l = append(l, p.lab.HostOSMode())
	}
	return l
}

// name is how the run's progress lines name it.
func (p plannedRun) name() string {
	n := fmt.Sprintf("%s %s/%s", p.provider.Name, p.scenario.Name, p.form)
	if p.hostOS != "" {
		n += "/" + p.hostOS
	}
	if repeats > 1 {
		n += fmt.Sprintf(" #%d", p.repeat)
	}
	return n
}

// dir is the run's folder name under the artifacts folder.
func (p plannedRun) dir() string {
	d := p.provider.Name + "-" + p.scenario.Name + "-" + string(p.form)
	if p.hostOS != "" {
		d += "-" + p.hostOS
	}
	if repeats > 1 {
		d += fmt.Sprintf("-r%d", p.repeat)
	}
	return d
}

// plannedRuns are the scenario specs in the order a parallel suite hands
// them out: provider by provider as configured (the reference provider
// first, so a module-built provider's manager builds meanwhile), the
// biggest labs first within each (the longest runs start first, so the
// last to finish is a short one), then by name.
var plannedRuns = func() []plannedRun {
	var paths []string
	for _, g := range strings.Fields(scenarioGlob) {
		found, err := filepath.Glob(g)
		if err != nil {
			panic(fmt.Sprintf("scenarios %s: %v", g, err))
		}
		paths = append(paths, found...)
	}
	if len(paths) == 0 {
		panic(fmt.Sprintf("no scenarios at %s", scenarioGlob))
	}
	type loaded struct {
		s   *scenario.Scenario
		def *lab.Definition
	}
	var all []loaded
	for _, path := range paths {
		s, def, err := scenario.Load(path)
		if err != nil {
			panic(err) // a bad scenario file stops the suite before it starts, naming file and field
		}
		all = append(all, loaded{s, def})
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := len(all[i].def.Spec.Hosts), len(all[j].def.Spec.Hosts)
		if a != b {
			return a > b
		}
		return all[i].s.Name < all[j].s.Name
	})
	var out []plannedRun
	for _, prov := range providerConfigs {
		for _, l := range all {
			if ok, _ := prov.Runs(l.s); !ok {
				continue // not a spec: the table shows only what a provider can run
			}
			for _, v := range hostOSVariants(l.s, l.def, prov) {
				for _, form := range l.s.Forms {
					for k := 1; k <= repeats; k++ {
						out = append(out, plannedRun{scenario: l.s, lab: v.def, provider: prov, form: form, hostOS: v.mode, repeat: k})
					}
				}
			}
		}
	}
	return out
}()

type hostOSVariant struct {
	mode string // "" for the lab file as it is
	def  *lab.Definition
}

// hostOSVariants are the labs a scenario runs on for prov: one per
// hostOS entry (the entry that is what the lab file says runs under the
// file's name), or the lab file alone when the scenario names none or the
// provider does not use the lab (its machines have no disks).
func hostOSVariants(s *scenario.Scenario, def *lab.Definition, prov *provider.Config) []hostOSVariant {
	if len(s.HostOS) == 0 || !prov.Lab {
		return []hostOSVariant{{def: def}}
	}
	var out []hostOSVariant
	for _, mode := range s.HostOS {
		if mode == def.HostOSMode() {
			out = append(out, hostOSVariant{def: def})
			continue
		}
		v, err := def.WithHostOS(mode)
		if err != nil {
			panic(fmt.Sprintf("%s: hostOS: %v", s.Name, err)) // validated when the scenario loaded
		}
		out = append(out, hostOSVariant{mode: mode, def: v})
	}
	return out
}

// selected says whether the label filter lets any run of prov through:
// what it alone needs is built only then.
func selected(prov *provider.Config) bool {
	filter, err := types.ParseLabelFilter(GinkgoLabelFilter())
	if err != nil {
		return true
	}
	for _, p := range plannedRuns {
		if p.provider == prov && filter(p.labels()) {
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
// (provider.Config.FixedPorts: CAPD's in-memory backend) cannot overlap,
// so they form one Ordered chain, handed out first as the longest piece
// of work, that one process runs while the others take the rest.
var _ = func() bool {
	chains := map[*provider.Config][]plannedRun{}
	for _, p := range plannedRuns {
		if len(p.provider.FixedPorts()) > 0 {
			chains[p.provider] = append(chains[p.provider], p)
			continue
		}
		Describe("upgrade scenarios", Label("scenario"), SpecPriority(len(p.lab.Spec.Hosts)), func() { scenarioSpec(p) })
	}
	for _, prov := range providerConfigs {
		if runs := chains[prov]; len(runs) > 0 {
			Describe("upgrade scenarios", Label("scenario"), Ordered, ContinueOnFailure, SpecPriority(chainPriority), func() {
				for _, p := range runs {
					scenarioSpec(p)
				}
			})
		}
	}
	return true
}()

// chainPriority puts a provider's chain of runs before every single run.
const chainPriority = 1000

// scenarioSpec is one run's spec.
func scenarioSpec(p plannedRun) {
	name := fmt.Sprintf("%s (%s) on %s", p.scenario.Name, p.form, p.provider.Name)
	if p.hostOS != "" {
		name = fmt.Sprintf("%s (%s, %s hosts) on %s", p.scenario.Name, p.form, p.hostOS, p.provider.Name)
	}
	if repeats > 1 {
		name += fmt.Sprintf(" #%d", p.repeat)
	}
	It(name, Label(p.labels()[1:]...), func(ctx context.Context) {
		dir, _ := filepath.Abs(filepath.Join(artifactsDir(), p.dir()))
		res := runner.Run(ctx, p.scenario, p.lab, p.form, runner.Options{
			RepoRoot: "..", Dir: dir, Scale: timescale.Scale(*timeScaleFlag), Progress: progress(), Name: p.name(),
			ProviderBinary: binaries.Provider, ExtensionBinary: binaries.Extension, Provider: p.provider,
			RateLimitedReconciles: *rateLimitFlag,
		})
		AddReportEntry(resultEntry, res, ReportEntryVisibilityNever)
		// In the spec's output, so in the JUnit test case too.
		fmt.Fprintf(GinkgoWriter, "rules: %s\n", check.Summary(res.Checks))
		Expect(res.Error).To(BeEmpty(), "the run stopped early")
		var broken []string
		for _, v := range check.Failed(res.Checks) {
			broken = append(broken, v.String())
		}
		Expect(broken).To(BeEmpty(), "broken rules (timeline %s):\n%s", res.Timeline, strings.Join(broken, "\n"))
	}, SpecTimeout(p.scenario.Timeout.Duration+2*time.Minute))
}
