//go:build e2e

// Package e2e is the end-to-end suite: every upgrade scenario against the
// real CAPI managers, in each of its forms, against each provider config
// that can run it, plus the management plane's and the lab's own promises.
// `make e2e` runs it with the Ginkgo CLI at the version go.mod pins
// (--procs=PARALLEL); flags after -- choose the management cluster
// (-management, for every run), the artifacts folder, the time scale and
// CAPI's reconcile rate limit. docs/CONFORMANCE.md is the user's view.
//
// # Specs
//
// The spec tree comes from e2e/plan, as `upgradelab run` plans, from
// environment variables because Ginkgo builds the tree before it parses
// flags: UPGRADELAB_SCENARIOS (default scenarios/*.yaml; make e2e-faults
// points it at scenarios/faults/), UPGRADELAB_PROVIDERS (default the
// reference provider and CAPI's in-memory provider, so the conformance
// table shows a provider nobody here wrote beside ours),
// UPGRADELAB_REPEAT and UPGRADELAB_BACKEND. A bad file stops the suite
// before it starts, naming file and field. Each planned run is one spec,
// labelled as plan.Run.Labels says (GINKGO_LABELS selects): it calls
// runner.Run, leaves its result.Result as a report entry, and fails on a
// broken rule (with the moment, the objects and the rule) or an early stop.
//
// Two more specs keep the lower layers' promises: the CAPI core controller
// reconciles a Cluster on a plane started from -management (plane_test.go),
// and every host of the cold-spare lab boots deploy media through its
// Redfish BMC driven by gofish (lab_test.go).
//
// # Parallel layout
//
// Each run has its own lab. A process keeps its management plane from one
// run to its next (-keep-plane, runner.Planes): a run without faults on
// the reference provider starts only its lab and the provider, and leaves
// its namespace empty for the next; any other run starts a plane of its
// own. Runs at once share nothing but the machine. Each spec is a top-level container whose SpecPriority is its
// lab's host count, so the longest runs are handed out first (Ginkgo
// otherwise orders them by text). A provider whose managers bind fixed
// ports (provider.Config.FixedPorts: CAPD's in-memory backend binds :19000
// whatever its flags say) cannot have two planes at once: its runs
// without faults run together on one plane (runner.Together), then those
// with faults one after another, in an Ordered container handed out
// first, which one process runs while the others take the rest (a plane
// holds those ports machine-wide). A kind management cluster is shared by every run, so
// -management=kind needs one process.
//
// The first process's SynchronizedBeforeSuite builds the reference
// provider, the in-place extension and every manager built from source of
// each provider a selected run runs against (provider.Config.Build: CAPD
// from its module), side by side, before any spec starts, so no
// scenario's clock waits for a build; its progress lines reach the
// terminal as they come. It hands the binaries' paths and the artifacts
// folder to the others.
//
// In parallel, Ginkgo shows a spec's output only when it ends, so the
// runs' progress lines also go straight to the CLI through its parallel
// server (Server.EmitOutput, the RPC Ginkgo's own processes forward live
// output with), one Write per line so lines of different runs never mix.
// Library logs go to stdlog.txt (stdlog-N.txt per process). The processes
// send their reports to the first, whose ReportAfterSuite writes
// report.html and results.json (e2e/report) with the layout (which
// process ran which run when) and environment.json (the make target,
// machine and commit, for make bench-report). The CLI writes junit.xml.
package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/upgradelab/upgradelab/e2e/benchtable"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/report"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/internal/timescale"
)

var (
	artifactsFlag     = flag.String("artifacts", "", "folder for every artifact of this run (default ./_artifacts/e2e-TIME)")
	managementFlag    = flag.String("management", "embedded", `management cluster: "embedded", "kubeconfig=PATH" or "kind[=NAME]"`)
	kindNodeImageFlag = flag.String("kind-node-image", os.Getenv("KIND_NODE_IMAGE"), "node image of a kind management cluster the run creates (scripts/build-kind-node-image.sh builds one; default $KIND_NODE_IMAGE)")
	timeScaleFlag     = flag.Float64("time-scale", float64(timescale.Suite), "real time per modelled time in the lab (0.01: a modelled minute takes 0.6 s)")
	rateLimitFlag     = flag.Bool("capi-rate-limiting", true, "run CAPI's managers with their per-object reconcile rate limit, as CAPI ships them (see docs/ARCHITECTURE.md)")
	batchAtOnceFlag   = flag.Int("batch-at-once", 2, "how many runs of a fixed-port provider's batch go at a time on its one plane (runner.Together); the batch's process is one of --procs, so each run beyond the first is load no process was counted for")
	keepPlaneFlag     = flag.Bool("keep-plane", true, "each process keeps its management plane for its next run that can share it (runner.Planes); false: every run starts its own")
)

// binaries are the provider's and the extension's, built once per suite
// by the first process and handed to the others.
var binaries struct{ Provider, Extension, Artifacts string }

// managementTarget is -management, parsed (a bad value fails the spec
// with the parser's message).
func managementTarget() mgmt.Target {
	t, err := mgmt.ParseTarget(*managementFlag)
	Expect(err).NotTo(HaveOccurred())
	if sc, _ := GinkgoConfiguration(); t.Kind == mgmt.KindCluster && sc.ParallelTotal > 1 {
		Fail(fmt.Sprintf("-management=%s: every run deploys the managers into the same kind cluster, so the runs go one at a time (PARALLEL=1, as make e2e-kind runs them), not %d at once", t, sc.ParallelTotal))
	}
	return t
}

// artifactsDir is -artifacts, or a new folder under _artifacts chosen on
// first use: the report always lands in the run's folder, even when
// BeforeSuite did not run (a dry run), never in the package directory.
// In a parallel suite every process uses the folder the first one chose.
func artifactsDir() string {
	if *artifactsFlag == "" {
		*artifactsFlag = filepath.Join("_artifacts", "e2e-"+time.Now().Format("20060102-150405"))
	}
	return *artifactsFlag
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "upgradelab e2e")
}

var _ = SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	Expect(os.MkdirAll(artifactsDir(), 0o755)).To(Succeed())
	for _, r := range plan.NotRun(plannedScenarios, providerConfigs) {
		fmt.Fprintf(timestamped{os.Stdout}, "not run: %s on %s: %s\n", r.Scenario, r.Provider, r.Why)
	}
	bin := filepath.Join(artifactsDir(), "bin")
	abs, _ := filepath.Abs(artifactsDir())
	built := binaries
	built.Artifacts = abs
	// The reference provider and the extension, and the managers built
	// from modules (CAPI's in-memory provider) when a selected spec runs
	// them, build side by side (each Go build leaves a core idle while it
	// links or waits on a package another needs) and before the first
	// spec starts: no scenario's clock waits for a build. The first
	// process's output reaches the terminal as it comes while this node
	// runs.
	builds, ctx := errgroup.WithContext(ctx)
	builds.Go(func() error {
		fmt.Fprintf(timestamped{os.Stdout}, "building the reference provider and the in-place extension into %s\n", bin)
		start := time.Now()
		bins, err := reference.BuildAll(ctx, bin)
		if err == nil {
			built.Provider, built.Extension = bins.Provider, bins.Extension
			fmt.Fprintf(timestamped{os.Stdout}, "built the reference provider and the in-place extension in %s\n", time.Since(start).Round(time.Second))
		}
		return err
	})
	builds.Go(func() error {
		for _, prov := range providerConfigs {
			if !selected(prov) {
				continue
			}
			for _, m := range prov.Managers {
				if err := prov.Build(ctx, m, "..", mgmt.CacheDir(), timestamped{os.Stdout}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	Expect(builds.Wait()).To(Succeed())
	data, err := json.Marshal(built)
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	Expect(json.Unmarshal(data, &binaries)).To(Succeed())
	*artifactsFlag = binaries.Artifacts
	// net/http's complaints from CAPI's in-memory workload API servers
	// ("superfluous response.WriteHeader") and what controller-runtime
	// logs in this process (envtest starting the API server, the
	// recorder's caches) go to a file, not among the progress lines:
	// stdlog.txt, or stdlog-N.txt for parallel process N.
	name := "stdlog.txt"
	if cfg, _ := GinkgoConfiguration(); cfg.ParallelTotal > 1 {
		name = fmt.Sprintf("stdlog-%d.txt", cfg.ParallelProcess)
	}
	stdlog, err := os.Create(filepath.Join(artifactsDir(), name))
	Expect(err).NotTo(HaveOccurred())
	log.SetOutput(stdlog)
	ctrllog.SetLogger(zap.New(zap.WriteTo(stdlog)))
}, NodeTimeout(45*time.Minute)) // a cold build of CAPD takes minutes on 2 cores

// timestamped writes each line with the time, as a run's progress lines.
type timestamped struct{ w io.Writer }

func (t timestamped) Write(p []byte) (int, error) {
	_, err := fmt.Fprintf(t.w, "%s %s", time.Now().Format("15:04:05"), p)
	return len(p), err
}

// keptPlanes is this process's kept plane (-keep-plane), made on first
// use and stopped after its last spec.
var (
	keptPlanesOnce sync.Once
	kept           *runner.Planes
)

func keptPlanes() *runner.Planes {
	if !*keepPlaneFlag {
		return nil
	}
	keptPlanesOnce.Do(func() {
		cfg, _ := GinkgoConfiguration()
		dir, _ := filepath.Abs(filepath.Join(artifactsDir(), "kept-planes", fmt.Sprint(cfg.ParallelProcess)))
		kept = &runner.Planes{Dir: dir}
	})
	return kept
}

var _ = AfterSuite(func() {
	if kept != nil {
		kept.Stop()
	}
})

var _ = ReportAfterSuite("artifacts", func(r Report) {
	abs, _ := filepath.Abs(artifactsDir())
	results, layout := scenarioResults(r)
	if err := result.Write(filepath.Join(abs, result.File), results); err != nil {
		fmt.Fprintf(os.Stdout, "\nwriting %s: %v\n", result.File, err)
	}
	if err := report.Write(abs, results, layout); err != nil {
		fmt.Fprintf(os.Stdout, "\nwriting the report: %v\n", err)
	}
	// Where it ran, for make bench-report.
	env := benchtable.Here("..")
	env.Target, env.Labels, env.Repeat = cmp.Or(os.Getenv("UPGRADELAB_SUITE"), "e2e"), GinkgoLabelFilter(), repeats
	if err := benchtable.WriteEnv(abs, env); err != nil {
		fmt.Fprintf(os.Stdout, "\nwriting %s: %v\n", benchtable.EnvFile, err)
	}
	fmt.Fprintf(os.Stdout, "\nupgradelab e2e artifacts: %s (report.html, %s, junit.xml, one folder per scenario run)\n", abs, result.File)
})
