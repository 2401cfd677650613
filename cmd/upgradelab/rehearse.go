package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/fleet"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/rehearsal"
)

func newRehearseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rehearse",
		Short: "Rehearse a site's upgrade on a lab built from its inventory",
	}
	cmd.AddCommand(newRehearseImportCommand(), newRehearseRunCommand(), newRehearseReportCommand())
	return cmd
}

type importOptions struct {
	out, name, to, toImage string
	anonymise              bool
}

func newRehearseImportCommand() *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import EXPORT",
		Short: "Write a lab, a scenario per cluster and a fleet file from a site's kubectl export",
		Long: `Reads a site's export (docs/REHEARSAL.md gives the kubectl commands): its
BareMetalHosts with their inspected hardware and HostFirmwareComponents, its
Clusters, KubeadmControlPlanes, MachineDeployments, Machines and
ClusterClasses, and each workload cluster's Deployments and
PodDisruptionBudgets under workload/NAMESPACE/CLUSTER.yaml. Writes into
--out a lab file and a scenario per cluster (its hosts, shape, version and
application) and one fleet file, checks them as hand-written ones are
checked, and lists everything it left out with the reason (unmapped.txt).
Secrets are never read; the lab's BMC credentials are generated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.OutOrStdout(), args[0])
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "folder for the lab, scenario and fleet files (default ./_artifacts/rehearsal-TIME)")
	cmd.Flags().StringVar(&o.name, "name", "", `the site's name in the files (default: the export folder's name; "site" with --anonymise)`)
	cmd.Flags().StringVar(&o.to, "to", "", "Kubernetes version to upgrade every cluster to (default: the lab catalog's next version above each cluster's)")
	cmd.Flags().StringVar(&o.toImage, "to-image", "", "OS image of the lab's catalog to upgrade every cluster to (its Kubernetes version is --to's; default: the catalog's plainest image of it)")
	cmd.Flags().BoolVar(&o.anonymise, "anonymise", false, "rename hosts, clusters and networks and generate MACs: files to share outside the site")
	return cmd
}

func (o importOptions) run(out io.Writer, export string) error {
	root, err := reference.RepoRoot()
	if err != nil {
		return err
	}
	fixtures := filepath.Join(root, "fixtures")
	cat, err := rehearsal.LoadCatalogs(fixtures)
	if err != nil {
		return err
	}
	x, err := rehearsal.Read(export)
	if err != nil {
		return err
	}
	opts := rehearsal.Options{Anonymise: o.anonymise, To: o.to, ToImage: o.toImage}
	if err := opts.Check(cat); err != nil {
		return err
	}
	site := rehearsal.Import(x, cat, opts)
	points := site.FailurePoints(cat) // before Write leaves out the clusters the lab refuses
	dir := o.out
	if dir == "" {
		dir = defaultArtifactsDir("rehearsal")
	}
	name := o.name
	switch {
	case name != "":
	case o.anonymise:
		name = "site" // the export folder's name may name the site
	default:
		name = filepath.Base(filepath.Clean(export))
	}
	files, err := site.Write(dir, fixtures, name)
	if err != nil {
		return err
	}
	// The files load under the same checks as hand-written ones.
	fl, err := fleet.Load(files.Fleet)
	if err != nil {
		return fmt.Errorf("the written files do not load: %w", err)
	}
	fmt.Fprintf(out, "site %s: %d cluster(s) on %d host(s), %d idle host(s)\n", name, len(fl.Clusters), len(fl.Lab.Spec.Hosts)-len(site.Idle), len(site.Idle))
	for _, c := range site.Clusters {
		fmt.Fprintf(out, "  %-24s %-9s %-12s control plane %d, workers %d, %d host(s) (%d spare), %s -> %s\n",
			c.Name, c.Strategy, c.Form, c.ControlPlane.Replicas, c.Workers.Replicas, len(c.Hosts), c.Spares, c.From.Version, c.To.Version)
	}
	fmt.Fprintf(out, "left out (%d, in %s):\n", len(site.Unmapped), files.Unmapped)
	for _, u := range site.Unmapped {
		fmt.Fprintf(out, "  %s\n", u)
	}
	pointsFile := filepath.Join(dir, "failure-points.json")
	if err := rehearsal.WriteFailurePoints(pointsFile, points); err != nil {
		return err
	}
	fmt.Fprintf(out, "failure points found before any run (%d, in %s):\n", len(points), pointsFile)
	for _, p := range points {
		fmt.Fprintf(out, "  %s\n", p)
	}
	fmt.Fprintf(out, "fleet file: %s (upgradelab fleet --fleet %s)\n", files.Fleet, files.Fleet)
	return nil
}
