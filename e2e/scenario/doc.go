// Package scenario reads the upgrade scenarios users write
// (scenarios/*.yaml, the fault variants in scenarios/faults/): which lab,
// what cluster, from which release to which, by what strategy, what must
// hold afterwards, and which faults to inject. Files are decoded strictly
// (internal/specfile): an unknown or misspelt field is an error, and every
// error names the file, the field and the problem.
//
// [Parse] fills the defaults (both forms, outcome upgraded, a 10 min
// timeout) and refuses what CAPI would refuse or what no run could judge:
// an even control-plane count, a KCP maxSurge other than 0 or 1 (0 only
// from three replicas: one replica is the single-node controller's), a
// MachineDeployment that could never roll, NIC firmware or same-machines
// outside in-place, a reverted outcome in the ClusterClass form (CAPI's
// Cluster webhook refuses to lower spec.topology.version), a fault with no
// action or two. [Read] reads a file; e2e/plan's Load then checks it
// against the lab it names: both releases' images are in the lab's
// catalog and carry their Kubernetes versions, the NIC firmware is in
// its NVM catalog, and the lab has the hosts the upgrade needs
// ([Scenario.HostsNeeded]: every replica plus one surge machine; none
// extra in place). The package knows no lab, so the rules that read a
// scenario's expectations (e2e/check) never build the simulator.
//
// The main types:
//   - [Strategy]: in-place, scale-in, rolling, or reset (scale-in over a
//     registration pool: a freed host wipes itself and registers again,
//     Elemental's flow).
//   - [Form]: plain (KubeadmControlPlane and MachineDeployment) or
//     clusterclass (a Cluster with a topology).
//   - [Cluster], its optional MachineHealthChecks, and [Application]: the
//     workload a lab run deploys (a Deployment under a
//     PodDisruptionBudget, a DaemonSet, a bare pod with emptyDir data),
//     on the workers or on the control plane of a cluster without them.
//   - [Release]: a Kubernetes version, the OS image that carries it, and
//     optionally NIC firmware.
//   - [Expect]: the [Outcome] (upgraded, rolled-back, reverted, stalled),
//     same machines, same hosts, persistent data kept or wiped, spares
//     left, the workload API outage allowed ([Scenario.APIOutageBound]:
//     a VIP failover from three control-plane replicas
//     ([DefaultHAOutage]), [DefaultSingleNodeOutage] for one), and the rules the faults must break (brokenRules) or may
//     break (mayBreak).
//   - [Fault]: a moment (after a runner step, at the first lab event of a
//     reason, then a delay) and exactly one action: restart a process of
//     the management plane, slow or take offline BMCs, cut power (for a
//     while, for good, or on several control-plane hosts at once), crash a
//     host agent, or hang a host's OS.
//
// Every duration in a scenario file is lab time, the world's, as the
// lab's own timings are: a MachineHealthCheck's 5m is five minutes of the
// hosts' POST, boot and shutdown at any time scale. [Scenario.AtScale]
// converts them once, by the run's scale, where they meet the wall
// clock; only timeout, the harness's budget, is wall time.
//
// The package knows the rules' names only by their shape: e2e/check,
// which this package does not import, fails a run whose brokenRules names
// no rule.
package scenario
