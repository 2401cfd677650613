package report

import (
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/result"
)

// comparedRules are the rules a side-by-side table shows in words: what
// users of the cluster saw (the API, evictions, drains) and what became
// of the hosts. Every other rule's verdict is in the conformance table;
// a comparison names the rules whose verdicts differ.
var comparedRules = []string{"api-availability", "pdb-respected", "drained-before-disruption", "same-hosts", "spares-left"}

// comparison is one scenario, form and host OS run by several providers.
type comparison struct {
	Title   string
	Rules   []string
	Rows    []comparedRun
	Differs string
}

// comparedRun is one provider's run in a comparison.
type comparedRun struct {
	Provider, Anchor, Verdict, Provision, Upgrade string
	Cells                                         []cellData
}

// sideBySide puts the runs of one scenario, form and host OS by
// different providers next to each other (the first run of each
// provider), so a reader sees where a provider differs from another:
// timing, the workload's API and evictions, and the hosts.
func sideBySide(results []result.Result) []comparison {
	var out []comparison
	groups := map[string][]result.Result{}
	var order []string
	for _, res := range sortedForTable(results) {
		key := runTitle(res)
		if !containsProvider(groups[key], res.Provider) {
			if groups[key] == nil {
				order = append(order, key)
			}
			groups[key] = append(groups[key], res)
		}
	}
	for _, key := range order {
		runs := groups[key]
		if len(runs) < 2 {
			continue
		}
		c := comparison{Title: key, Rules: comparedRules, Differs: strings.Join(differingRules(runs), ", ")}
		for _, res := range runs {
			c.Rows = append(c.Rows, comparedRow(res))
		}
		out = append(out, c)
	}
	return out
}

func containsProvider(runs []result.Result, provider string) bool {
	for _, r := range runs {
		if r.Provider == provider {
			return true
		}
	}
	return false
}

// comparedRow is a run's row: its verdict, provisioning and upgrade
// times, and each compared rule's verdict with its note.
func comparedRow(res result.Result) comparedRun {
	row := comparedRun{Provider: res.Provider, Anchor: RunAnchor(res), Verdict: res.Verdict(), Provision: "–", Upgrade: "–"}
	for _, ph := range res.Profile.Phases {
		if ph.Name == result.PhaseProvision {
			row.Provision = ph.Took.Round(time.Second).String()
		}
	}
	if res.Upgrade > 0 {
		row.Upgrade = res.Upgrade.Round(time.Second).String()
	}
	byRule := map[string]check.Result{}
	for _, c := range res.Checks {
		byRule[c.Rule] = c
	}
	for _, name := range comparedRules {
		c, ok := byRule[name]
		if !ok {
			c = check.Result{Rule: name, Status: check.NotRun}
		}
		cell := cellFor(c)
		cell.Text = string(c.Status)
		if len(c.Violations) > 0 {
			cell.Text += ": " + c.Violations[0].Message
		} else if c.Note != "" {
			cell.Text += ": " + c.Note
		}
		row.Cells = append(row.Cells, cell)
	}
	return row
}

// differingRules are the rules whose verdict is not the same in every
// run.
func differingRules(runs []result.Result) []string {
	var out []string
	first := map[string]check.Status{}
	for _, c := range runs[0].Checks {
		first[c.Rule] = c.Status
	}
	for _, rule := range check.Rules {
		for _, res := range runs[1:] {
			status := check.Status("")
			for _, c := range res.Checks {
				if c.Rule == rule.Name {
					status = c.Status
				}
			}
			if status != first[rule.Name] {
				out = append(out, rule.Name)
				break
			}
		}
	}
	return out
}
