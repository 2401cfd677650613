// Package check judges a scenario run's timeline against what CAPI
// promises and what the scenario expects, as etcd's robustness tests
// validate a recorded history. [Run] replays the timeline into a [State];
// each [Rule]'s During judges every moment, its End the last. A broken
// rule is a [Violation] naming the moment, the objects and the rule.
// [Rules] lists them all; docs/CONFORMANCE.md is the user's view.
//
// A moment is one poll. The changes the recorder stamps with one time are
// applied together before any rule looks, since their real order is
// unknown (objects gone first, as monitor.Recorder records them): judged
// one by one, a Machine seen deleting and its replacement seen available
// in the same poll would replay as a moment that never existed. What a
// rule follows across moments (the workload API's outages, each budget's
// drop below its desired count and its cause, the drains CAPI gave up on
// after nodeDrainTimeout) is kept in the State and brought up to date
// after each poll (afterPoll). A rule may add a Note of what it saw,
// whatever its verdict.
//
// [Params] say what applies to a run (the runner's runner.Params, stored
// as params.json): a rule that does not apply is n/a. A rule that applies
// and held, but whose subject never happened in the run (no Machine
// deleted, no host deprovisioned: State.Exercise), is "not exercised", not
// a pass, since it could not have failed. A fault variant's
// expect.brokenRules turn into expected failures, and into a failure when
// the fault broke nothing or the name is no rule; expect.mayBreak rules
// are excused when broken.
//
// Rules take CAPI's semantics from CAPI: MachineDeployment rules resolve
// maxSurge and maxUnavailable with CAPI's mdutil.ResolveFenceposts, and
// control-plane rules count each KCP's own Machines. capi-agrees compares
// the end rules' verdict with CAPI's own Cluster conditions ([CAPISays]):
// both must say the outcome happened, or both not. The runner's settle
// waits on CAPISays too, so the end is judged once CAPI agrees or time is
// up.
//
// A run that stopped early never reached some rules: [Stopped] (applied
// when Params.Stopped says why) marks them "not run" with the reason: the
// rules of the end state always, and before the upgrade step every rule
// that held. A rule's [Span] says what its End judges: the end state, or
// the upgrade's or the whole run's history, whose failures a stopped run
// keeps. So a stop is never read as the failure of rules it did not
// reach, and a violation seen before it is never hidden. Each rule has a
// [Group], the report's column group.
//
// [Failed] and [Summary] condense results for a run's log, the JUnit file
// and the report. Each rule is tested on a timeline broken on purpose
// (check_test.go, model_test.go).
package check
