package main

import (
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "upgradelab",
		Short:         "Conformance and simulation harness for Cluster API upgrades on bare metal",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newMgmtCommand(), newLabCommand(), newRunCommand(), newUpCommand(), newReportCommand(), newCheckCommand(), newFleetCommand(), newBenchCommand(), newRehearseCommand())
	return root
}

// defaultArtifactsDir is a new folder per run under ./_artifacts, so runs
// never overwrite each other.
func defaultArtifactsDir(kind string) string {
	return filepath.Join("_artifacts", kind+"-"+time.Now().Format("20060102-150405"))
}
