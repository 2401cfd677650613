// Package integration holds the tests that need several layers at once:
// the management plane with CAPI's real managers, the lab, workload
// clusters, host agents, and upgradelab's own provider and extension as
// processes. They run in make test-integration (nightly; they take about
// ten minutes), two at a time (-parallel 2), each on a
// plane and lab of its own; the package has no code outside its tests.
//
// Most tests start their environment with runner.StartEnv, as the
// scenarios do (startEnv in provider_env_test.go, on a lab of
// fixtures/labs), and end by reading what the API server refused each
// manager for want of RBAC (Plane.Forbidden): any refusal fails the test,
// whatever it drove. On failure they log the tail of the provider's and
// the extension's logs, KCP's reason for not updating in place, and the
// hosts' failed agent steps from the lab's events.
//
// What they cover:
//   - CABPK's bootstrap data on a hand-made Cluster and Machine of
//     stand-in infrastructure kinds (testinfra_test.go, no provider): the
//     host boots with it, kubeadm init makes a Node, CAPI's kubeconfig
//     secret reaches it, and a reboot into a newer slot moves the Node's
//     version. CAPI's cluster cache dials the endpoint before any API
//     server listens and then waits its fixed 30 s retry: most of that
//     test's time.
//   - The BareMetalHost lifecycle over Redfish (credentials, inspection, a
//     bad checksum, provisioning, cleaning, the webhooks), power as
//     baremetal-operator manages it, and ipmi:// hosts on an IPMI-only lab
//     (a wrong password refused at RAKP, in-band inspection, PXE
//     provisioning, ipmitool's soft power-off).
//   - Clusters: a 3 + 2 cluster on the cold-spare lab provisioning and
//     rolling a version bump through the spare; control-plane Machines
//     spread over failure domains; a scale-in rollout with node reuse
//     across a provider kill, ending on the same hosts; a registration
//     pool resetting released hosts, a stalled reset asked again.
//   - The in-place extension: 3 control-plane and 2 worker Machines
//     updated in place keeping every Machine, across an extension kill,
//     plain and ClusterClass; NIC firmware alone, flashed first, and a
//     refused NVM API major; a failing health check falling back; plain KCP
//     with one replica stalling without a spare host (CAPI's behaviour,
//     kept as a finding); the single-node controller updating one Machine
//     in place, plain and ClusterClass.
//   - The RBAC check itself: the provider with its role minus the secrets
//     rules is refused, and the refusal is named
//     (TestAProviderMissingAnRBACRuleIsRefusedAndNamed).
package integration
