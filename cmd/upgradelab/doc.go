// Command upgradelab runs the upgradelab harness without Go's test
// tooling: the management plane, the simulated lab, scenario runs, fleets,
// and the verdicts of all of them.
//
//	upgradelab run [SCENARIO...]   plan and run scenarios as make e2e does
//	upgradelab up SCENARIO         a scenario's world, for an upgrade by hand
//	upgradelab check RUN           judge a run folder's timeline again
//	upgradelab report ARTIFACTS    the verdict table of a results.json
//	upgradelab report diff OLD NEW what changed between two suites
//	upgradelab mgmt up | down      the management plane alone; delete a kind one
//	upgradelab lab up | status     the lab alone; its hosts from a state folder
//	upgradelab fleet [curve]       many clusters on one plane and lab, one wave
//	upgradelab bench report DIR... docs/BENCHMARKS.md from measurement folders
//	upgradelab bench env DIR       record where DIR's measurements are made
//
// run plans with e2e/plan as the Ginkgo suite does (the same runs, names,
// folders and labels; --labels takes a GINKGO_LABELS expression) and
// makes them through e2e/runner in this process, --parallel at once, each
// on its own embedded plane and lab. It leaves the suite's artifacts (a
// folder per run, results.json, junit.xml, report.html) and exits non-zero
// when a run broke a rule or stopped. Managers a provider config builds
// from Go modules are built before the first run, so no run's clock pays
// for a build. bench keeps docs/BENCHMARKS.md (e2e/benchtable).
//
// up is the runner's sandbox (runner.StartSandbox): plane, lab, enrolled
// hosts and recorders, the cluster and its upgrade rendered as files to
// kubectl apply; Ctrl-C writes params.json so that check judges the
// hand-driven upgrade with every rule. check reads a run folder's
// timeline.jsonl and params.json (what the rules are told of the run) and
// runs every rule of this build, so a rule changed since the run can be
// tried on old timelines. report and report diff read results.json only
// (e2e/result); diff exits non-zero on a regression, for a nightly job.
//
// CAPI's per-object reconcile rate limit (--capi-rate-limiting) is on
// by default for run, mgmt up and fleet, as for make e2e: CAPI's
// managers run as CAPI ships them, with the stale-cache guard that comes
// with the gate. Turning it off makes runs faster and CAPI unlike what
// users run; each result records which.
//
// The reference provider and extension are taken from beside this
// executable (make build puts them there) or built into the artifacts
// folder. What the libraries log goes to the folder's stdlog.txt, not
// among the progress lines. A command that prints its verdict returns an
// error only for the exit status, never a second message.
package main
