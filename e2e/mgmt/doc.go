// Package mgmt runs the management cluster every upgradelab run acts on:
// an API server with the CRDs and webhooks of the real Cluster API
// managers (core, KubeadmControlPlane, kubeadm bootstrap) and of the
// provider under test, and those managers beside it. The runner, the
// fleet, the integration tests and `upgradelab mgmt up` start it with
// [Start], which returns a [Plane] (kubeconfig, REST config, admin client,
// log folder) once every manager answers /readyz, which in CAPI's
// managers includes its webhook server (for a manager whose readiness
// does not, Provider.CertsUnderTMPDIR, Start also waits for its webhook
// port).
//
// [ParseTarget] reads the --management value into a [Target]:
//   - embedded (the default): envtest's kube-apiserver and etcd on
//     loopback, built from Go modules by scripts/build-kube-binaries.sh
//     (no prebuilt download is reachable), with kube-controller-manager
//     running only the ClusterRole aggregation controller that fills the
//     roles CAPI's core manager and KCP are bound to. Options.ControllerManager
//     adds the garbage collector and namespace controllers, without which
//     a foreground or namespace deletion never finishes.
//   - kubeconfig=PATH: a user's cluster; the managers run on this machine.
//   - kind[=NAME]: a one-node kind cluster created or reused through
//     kind's Go library, the managers in it as Pods. A kubeconfig whose
//     current context is an existing kind cluster here counts as one: its
//     API server cannot reach the host's loopback.
//
// # Manifests and managers
//
// Manifests come from the CAPI module in the Go module cache at the
// version this binary links, the version the managers are built from
// (scripts/build-capi-managers.sh), so the two always match. What CAPI's
// kustomizations would do is done in code: contract labels, conversion
// through the manager's /convert for every multi-version CRD, webhooks
// pointed at the manager, configuration names prefixed per manager (all
// three ship the same names). A CA made for the plane signs the webhook
// serving certificate and is every caBundle. Install writes retry with
// clusterctl's write back-off (about 159 s), so an API server restarting
// mid-install delays the plane instead of failing it; an invalid object
// fails at once.
//
// A [Provider] adds a manager: binary, a kubebuilder config folder (no
// crd/ for a manager without CRDs), extra CRD folders installed as they
// are, whether it takes CAPI's --feature-gates, the loopback ports it
// serves the lab on, whether it reads its webhook certificate from under
// TMPDIR (no flag names the folder), and for a runtime extension the
// ExtensionConfig's settings and namespace selector (Start waits for CAPI
// to discover it).
//
// Each manager gets its own webhook, health and diagnostics ports from
// internal/loopback (they all default to the same ones) and
// [FeatureGates]: ClusterTopology, RuntimeSDK and InPlaceUpdates on,
// ReconcilerRateLimiting as Options.RateLimitedReconciles says. Every
// command and make target asks for it by default, as CAPI ships it; a
// Go caller that leaves it false gets speed (CAPI reconciles each object
// at most once a wall-clock second, and with the lab's modelled time 100
// times faster that pause at every hop of a rollout is much of a
// scenario) and CAPI unlike what users run. The gate is more than
// pacing: on, CAPI's controller wrapper also holds each reconcile until
// the cache has the object's last write; off, a controller can decide on
// a cache missing its own write, and under a saturated API server KCP
// created a second init Machine for a one-replica control plane
// (docs/FLEET.md). Results record which a run had.
//
// # Each manager as itself
//
// No manager talks to the API server as the admin (rbac.go). Each runs as
// the ServiceAccount its config/default deploys it with, allowed exactly
// what its config/rbac grants, as where clusterctl installed it, so a
// permission missing from a provider's RBAC fails here as it fails there.
// The plane does what `kustomize build config/default` does for the RBAC
// (namespace, namePrefix, config/rbac's resources, config/default's patches
// of them). A manager without config/rbac is an error before any manager
// starts. On the host there is no token: each manager's kubeconfig
// (mgmt/kubeconfig-NAME) impersonates the ServiceAccount's user and groups,
// which RBAC authorizes exactly as the token. [Plane.Forbidden] reads the
// refusals from each manager's log and asks a SubjectAccessReview about
// each: one still denied counts (rule rbac-sufficient); one allowed is
// transient, a restarted kube-apiserver's RBAC caches syncing.
//
// # Faults, crashes and orphans
//
// [Plane.KillAndRestart] kills a manager with SIGKILL and starts it again
// with the same flags. [Plane.RestartAPIServer] does so for the embedded
// kube-apiserver (same command line, certificates, etcd and port) once
// every thread of the old process has ended and the port binds: a zombie
// thread-group leader is no proof, its other threads can still hold its
// sockets (internal/proc). The plane also supervises that kube-apiserver
// (crash.go): as the kubelet starts a crashed static Pod again, with its
// back-off (at once, then 10 s doubling to 5 min, forgotten after 10 quiet
// minutes), so a kube-apiserver bug (v1.36.3 panics in kube-openapi's
// cache while CRDs are created in parallel) delays a run instead of
// ending it with a verdict on kube-apiserver. A crash is never hidden: an
// [APIServerCrash] carries the runtime's panic or signal line from the
// process's log, and [Plane.OnAPIServerCrash] puts it on a run's timeline.
//
// Managers die with the harness (a parent-death signal). envtest starts
// kube-apiserver and etcd in their own process group without one, so every
// child is recorded in $UPGRADELAB_CACHE/run/PID.json (internal/proc) and the
// next Start ends what a dead harness left, sparing a reused pid whose
// executable differs. [Plane.Stop] stops the managers all at once (each
// takes about a second), then the API server; on an existing or kind
// cluster it deletes what it installed but CRDs and namespaces.
// [Plane.CPU] reads the host processes' CPU time for a run's profile.
//
// # Managers on kind
//
// On kind (incluster.go) the plane does what `clusterctl init` does, from
// the same config folders, without clusterctl, which insists on installing
// cert-manager, whose images cannot be pulled here. Each manager's static
// binary becomes a one-layer image (upgradelab.local/NAME:HASH) loaded as
// `kind load image-archive` does, and runs as a Deployment with its
// ServiceAccount's own token, the node's network and a /readyz probe. The
// plane's CA signs a certificate for every webhook Service and is their
// caBundle (cert-manager's and cainjector's part); files a manager's flags
// name go into a Secret mounted at the same path; Pod logs are followed
// into mgmt/NAME.log. KillAndRestart deletes the Pod without grace;
// RestartAPIServer kills kube-apiserver in the node and waits for the
// kubelet, the supervisor there, to start it again.
//
// The lab stays on the host's loopback (e2e/mgmt/kind). In the node, a
// connection to 127.0.0.1 on a lab port (10300-29999) goes to the host's
// side of the kind bridge, and the host passes it to its loopback; a
// provider's lab-facing ports (Provider.LabPorts) go the other way; the
// managers' own ports stay in the node. The NAT rules live in chains of
// their own, emptied at every start and removed at Stop.
package mgmt
