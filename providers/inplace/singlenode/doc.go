// Package singlenode updates a one-machine KubeadmControlPlane in place.
//
// Upstream KCP (v1.14) refuses maxSurge 0 below three replicas and always
// creates a surge Machine for one replica, so a single-node control plane
// cannot be updated in place without a spare host. This package closes
// that gap with as little of KCP's work taken over as possible, for KCPs
// opted in with [Annotation] ("true") and one replica ([OptedIn]):
//
//   - a mutating webhook ([PauseOnChange], served by the extension's
//     server at [WebhookPath]) pauses such a KCP in the same write that
//     changes its spec, marking the pause as its own
//     ([PausedByAnnotation]), so KCP never sees the new spec unpaused and
//     never surges; at any other time KCP runs unpaused (status,
//     remediation, certificate rollouts, add-ons);
//   - [Reconciler], while that pause holds, does what KCP's rollout does
//     before it touches a Machine, with KCP's own package
//     (sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg): the kubeadm RBAC
//     of the new version and the kubeadm-config ClusterConfiguration,
//     which the host's kubeadm upgrade node reads; then asks the
//     extension's CanUpdateMachine in process, with the request KCP would
//     build (server-side-apply dry runs, KCP's
//     PrepareKubeadmConfigsForDiff), and judges the answer as KCP does
//     (inplace.MatchesAfterPatches); then starts the update with CAPI's
//     in-place protocol (the update-in-progress annotations, the desired
//     objects and the pending UpdateMachine hook KCP writes), under KCP's
//     own field manager ([askcp.FieldManager]), re-entrant and waiting for
//     its cache after each mark as KCP's trigger is, after KCP's
//     preflight checks;
//   - CAPI's Machine controller calls UpdateMachine; once the Machine
//     matches the spec the controller lifts the pause and KCP finds its
//     Machine up to date.
//
// A change that cannot be made in place is handed back to KCP unpaused
// (with a Warning event and the KCP generation declined, which is then
// never paused again), which then behaves as upstream. The webhook
// fails closed for the writes it pauses (its configuration's match
// conditions select only those), so a spec change made while the
// extension is down is refused rather than let through to a surge; one
// it missed anyway (not installed, or the opt-in came later) is paused
// late, best effort: KCP may have surged already. A paused Cluster or a
// KCP paused by someone else is left alone. decide is the whole decision
// table. Only a pause this package set is ever lifted.
//
// The controller reconciles ten KCPs at once ([DefaultConcurrency], KCP's
// own default) and is woken by its Machine's changes, as KCP is; a KCP
// whose Machine is updating is looked at again every 20 s only against a
// lost event. docs/SINGLE-NODE.md maps all this onto CAPI's in-place
// proposal.
package singlenode
