package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/fleet"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/rehearsal"
	"github.com/upgradelab/upgradelab/internal/timescale"
)

type rehearseRunOptions struct {
	artifacts string
	scale     float64
	upgrade   time.Duration
}

func newRehearseRunCommand() *cobra.Command {
	var o rehearseRunOptions
	cmd := &cobra.Command{
		Use:   "run PLAN",
		Short: "Rehearse a plan's upgrade wave on a lab built from the site's export, and predict it",
		Long: `Reads a rehearsal plan (docs/REHEARSAL.md): the site's export, the clusters
and what each upgrades to, the NIC firmware, the wave's order and batches,
the maintenance window, how many repeats and which faults. Imports the
export, then runs the wave as a fleet (upgradelab fleet) once per repeat
and once per fault, each on a plane and lab of its own, and writes the
prediction (prediction.json, prediction.html): each cluster's upgrade
time in the site's time (p50/p95 over the repeats), its API outages and
the evictions its budgets refused, whether the wave fits the window, the
failure points found before any run and those the runs met, every rule's
verdicts, and what the prediction rests on. Broken rules are findings,
not errors: it exits non-zero only when it could not rehearse.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), cmd.OutOrStdout(), args[0]) },
	}
	cmd.Flags().StringVar(&o.artifacts, "artifacts", "", "folder for every artifact (default ./_artifacts/rehearsal-TIME)")
	cmd.Flags().Float64Var(&o.scale, "time-scale", float64(timescale.Suite), "real time per modelled time in the lab (the prediction counts the modelled steps at their length whatever it is)")
	cmd.Flags().DurationVar(&o.upgrade, "upgrade", 6*time.Minute, "how long each cluster's upgrade may take before its run stops, in real time at time scale 0.01 (in proportion at a slower one): an upgrade that never ends (a host that does not come back, an image with no room) holds its wave this long")
	return cmd
}

func newRehearseReportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Write a rehearsal's prediction again from its folder, running nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, plan, err := rehearsal.ReadRecord(args[0])
			if err != nil {
				return err
			}
			return predict(cmd.OutOrStdout(), args[0], plan, rec)
		},
	}
}

func (o rehearseRunOptions) run(ctx context.Context, out io.Writer, planFile string) error {
	root, err := reference.RepoRoot()
	if err != nil {
		return fmt.Errorf("run from the repository (its fixtures and templates): %w", err)
	}
	fixtures := filepath.Join(root, "fixtures")
	plan, err := rehearsal.LoadPlan(inRepo(root, planFile))
	if err != nil {
		return err
	}
	cat, err := rehearsal.LoadCatalogs(fixtures)
	if err != nil {
		return err
	}
	x, err := rehearsal.Read(plan.ExportDir())
	if err != nil {
		return err
	}
	if err := plan.Options().Check(cat); err != nil {
		return fmt.Errorf("%s: %w", plan.Path(), err)
	}
	if err := plan.CheckExport(x); err != nil {
		return err
	}
	if o.scale <= 0 || o.scale > 1 {
		return fmt.Errorf("--time-scale %g: want a share of real time above 0 and at most 1", o.scale)
	}
	clean, err := planSite(plan, x, cat, "")
	if err != nil {
		return err
	}
	name := "site"
	if !plan.Anonymise {
		name = filepath.Base(filepath.Clean(plan.ExportDir()))
	}
	rec := &rehearsal.Record{Plan: plan.Path(), Site: name, FailurePoints: clean.FailurePoints(cat)}
	dir, bins, closeLog, err := artifactsAndBinaries(ctx, out, o.artifacts, "rehearsal")
	if err != nil {
		return err
	}
	defer closeLog()
	// The site as the plan makes it, for the reader; each wave writes its own.
	if _, err := clean.Write(filepath.Join(dir, "site"), fixtures, name); err != nil {
		return err
	}
	rec.LeftOut = clean.LeftOut(x)
	for _, w := range plan.Waves() {
		if w, err = o.runWave(ctx, out, root, dir, name, w, plan, x, cat, bins); err != nil {
			return err
		}
		rec.Waves = append(rec.Waves, w)
		if err := rec.Write(dir); err != nil { // kept after each wave: a stopped rehearsal keeps what ran
			return err
		}
	}
	return predict(out, dir, plan, rec)
}

// planSite is the export as the plan upgrades it, with an inventory
// fault (budget-never-allows) if the wave has one.
func planSite(plan *rehearsal.Plan, x *rehearsal.Export, cat rehearsal.Catalogs, fault string) (*rehearsal.Site, error) {
	s := rehearsal.Import(x, cat, plan.Options())
	if err := plan.Apply(s, cat); err != nil {
		return nil, err
	}
	s.WithFault(fault)
	return s, nil
}

// runWave writes the wave's site and runs it as a fleet into its folder.
func (o rehearseRunOptions) runWave(ctx context.Context, out io.Writer, root, dir, name string, w rehearsal.Wave,
	plan *rehearsal.Plan, x *rehearsal.Export, cat rehearsal.Catalogs, bins reference.Binaries) (rehearsal.Wave, error) {
	s, err := planSite(plan, x, cat, w.Fault)
	if err != nil {
		return w, err
	}
	w.Dir = filepath.Join(dir, w.Name)
	files, err := s.Write(filepath.Join(w.Dir, "site"), filepath.Join(root, "fixtures"), name)
	if err != nil {
		return w, err
	}
	fl, err := fleet.Load(files.Fleet)
	if err != nil {
		return w, fmt.Errorf("wave %s: the site's files do not load: %w", w.Name, err)
	}
	lw := &lockedWriter{w: out} // the fault tells from the wave's goroutine
	say := func(msg string) {
		fmt.Fprintf(lw, "%s [rehearsal %s] %s\n", time.Now().Format("15:04:05"), w.Name, msg)
	}
	say(fmt.Sprintf("wave %s: %d cluster(s), batch %d", w.Name, len(fl.Clusters), fl.File.Wave.Batch))
	var hosts []string
	for _, c := range fl.Clusters {
		hosts = append(hosts, c.Hosts...)
	}
	fo := fleetOptions{scale: o.scale, batch: -1, concurrent: -1, rateLimited: true, settle: fleet.DefaultSettle,
		provision: fleet.DefaultProvision, upgrade: o.upgrade, target: mgmt.Target{Kind: mgmt.Embedded}, inWave: rehearsal.InWave(w.Fault, hosts, say)}
	if _, w.Results, err = fo.runOne(ctx, lw, root, fl, w.Dir, bins); err != nil {
		return w, fmt.Errorf("wave %s: %w", w.Name, err)
	}
	return w, nil
}

// predict writes the prediction of a rehearsal's waves into dir and
// prints it.
func predict(out io.Writer, dir string, plan *rehearsal.Plan, rec *rehearsal.Record) error {
	p, err := rehearsal.Predict(plan, rec)
	if err != nil {
		return err
	}
	jsonFile, page := filepath.Join(dir, rehearsal.PredictionFile), filepath.Join(dir, rehearsal.PredictionPage)
	if err := p.WriteJSON(jsonFile); err != nil {
		return err
	}
	if err := p.WritePage(page); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s\nupgradelab artifacts: %s (%s, %s, one folder per wave)\n", p.Text(), dir, rehearsal.PredictionPage, rehearsal.PredictionFile)
	return nil
}
