package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/timeline"
)

func newCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check RUN",
		Short: "Judge a run's recorded timeline again",
		Long: `Reads a run's folder (one of the folders make e2e, make e2e-faults and
upgradelab run leave per run): its timeline.jsonl and params.json (what the
rules were told of the run: strategy, replicas, versions, expectations), and
runs every rule of this build over it. Prints each rule's verdict and every
violation with its moment and objects; exits non-zero when a rule fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			results, err := judge(args[0])
			if err != nil {
				return err
			}
			writeVerdicts(cmd.OutOrStdout(), results)
			if len(check.Failed(results)) > 0 {
				return errRulesBroken
			}
			return nil
		},
	}
}

// judge runs the rules over a run folder's timeline with its params.
func judge(dir string) ([]check.Result, error) {
	data, err := os.ReadFile(filepath.Join(dir, result.ParamsFile))
	if err != nil {
		return nil, fmt.Errorf("%s: not a run's folder (a run writes %s when it is judged): %w", dir, result.ParamsFile, err)
	}
	var p check.Params
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, result.ParamsFile), err)
	}
	entries, err := timeline.Read(filepath.Join(dir, result.TimelineFile))
	if err != nil {
		return nil, err
	}
	return check.Run(entries, p), nil
}

func writeVerdicts(w io.Writer, results []check.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tVERDICT\tWHY")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Rule, r.Status, r.Why)
	}
	tw.Flush()
	for _, v := range check.Failed(results) {
		fmt.Fprintln(w, v)
	}
	fmt.Fprintf(w, "\nrules: %s\n", check.Summary(results))
}
