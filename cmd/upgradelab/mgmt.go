package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/upgradelab/upgradelab/e2e/mgmt/kind"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

func newMgmtCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "mgmt", Short: "The management cluster with the real CAPI managers"}
	cmd.AddCommand(newMgmtUpCommand(), newMgmtDownCommand())
	return cmd
}

func newMgmtDownCommand() *cobra.Command {
	var management string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete the kind management cluster (--management kind[=NAME])",
		Long: `A kind management cluster outlives the runs that use it, so the next run
reuses it; down deletes it through kind's Go library, as "kind delete
cluster" would.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := mgmt.ParseTarget(management)
			if err != nil {
				return err
			}
			if target.Kind != mgmt.KindCluster {
				return fmt.Errorf("--management %q: only a kind cluster is deleted (an embedded plane stops with its command)", management)
			}
			if err := kind.Delete(target.Cluster); err != nil {
				return fmt.Errorf("deleting kind cluster %s: %w", target.Cluster, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kind cluster %s deleted\n", target.Cluster)
			return nil
		},
	}
	cmd.Flags().StringVar(&management, "management", "kind", `the kind cluster: "kind" or "kind=NAME"`)
	return cmd
}

func newMgmtUpCommand() *cobra.Command {
	var management, artifacts, kindImage string
	var rateLimited bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the management plane in the foreground until Ctrl-C",
		Long: `Starts kube-apiserver and etcd (or uses an existing cluster), installs the
CRDs and webhooks of Cluster API core, KubeadmControlPlane and kubeadm
bootstrap, and runs those managers with ClusterTopology, RuntimeSDK and
InPlaceUpdates on, and with CAPI's per-object reconcile rate limit unless
--capi-rate-limiting=false (see docs/ARCHITECTURE.md, "Time"). Prints the
kubeconfig to use with kubectl, then waits; Ctrl-C stops every process it
started.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := mgmt.ParseTarget(management)
			if err != nil {
				return err
			}
			if artifacts == "" {
				artifacts = defaultArtifactsDir("mgmt")
			}
			out := cmd.OutOrStdout()
			plane, err := mgmt.Start(cmd.Context(), mgmt.Options{Target: target, ArtifactsDir: artifacts, Progress: out, RateLimitedReconciles: rateLimited,
				KindNodeImage: kindImage})
			if err != nil {
				return err
			}
			defer plane.Stop()
			kubeconfig, _ := filepath.Abs(plane.Kubeconfig)
			fmt.Fprintf(out, "\nmanagement plane is up; logs in %s\n  export KUBECONFIG=%s\n  kubectl get clusters -A\nCtrl-C stops it.\n", plane.LogDir, kubeconfig)
			<-cmd.Context().Done()
			fmt.Fprintln(out, "stopping the management plane")
			return nil
		},
	}
	cmd.Flags().StringVar(&management, "management", "embedded", `where the management cluster runs: "embedded", "kubeconfig=PATH" or "kind[=NAME]" (managers as Pods)`)
	cmd.Flags().StringVar(&kindImage, "kind-node-image", os.Getenv("KIND_NODE_IMAGE"), "node image for a kind cluster it creates (scripts/build-kind-node-image.sh builds one offline)")
	cmd.Flags().BoolVar(&rateLimited, "capi-rate-limiting", true, "run CAPI's managers with ReconcilerRateLimiting (CAPI's default)")
	cmd.Flags().StringVar(&artifacts, "artifacts", "", "folder for logs and the kubeconfig (default ./_artifacts/mgmt-TIME)")
	return cmd
}
