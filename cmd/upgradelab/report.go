package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/result"
)

// errRegressions makes `report diff` exit non-zero after it printed them.
var errRegressions = fmt.Errorf("regressions")

func newReportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report ARTIFACTS",
		Short: "Print the verdict table of a suite's results",
		Long: `Reads ARTIFACTS/results.json (or a results.json named directly), as make e2e,
make e2e-faults and upgradelab run write it, and prints one line per run
(verdict, wall and upgrade time, rules passed, not exercised, n/a), then every
broken rule with its moment and objects. Exits non-zero when a run failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			results, err := readResults(args[0])
			if err != nil {
				return err
			}
			result.WriteTable(cmd.OutOrStdout(), results)
			for _, r := range results {
				if r.Failed() {
					return errRulesBroken
				}
			}
			return nil
		},
	}
	cmd.AddCommand(newReportDiffCommand())
	return cmd
}

func newReportDiffCommand() *cobra.Command {
	var o result.DiffOptions
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Name what changed between two suites' results (for a nightly job)",
		Long: `Compares two artifacts folders (or results.json files) run by run (provider,
scenario, form, host OS): rules that started failing, rules no longer
exercised, runs that stopped or are gone, and upgrade times slower than
--slower (and by at least --min-slower) are regressions (marked !); fixed
rules and new runs are listed too. With --verdicts the two must agree rule by
rule (the same scenarios at two time scales): any verdict that differs, either
way, is a regression and times are not compared. Exits non-zero when there is
a regression.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, err := readResults(args[0])
			if err != nil {
				return err
			}
			new, err := readResults(args[1])
			if err != nil {
				return err
			}
			changes := result.Diff(old, new, o)
			result.WriteDiff(cmd.OutOrStdout(), changes)
			if result.Regressions(changes) > 0 {
				return errRegressions
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&o.Slower, "slower", 0.25, "an upgrade this much slower (a fraction: 0.25 is 25%) is a regression")
	cmd.Flags().DurationVar(&o.MinSlower, "min-slower", 5*time.Second, "and by at least this much")
	cmd.Flags().BoolVar(&o.Verdicts, "verdicts", false, "compare verdicts only: any rule judged otherwise, either way, is a regression")
	return cmd
}

// readResults reads a results file, or the one in an artifacts folder.
func readResults(path string) ([]result.Result, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, result.File)
	}
	return result.Read(path)
}
