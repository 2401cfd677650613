// Package labtest holds what tests above the lab do again and again. It
// is an ordinary package imported only by tests (the BMCs', the agent's,
// the site's, the in-place provider's, the runner's, the fleet's and the
// e2e integration tests).
//
// [Up] and [UpOS] bring up a shipped lab (fixtures/labs/NAME.yaml, found
// from a test package two levels below the repository root) in a
// temporary state folder, optionally with every host's OS kind set, and
// take it down when the test ends. [Expect] reads lab events until one
// with the given reason arrives, failing at once on the agent's
// BootstrapFailed or KubeadmFailed and otherwise after a timeout that
// lists what it saw. [Provision] provisions a host by hand the way a
// bare-metal provisioner does (deploy media as a one-time CD boot, the
// image staged into a slot, user data on the config drive, activation
// with 3 tries, a reset to boot from disk), for tests of the layers below
// any provider; the reference provider (providers/baremetal) does the same
// over Redfish. [Workload] starts workload clusters and creates one, and
// [ClusterCAs] makes a cluster's CA and etcd CA as CAPI makes them for a
// control plane. [Dir] is the folder a test runs a plane, a lab or a
// whole scenario in: removed with the test, or kept under KEEP_DIR so a
// failure's logs, events, disks and timeline can be read afterwards.
package labtest
