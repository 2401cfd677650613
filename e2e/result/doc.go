// Package result is what one scenario run leaves for readers. A [Result]
// holds its verdict on every rule (check.Result), its times (the whole
// run, and the upgrade from the "upgrade" step to "done"), where and how
// it ran (provider, scenario, form, host OS, backend, management target,
// CAPI's reconcile rate limit, a fleet's cluster), why it stopped early if
// it did, the management kube-apiserver crashes it rode through (not a
// rule: the verdict stands), and its [Profile]: each phase's wall time
// and each process's CPU.
//
// The runner makes Results; the report, `upgradelab report` and
// `upgradelab report diff` read them back from results.json ([Write], [Read])
// without the runner, so a reader of stored results needs none of the
// machinery that made them. The package also names the files of a run's
// folder ([TimelineFile], [ParamsFile]) and the timeline step of a
// kube-apiserver crash ([StepAPIServerCrashed]).
//
// For people and tools:
//   - [WriteTable] prints the terminal table: one line per run with its
//     verdict ([Result.Verdict]: PASS, FAIL or STOPPED), wall and upgrade
//     time and rule counts, then every broken rule.
//   - [WriteJUnit] writes one JUnit test case per run, named by
//     [Result.Key], with a failure per broken rule and an error for a run
//     that stopped early, for CIs that read JUnit.
//   - [Diff] compares two suites' results run by run (by Key: provider,
//     scenario, form, host OS, backend, cluster; repeated runs by their
//     worst and slowest). Regressions are rules that started failing or
//     are no longer exercised, runs that stopped or are gone, and upgrades
//     slower than DiffOptions allow; fixed rules and new runs are listed
//     too.
package result
