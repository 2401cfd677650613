package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/report"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/internal/timescale"
)

// errRulesBroken makes the command exit non-zero after it printed why.
var errRulesBroken = errors.New("rules broken")

func newRunCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [SCENARIO...]",
		Short: "Run scenario files against providers, as make e2e does, without Go's test tooling",
		Long: `Runs each scenario (default: scenarios/*.yaml) against each provider config
(--provider, repeatable; default fixtures/providers/baremetal.yaml) that
supports its strategy, in each of its forms and host OS variants, each run
on its own lab (and plane: --keep-plane says when a slot keeps its plane
for its next run). Progress lines, the artifacts folder
(one folder per run, results.json, junit.xml, report.html) and the verdicts
are those of make e2e. Exits non-zero when a run broke a rule or stopped.

The provider and extension binaries are taken from beside this executable
(upgradelab-baremetal, upgradelab-inplace: make build puts them there), or
built from the repository when they are not there.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.scenarios = args
			stop, err := startCPUProfile(o.cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringSliceVar(&o.providers, "provider", []string{"fixtures/providers/baremetal.yaml"}, "provider config (repeatable)")
	cmd.Flags().StringVar(&o.artifacts, "artifacts", "", "folder for every artifact (default ./_artifacts/run-TIME)")
	cmd.Flags().Float64Var(&o.scale, "time-scale", float64(timescale.Suite), "real time per modelled time in the lab (0.01: a modelled minute takes 0.6 s)")
	cmd.Flags().IntVar(&o.parallel, "parallel", 1, "runs at once (each has its own lab and plane)")
	cmd.Flags().BoolVar(&o.keepPlane, "keep-plane", true, "each of the --parallel slots keeps its management plane for its next run that can share it (runs without faults on the reference provider's lab); false: every run starts its own")
	cmd.Flags().IntVar(&o.repeat, "repeat", 1, "make each run this many times")
	cmd.Flags().StringVar(&o.labels, "labels", "", `only the runs these labels select, as make e2e's GINKGO_LABELS (e.g. "in-place && ostree")`)
	cmd.Flags().StringVar(&o.backend, "backend", "", "what runs the lab hosts: test (modelled) or qemu (real VMs; A/B hosts only); default: each lab file's")
	cmd.Flags().BoolVar(&o.rateLimited, "capi-rate-limiting", true, "run CAPI's managers with their per-object reconcile rate limit and its stale-cache guard, as CAPI ships them (false: faster, and not CAPI as users run it)")
	cmd.Flags().StringVar(&o.cpuProfile, "cpu-profile", "", "write the harness's CPU profile (the lab, the recorder, the judge) to this file, for go tool pprof")
	return cmd
}

type runOptions struct {
	scenarios, providers []string
	artifacts, labels    string
	backend, cpuProfile  string
	scale                float64
	parallel, repeat     int
	keepPlane            bool
	rateLimited          bool
}

// startCPUProfile profiles this process into path until stop; with no
// path it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// run plans the runs, builds what they need, runs them and writes the
// artifacts; it fails when a run broke a rule or stopped.
func (o runOptions) run(ctx context.Context, out io.Writer) error {
	root, err := reference.RepoRoot()
	if err != nil {
		return fmt.Errorf("run from the repository (its fixtures and templates): %w", err)
	}
	provs, runs, refused, err := o.plan(root)
	if err != nil {
		return err
	}
	for _, r := range refused {
		fmt.Fprintf(out, "not run: %s on %s: %s\n", r.Scenario, r.Provider, r.Why)
	}
	dir, bins, closeLog, err := artifactsAndBinaries(ctx, out, o.artifacts, "run")
	if err != nil {
		return err
	}
	defer closeLog()
	for _, p := range provs {
		for _, m := range p.Managers {
			if err := p.Build(ctx, m, root, mgmt.CacheDir(), out); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "%d run(s), %d at a time; artifacts in %s\n", len(runs), max(o.parallel, 1), dir)
	results, layout := o.runAll(ctx, out, root, dir, bins, runs)
	if err := writeArtifacts(dir, results, layout); err != nil {
		return err
	}
	fmt.Fprintln(out)
	result.WriteTable(out, results)
	fmt.Fprintf(out, "\nupgradelab artifacts: %s (report.html, %s, %s, one folder per run)\n", dir, result.File, result.JUnitFile)
	for _, r := range results {
		if r.Failed() {
			return errRulesBroken
		}
	}
	return nil
}

// plan loads the providers and plans their runs of the scenarios the
// options name (every shipped scenario by default), saying which
// scenarios a provider does not run and why.
func (o runOptions) plan(root string) ([]*provider.Config, []plan.Run, []plan.Refusal, error) {
	if len(o.scenarios) == 0 {
		o.scenarios = []string{filepath.Join(root, "scenarios", "*.yaml")}
	}
	var provs []*provider.Config
	for _, p := range o.providers {
		c, err := provider.Load(inRepo(root, p))
		if err != nil {
			return nil, nil, nil, err
		}
		provs = append(provs, c)
	}
	scenarios, err := plan.Scenarios(o.scenarios...)
	if err != nil {
		return nil, nil, nil, err
	}
	if scenarios, err = plan.OnBackend(scenarios, o.backend); err != nil {
		return nil, nil, nil, err
	}
	runs, err := plan.Runs(scenarios, provs, o.repeat)
	if err != nil {
		return nil, nil, nil, err
	}
	if runs, err = plan.Select(runs, o.labels); err != nil {
		return nil, nil, nil, err
	}
	if len(runs) == 0 {
		var why []string
		for _, r := range plan.NotRun(scenarios, provs) {
			why = append(why, fmt.Sprintf("\n  %s on %s: %s", r.Scenario, r.Provider, r.Why))
		}
		return nil, nil, nil, fmt.Errorf("no run: none of the providers runs the scenarios, or --labels %q selects none%s", o.labels, strings.Join(why, ""))
	}
	return provs, runs, plan.NotRun(scenarios, provs), nil
}

// runAll runs the runs, o.parallel at a time, each in its folder under
// dir, and says which slot ran which run when.
func (o runOptions) runAll(ctx context.Context, out io.Writer, root, dir string, bins reference.Binaries, runs []plan.Run) ([]result.Result, report.Layout) {
	parallel := max(o.parallel, 1)
	results := make([]result.Result, len(runs))
	placements := make([]report.Placement, len(runs))
	progress := &lockedWriter{w: out}
	slots := make(chan int, parallel)
	kept := make([]*runner.Planes, parallel+1) // by slot
	for i := range parallel {
		slots <- i + 1
		if o.keepPlane {
			kept[i+1] = &runner.Planes{Dir: filepath.Join(dir, "kept-planes", strconv.Itoa(i+1))}
			defer kept[i+1].Stop()
		}
	}
	var wg sync.WaitGroup
	for i, r := range runs {
		slot := <-slots
		wg.Go(func() {
			defer func() { slots <- slot }()
			placements[i].Process, placements[i].Start = slot, time.Now()
			results[i] = runner.Run(ctx, r.Scenario, r.Lab, r.Form, runner.Options{RepoRoot: root, Dir: filepath.Join(dir, r.Dir()),
				Scale: timescale.Scale(o.scale), Progress: progress, Name: r.Name(), Provider: r.Provider,
				ProviderBinary: bins.Provider, ExtensionBinary: bins.Extension, RateLimitedReconciles: o.rateLimited, Planes: kept[slot]})
			placements[i].End = time.Now()
			placements[i].Run = report.RunAnchor(results[i])
		})
	}
	wg.Wait()
	return results, report.Layout{Processes: parallel, Runs: placements}
}

// writeArtifacts writes results.json, report.html and junit.xml into dir.
func writeArtifacts(dir string, results []result.Result, layout report.Layout) error {
	if err := result.Write(filepath.Join(dir, result.File), results); err != nil {
		return err
	}
	if err := report.Write(dir, results, layout); err != nil {
		return err
	}
	return result.WriteJUnit(filepath.Join(dir, result.JUnitFile), results)
}

// referenceBinaries are the provider's and the extension's executables:
// beside this one when make build put them there, otherwise built from
// the repository into dir.
func referenceBinaries(ctx context.Context, out io.Writer, dir string) (reference.Binaries, error) {
	if self, err := os.Executable(); err == nil {
		here := filepath.Dir(self)
		b := reference.Binaries{Provider: filepath.Join(here, reference.ProviderCommand), Extension: filepath.Join(here, reference.ExtensionCommand)}
		if isFile(b.Provider) && isFile(b.Extension) {
			fmt.Fprintf(out, "%s%s\n", referenceReady, here)
			return b, nil
		}
	}
	fmt.Fprintln(out, "building the reference provider and the in-place extension")
	start := time.Now()
	b, err := reference.BuildAll(ctx, dir)
	if err == nil {
		fmt.Fprintf(out, "built them in %s\n%s%s\n", time.Since(start).Round(time.Second), referenceReady, dir)
	}
	return b, err
}

// referenceReady starts the line that says where the reference binaries
// are, once they are there: what comes after it runs on the lab's clock.
const referenceReady = "reference provider and extension: "

// artifactsAndBinaries is the command's artifacts folder
// (artifactsFolder) and the reference binaries built or found for it
// (referenceBinaries): what run, up, fleet and fleet curve start with.
func artifactsAndBinaries(ctx context.Context, out io.Writer, given, kind string) (dir string, bins reference.Binaries, closeLog func(), err error) {
	if dir, closeLog, err = artifactsFolder(given, kind); err != nil {
		return "", reference.Binaries{}, nil, err
	}
	if bins, err = referenceBinaries(ctx, out, filepath.Join(dir, "bin")); err != nil {
		closeLog()
		return "", reference.Binaries{}, nil, err
	}
	return dir, bins, closeLog, nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// artifactsFolder makes the command's artifacts folder (given, or a new
// one under ./_artifacts for kind) and sends what the libraries log in
// this process to its stdlog.txt, not among the progress lines.
func artifactsFolder(given, kind string) (dir string, closeLog func(), err error) {
	if given == "" {
		given = defaultArtifactsDir(kind)
	}
	if dir, err = filepath.Abs(given); err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	stdlog, err := os.Create(filepath.Join(dir, "stdlog.txt"))
	if err != nil {
		return "", nil, err
	}
	log.SetOutput(stdlog)
	ctrllog.SetLogger(zap.New(zap.WriteTo(stdlog)))
	return dir, func() { stdlog.Close() }, nil
}

// lockedWriter lets concurrent runs write whole progress lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// String is what was written, when the writer is a bytes.Buffer.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.w.(*bytes.Buffer); ok {
		return b.String()
	}
	return ""
}
