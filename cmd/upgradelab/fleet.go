package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/fleet"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/report"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/site"
)

func newFleetCommand() *cobra.Command {
	var o fleetOptions
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Provision many clusters on one plane and one lab, upgrade them in one wave, and measure what it costs",
		Long: `Reads a fleet file (fixtures/fleets; docs/FLEET.md), starts one management
plane with CAPI's managers, the provider and the extension, and one lab
holding a copy of each cluster's scenario lab, provisions every cluster
(each its own namespace, each recorded and judged with every rule as in
make e2e), then upgrades them all at once or in batches of wave.batch.
Prints and writes (fleet.txt, fleet.json) the wall time, the spread of
per-cluster upgrade times, each process's CPU and peak RSS, the API
server's request rate and each manager's workqueue depth and reconcile
latency; report.html, results.json and junit.xml hold each cluster's
verdicts. Exits non-zero when a cluster broke a rule or stopped.`,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	cmd.Flags().StringVar(&o.file, "fleet", "fixtures/fleets/small.yaml", "the fleet file")
	cmd.Flags().StringVar(&o.artifacts, "artifacts", "", "folder for every artifact (default ./_artifacts/fleet-TIME)")
	cmd.Flags().Float64Var(&o.scale, "time-scale", float64(timescale.Suite), "real time per modelled time in the lab")
	cmd.Flags().IntVar(&o.batch, "batch", -1, "override the fleet file's wave.batch (0: all at once)")
	cmd.Flags().IntVar(&o.concurrent, "provision-concurrent", -1, "override the fleet file's provision.concurrent: how many clusters provision at once (0: all)")
	cmd.Flags().BoolVar(&o.rateLimited, "capi-rate-limiting", true, "run CAPI's managers as CAPI ships them: their per-object reconcile rate limit and with it their stale-cache guard (false: faster, and not CAPI as users run it)")
	cmd.Flags().StringArrayVar(&o.managerFlags, "manager-flag", nil, "NAME=FLAG: one more flag for a manager of the plane (capi, kcp, cabpk, baremetal, inplace), e.g. capi=--kube-api-qps=200 (CAPI's default is 100); repeat it")
	cmd.Flags().DurationVar(&o.settle, "settle", fleet.DefaultSettle, "how long each cluster may take, once its Machines are done, for CAPI's Cluster, counts and add-ons to catch up before the end rules judge")
	cmd.Flags().DurationVar(&o.provision, "provision", fleet.DefaultProvision, "how long each cluster's provisioning may take (a lone run's is the provider config's interval; never less than it)")
	cmd.Flags().DurationVar(&o.upgrade, "upgrade", fleet.DefaultUpgrade, "how long each cluster's upgrade may take (a lone run's is the provider config's interval)")
	o.planeFlags(cmd)
	cmd.AddCommand(newCurveCommand())
	return cmd
}

func newCurveCommand() *cobra.Command {
	var o fleetOptions
	var sizes []int
	var earlier []string
	cmd := &cobra.Command{
		Use:   "curve",
		Short: "Run one fleet's mix at several lab sizes and plot what each wave cost against the size",
		Long: `Scales the fleet file's groups to each lab size in --hosts (counts in
proportion, at least one cluster a group), runs each size as
'upgradelab fleet' does, on a plane of its own, one after another, and
writes curve.txt, curve.json and curve.svg (time and memory against the
lab size) beside one folder per size (hosts-N/). Exits non-zero when a
cluster of any size broke a rule or stopped. --with alone (no --hosts)
runs nothing and draws the curve of the reports it names.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(earlier) > 0 && !cmd.Flags().Changed("hosts") {
				sizes = nil
			}
			return o.curve(cmd.Context(), cmd.OutOrStdout(), sizes, earlier)
		},
	}
	cmd.Flags().StringVar(&o.file, "fleet", "fixtures/fleets/hundred.yaml", "the fleet file (its hosts: is the size its counts are for)")
	cmd.Flags().IntSliceVar(&sizes, "hosts", []int{10, 100, 300, 1000}, "the lab sizes")
	cmd.Flags().StringVar(&o.artifacts, "artifacts", "", "folder for every artifact (default ./_artifacts/curve-TIME)")
	cmd.Flags().Float64Var(&o.scale, "time-scale", float64(timescale.Suite), "real time per modelled time in the lab")
	cmd.Flags().BoolVar(&o.rateLimited, "capi-rate-limiting", true, "run CAPI's managers as CAPI ships them (see upgradelab fleet)")
	cmd.Flags().StringArrayVar(&o.managerFlags, "manager-flag", nil, "NAME=FLAG: one more flag for a manager (see upgradelab fleet)")
	cmd.Flags().DurationVar(&o.settle, "settle", fleet.DefaultSettle, "the settle bound (see upgradelab fleet)")
	cmd.Flags().DurationVar(&o.provision, "provision", fleet.DefaultProvision, "the provisioning bound (see upgradelab fleet)")
	cmd.Flags().DurationVar(&o.upgrade, "upgrade", fleet.DefaultUpgrade, "the upgrade bound (see upgradelab fleet)")
	cmd.Flags().IntVar(&o.concurrent, "provision-concurrent", -1, "override the fleet file's provision.concurrent at every size (0: all at once)")
	o.planeFlags(cmd)
	cmd.Flags().StringArrayVar(&earlier, "with", nil, "the fleet.json of a size run before (upgradelab fleet): a point of the curve not run again; repeat it")
	o.batch = -1
	return cmd
}

type fleetOptions struct {
	file, artifacts string
	scale           float64
	batch           int
	concurrent      int
	rateLimited     bool
	managerFlags    []string
	settle          time.Duration
	provision       time.Duration
	upgrade         time.Duration
	management      string
	kindImage       string
	target          mgmt.Target // management, parsed before anything is built
	// inWave is a fault of the whole wave (fleet.Options.InWave).
	inWave func(context.Context, *site.Site)
}

// planeFlags are where the plane runs, for fleet and curve alike.
func (o *fleetOptions) planeFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.management, "management", "embedded", `where the management plane runs: "embedded", "kubeconfig=PATH" (an existing cluster; CAPI installed into it, managers on this machine) or "kind[=NAME]" (managers as Pods)`)
	cmd.Flags().StringVar(&o.kindImage, "kind-node-image", os.Getenv("KIND_NODE_IMAGE"), "node image for a kind cluster it creates (scripts/build-kind-node-image.sh builds one offline)")
}

// managerArgs are --manager-flag's NAME=FLAG pairs by manager.
func (o fleetOptions) managerArgs() (map[string][]string, error) {
	out := map[string][]string{}
	for _, f := range o.managerFlags {
		name, flag, ok := strings.Cut(f, "=")
		if !ok || name == "" || !strings.HasPrefix(flag, "-") {
			return nil, fmt.Errorf("--manager-flag %q: want NAME=FLAG, e.g. capi=--kube-api-qps=200", f)
		}
		out[name] = append(out[name], flag)
	}
	return out, nil
}

func (o fleetOptions) curve(ctx context.Context, out io.Writer, sizes []int, earlier []string) error {
	var err error
	if o.target, err = mgmt.ParseTarget(o.management); err != nil {
		return err
	}
	root, err := reference.RepoRoot()
	if err != nil {
		return fmt.Errorf("run from the repository (its fixtures and templates): %w", err)
	}
	var reps []*fleet.Report
	for _, path := range earlier {
		rep, err := fleet.ReadReport(path)
		if err != nil {
			return fmt.Errorf("--with: %w", err)
		}
		reps = append(reps, rep)
	}
	if len(sizes) == 0 {
		// Drawn from earlier runs alone: nothing to build or run.
		dir, closeLog, err := artifactsFolder(o.artifacts, "curve")
		if err != nil {
			return err
		}
		defer closeLog()
		if err := fleet.WriteCurve(dir, reps); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\nupgradelab artifacts: %s (%s, %s, %s)\n", fleet.CurveTable(reps), dir, fleet.CurveText, fleet.CurveFile, fleet.CurvePlot)
		return nil
	}
	fleets := make([]*fleet.Fleet, len(sizes))
	for i, n := range sizes {
		if fleets[i], err = fleet.LoadScaled(inRepo(root, o.file), n); err != nil {
			return err // every size is checked before the first runs
		}
	}
	dir, bins, closeLog, err := artifactsAndBinaries(ctx, out, o.artifacts, "curve")
	if err != nil {
		return err
	}
	defer closeLog()
	broken := false
	for i, fl := range fleets {
		rep, results, err := o.runOne(ctx, out, root, fl, filepath.Join(dir, fmt.Sprintf("hosts-%d", sizes[i])), bins)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
		broken = broken || slices.ContainsFunc(results, result.Result.Failed)
		if err := fleet.WriteCurve(dir, reps); err != nil { // kept after each size: a stopped curve keeps what it measured
			return err
		}
	}
	fmt.Fprintf(out, "\n%s\nupgradelab artifacts: %s (%s, %s, %s, one folder per size)\n", fleet.CurveTable(reps), dir, fleet.CurveText, fleet.CurveFile, fleet.CurvePlot)
	if broken {
		return errRulesBroken
	}
	return nil
}

func (o fleetOptions) run(ctx context.Context, out io.Writer) error {
	var err error
	if o.target, err = mgmt.ParseTarget(o.management); err != nil {
		return err
	}
	root, err := reference.RepoRoot()
	if err != nil {
		return fmt.Errorf("run from the repository (its fixtures and templates): %w", err)
	}
	fl, err := fleet.Load(inRepo(root, o.file))
	if err != nil {
		return err
	}
	dir, bins, closeLog, err := artifactsAndBinaries(ctx, out, o.artifacts, "fleet")
	if err != nil {
		return err
	}
	defer closeLog()
	_, results, err := o.runOne(ctx, out, root, fl, dir, bins)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(results, result.Result.Failed) {
		return errRulesBroken
	}
	return nil
}

// runOne runs one fleet into dir and writes its report, the clusters'
// HTML report and JUnit there.
func (o fleetOptions) runOne(ctx context.Context, out io.Writer, root string, fl *fleet.Fleet, dir string, bins reference.Binaries) (*fleet.Report, []result.Result, error) {
	args, err := o.managerArgs()
	if err != nil {
		return nil, nil, err
	}
	if o.batch >= 0 {
		fl.File.Wave.Batch = o.batch
	}
	if o.concurrent >= 0 {
		fl.File.Provision.Concurrent = o.concurrent
	}
	fmt.Fprintf(out, "fleet %s: %d clusters on %d hosts; artifacts in %s\n", fl.File.Name, len(fl.Clusters), len(fl.Lab.Spec.Hosts), dir)
	rep, results, err := fleet.Run(ctx, fl, fleet.Options{RepoRoot: root, Dir: dir, Scale: timescale.Scale(o.scale),
		Progress: &lockedWriter{w: out}, ProviderBinary: bins.Provider, ExtensionBinary: bins.Extension, RateLimitedReconciles: o.rateLimited,
		ManagerArgs: args, Settle: o.settle, Provision: o.provision, Upgrade: o.upgrade, Management: o.target, KindNodeImage: o.kindImage, InWave: o.inWave})
	if err != nil {
		return nil, nil, err
	}
	if err := rep.Write(dir); err != nil {
		return nil, nil, err
	}
	if err := writeArtifacts(dir, results, report.Layout{Processes: 1}); err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(out)
	result.WriteTable(out, results)
	fmt.Fprintf(out, "\n%s\nupgradelab artifacts: %s (%s, %s, report.html, %s, %s, one folder per cluster under clusters/)\n",
		rep, dir, fleet.ReportText, fleet.ReportFile, result.File, result.JUnitFile)
	return rep, results, nil
}
