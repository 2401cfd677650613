package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/benchtable"
	"github.com/upgradelab/upgradelab/e2e/reference"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Keep docs/BENCHMARKS.md"}
	cmd.AddCommand(newBenchReportCommand(), newBenchEnvCommand())
	return cmd
}

func newBenchReportCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report FOLDER...",
		Short: "Put the figures measured in FOLDERs into the benchmark table",
		Long: `Reads each FOLDER's measurements and rewrites their rows of the benchmark
table (docs/BENCHMARKS.md): bench.txt (the output of go test -bench, as make
bench keeps it, with the environment.json bench env wrote before it ran),
an e2e artifacts folder (results.json and environment.json: the suite's runs
and where they ran), and *.timing.json files of scripts/timed (a whole
command timed). A row
measured again replaces its old self; the others keep their own date and
commit.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := reference.RepoRoot()
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(root, "docs", "BENCHMARKS.md")
			}
			table, err := benchtable.ReadTable(out)
			if err != nil {
				return err
			}
			for _, dir := range args {
				rows, err := benchtable.FromFolder(dir)
				if err != nil {
					return err
				}
				table.Merge(rows)
				fmt.Fprintf(cmd.OutOrStdout(), "%d figure(s) from %s\n", len(rows), dir)
			}
			if err := table.Write(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the table to rewrite (default docs/BENCHMARKS.md of this repository)")
	return cmd
}

func newBenchEnvCommand() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "env FOLDER",
		Short: "Record where and when FOLDER's measurements are made (environment.json)",
		Long: `Writes FOLDER/environment.json: this machine (cores, memory, CPU model),
today's date, this repository's commit and the make target that measures,
for bench report. make bench runs it before its benchmarks.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := reference.RepoRoot()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			env := benchtable.Here(root)
			env.Target = target
			return benchtable.WriteEnv(args[0], env)
		},
	}
	cmd.Flags().StringVar(&target, "target", "bench", "the make target that measures")
	return cmd
}
