// Package report renders a suite's results for people: [Write] puts
// report.html into an artifacts folder, beside the results.json that
// e2e/result writes and reads.
//
// The page opens with one line (runs passed, failed and stopped, rules
// broken, the suite's wall time) and the list of what failed: each stopped
// run's reason and each broken rule's first violation. Then the
// conformance table, each run against each rule of check.Rules, grouped
// as check.Groups (rollout, end, workload, host), one mark per cell with
// the verdict and the first violation or the rule's note as its title, so
// the shipped suite's table fits a laptop screen. Runs of one scenario and
// form sit together, one row per host OS and provider, so a provider's
// results read beside the reference's. Below it, per run:
// where and how it ran (management target, CAPI's rate limit), the
// management kube-apiserver's crashes, its profile, its broken rules and
// notes, and a picture of its timeline (machines and hosts over time,
// coloured by phase) read back from the run's timeline.jsonl. A [Layout]
// ([Placement] per run, named by [RunAnchor]) adds a picture of which
// process ran which run when, so a parallel suite shows how it spent its
// processes.
//
// The report reads e2e/result, e2e/check and e2e/timeline and never the
// runner, so the e2e suite, `upgradelab run` and `upgradelab fleet` all
// write the same page.
package report
