package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
)

func newUpCommand() *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up SCENARIO",
		Short: "Bring up a scenario's world (plane, lab, provider, extension) for driving an upgrade by hand",
		Long: `Starts what a run of SCENARIO starts, on its lab (or --lab): the management
plane with CAPI's managers, the lab with its BMCs and hosts enrolled, and
the provider config's managers; the recorders write the run's timeline.
Nothing more happens until you act: it renders the cluster at the
scenario's from-release (cluster.yaml) and its upgrade to the to-release
(upgrade.yaml) from the provider config's templates, prints how to apply
and watch them, and waits. The upgrade step is recorded when the
cluster's version first moves off the from-release. Ctrl-C records the
done step, writes params.json and stops everything; then
'upgradelab check DIR' judges what you did with every rule.

The folder's sandbox.json holds the kubeconfig, namespace and files for
scripts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.scenario = args[0]
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.provider, "provider", runner.DefaultProvider, "provider config")
	cmd.Flags().StringVar(&o.lab, "lab", "", "lab file to use instead of the scenario's (it must fit the scenario)")
	cmd.Flags().StringVar(&o.form, "form", string(scenario.Plain), "cluster form: plain or clusterclass")
	cmd.Flags().StringVar(&o.artifacts, "artifacts", "", "folder for everything (default ./_artifacts/up-TIME)")
	cmd.Flags().Float64Var(&o.scale, "time-scale", float64(timescale.Suite), "real time per modelled time in the lab")
	cmd.Flags().BoolVar(&o.rateLimited, "capi-rate-limiting", true, "run CAPI's managers with their per-object reconcile rate limit, as CAPI ships them")
	return cmd
}

type upOptions struct {
	scenario, provider, lab, form, artifacts string
	scale                                    float64
	rateLimited                              bool
}

func (o upOptions) run(ctx context.Context, out io.Writer) error {
	root, err := reference.RepoRoot()
	if err != nil {
		return fmt.Errorf("run from the repository (its fixtures and templates): %w", err)
	}
	s, def, err := plan.Load(o.scenario)
	if err != nil {
		return err
	}
	if o.lab != "" {
		if def, err = lab.Load(o.lab); err != nil {
			return err
		}
		if err := plan.Fits(s, def); err != nil {
			return fmt.Errorf("--lab %s: %w", o.lab, err)
		}
	}
	form := scenario.Form(o.form)
	if form != scenario.Plain && form != scenario.ClusterClass {
		return fmt.Errorf("--form: %q is not plain or clusterclass", o.form)
	}
	prov, err := provider.Load(inRepo(root, o.provider))
	if err != nil {
		return err
	}
	if why := plan.Refused(prov, plan.Loaded{Scenario: s, Lab: def}); why != "" {
		return fmt.Errorf("up: %s", why)
	}
	dir, bins, closeLog, err := artifactsAndBinaries(ctx, out, o.artifacts, "up")
	if err != nil {
		return err
	}
	defer closeLog()
	sb, err := runner.StartSandbox(ctx, s, def, form, runner.Options{RepoRoot: root, Dir: dir, Scale: timescale.Scale(o.scale),
		Progress: out, Provider: prov, ProviderBinary: bins.Provider, ExtensionBinary: bins.Extension, RateLimitedReconciles: o.rateLimited})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, `
sandbox %s (%s, %s) is up; everything is in %s
  export KUBECONFIG=%s
  kubectl apply -f %s      # the cluster at %s
  kubectl get machines -n %s -w
  kubectl apply -f %s      # the upgrade to %s (%s)
  clusterctl describe cluster %s -n %s   # where clusterctl is installed
Ctrl-C stops it; then: upgradelab check %s
`, s.Name, prov.Name, form, dir, sb.Kubeconfig, sb.ClusterFile, sb.From, sb.Namespace, sb.UpgradeFile, sb.To, s.Strategy, sb.Cluster, sb.Namespace, dir)
	<-ctx.Done()
	fmt.Fprintln(out, "stopping the sandbox")
	sb.Stop()
	fmt.Fprintf(out, "timeline and params written; judge them with: upgradelab check %s\n", dir)
	return nil
}

// inRepo is path as given when it exists, or else relative to the
// repository (the defaults name files of the repository).
func inRepo(root, path string) string {
	if _, err := os.Stat(path); err == nil || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
}
