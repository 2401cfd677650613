// Package runner makes scenario runs. One run is one scenario
// (e2e/scenario) in one form against one provider config (e2e/provider),
// on its own management plane (e2e/mgmt), or one a process keeps between
// its runs ([Planes]), and, for a lab provider, its own site (sim/site), recorded into a timeline by e2e/monitor and judged by
// every rule of e2e/check. [Run] returns a result.Result and leaves
// result.json, timeline.jsonl, params.json, profile.txt and the plane's
// and site's logs in the run's folder. The e2e suite, `upgradelab run` and
// the fleet (e2e/fleet, whose runs share one plane and site through
// [Shared] and start their upgrades as a [Wave] lets them) all run
// scenarios here.
//
// # Steps
//
// Before its clock starts, a run builds what it starts that is not built
// yet ([EnvOptions.Build]): a cold build takes minutes and belongs to no
// verdict.
//
//  1. Start ([StartEnv]): the site, the plane with CAPI's managers and the
//     provider config's managers (upgradelab's own wired to the lab
//     through e2e/reference, any other through provider.Config.Process),
//     and a namespace labelled for the extensions that serve the strategy.
//  2. Enroll the lab's hosts with the provider: through their BMCs, or for
//     reset by booting them into a registration pool (lab providers only).
//  3. Provision the cluster at the from-release from the config's
//     templates, plain or ClusterClass (a one-replica in-place control
//     plane gets the provider's single-node annotation; health checks as
//     the scenario asks), and wait until it is rolled out.
//  4. Write data: a ConfigMap in the workload cluster; on the lab also the
//     application (apps.go), a marker on every bound host's persistent
//     partition and an admin's /etc edit on every OSTree host (data.go).
//  5. Record the "upgrade" step and upgrade as a user would (a topology
//     version bump, or new machine templates with KCP and the
//     MachineDeployment patched onto them), then wait for the outcome:
//     every Machine up to date with its Node Ready on the new kubelet; for
//     rolled-back, CAPI reporting the failed in-place update with every
//     Node back at the old version; for reverted, that failure, a "revert"
//     step, the spec pointed back at the from-release (CoreDNS's tag stays:
//     KCP refuses a down-migration) and its rollout; for stalled, the
//     faults firing and then expect.stallFor of watching (at least a
//     minute of wall time: CAPI's own waits are wall time).
//  6. Record "done", settle, read the data back, and judge.
//
// Settling waits, within [DefaultSettle] (Options.Settle; a fleet gives
// more), until CAPI's Cluster conditions, KCP's and the MachineDeployments'
// counts, KCP's kube-proxy and CoreDNS moves and every Machine's UpToDate
// (with its Node on the Machine's kubelet, as KCP judges it) agree, every
// MachineDeployment has finished rolling out (a ClusterClass's topology
// reconciled and its MachineDeployments at its version), and nothing has
// been recorded for 1.5 s (3.5 s under CAPI's rate limit): a count read
// equal to its replicas can be one a controller wrote before the last
// change and is about to rewrite. The end rules judge what is there then.
//
// Waits look every 100 ms at the recorder's watch-fed cache, which costs
// the API server nothing, and print a progress line when what they see
// changes. The scenario's timeout bounds the run's own work; its clock
// stops while a shared run waits for its turn in a wave.
//
// A provider whose managers bind fixed ports holds them machine-wide for
// the run (loopback.Hold), waiting while another run holds them. At the
// end, what the API server refused each manager (mgmt.Plane.Forbidden)
// goes on the timeline for rbac-sufficient; a crash of the embedded
// kube-apiserver goes there as a step and into the result. [Params] is
// what the rules are told of the run (which rules apply to this provider
// and lab), written as params.json so `upgradelab check` can judge the
// timeline again.
//
// # Faults
//
// Each fault (faults.go) waits on the timeline for its step, then for the
// first lab event of its reason, then for its delay; it records a
// "fault:NAME" step and acts: it kills and restarts a manager or the
// management kube-apiserver, makes every BMC slow and flaky, takes the
// event host's BMC offline, cuts its power (or several control-plane
// hosts', or for good), hangs its OS, or crashes its agent. A fault that
// never fired fails the run: a variant whose fault did not happen proves
// nothing.
//
// # Profile
//
// Every phase is timed, and before the plane stops the CPU time of each of
// its host processes is read from /proc, plus the harness process's own
// (profile.go, result.Profile), so a slow run says which phase and which
// process made it slow. The run prints the profile and keeps it as
// profile.txt; the report shows it; make bench reports it as s-PHASE/op
// and s-cpu-PROCESS/op. The harness figure covers the lab, BMCs, agents,
// workload API servers, recorder and checks, and runs sharing one process
// share it.
//
// # Sandbox
//
// [StartSandbox] (`upgradelab up`) brings up steps 1 and 2 and the
// recorders, and nothing more. It renders the cluster at the from-release
// (cluster.yaml) and the upgrade (upgrade.yaml) from the config's
// templates, with the runner's own edits (the single-node annotation, a
// plain cluster's health checks), and waits for the user's kubectl. When
// the control plane or a MachineDeployment first asks for another version
// it records the upgrade step and follows the rollout with a run's
// progress lines until it is rolled out and settled. [Sandbox.Stop]
// records the done step and writes params.json, with the data and
// application rules n/a since no data is written, so `upgradelab check
// DIR` judges what the user did. sandbox.json holds the kubeconfig,
// namespace and files for scripts.
package runner
