package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

func newMgmtCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "mgmt", Short: "The management cluster with the real CAPI managers"}
	cmd.AddCommand(newMgmtUpCommand())
	return cmd
}

func newMgmtUpCommand() *cobra.Command {
	var management, artifacts string
	var rateLimited bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the management plane in the foreground until Ctrl-C",
		Long: `Starts kube-apiserver and etcd (or uses an existing cluster), installs the
CRDs and webhooks of Cluster API core, KubeadmControlPlane and kubeadm
bootstrap, and runs those managers with ClusterTopology, RuntimeSDK and
InPlaceUpdates on, and with CAPI's per-object reconcile rate limit unless
--capi-rate-limiting=false (the scenario runs turn it off: see
docs/ARCHITECTURE.md). Prints the kubeconfig to use with kubectl, then waits;
Ctrl-C stops every process it started.`,
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
			plane, err := mgmt.Start(cmd.Context(), mgmt.Options{Target: target, ArtifactsDir: artifacts, Progress: out, RateLimitedReconciles: rateLimited})
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
	cmd.Flags().StringVar(&management, "management", "embedded", `where the management cluster runs: "embedded" or "kubeconfig=PATH"`)
	cmd.Flags().BoolVar(&rateLimited, "capi-rate-limiting", true, "run CAPI's managers with ReconcilerRateLimiting (CAPI's default)")
	cmd.Flags().StringVar(&artifacts, "artifacts", "", "folder for logs and the kubeconfig (default ./_artifacts/mgmt-TIME)")
	return cmd
}
