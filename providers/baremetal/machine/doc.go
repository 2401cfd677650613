// Package machine is the BareMetalMachine controller: the CAPI
// infrastructure machine (contract v1beta2) that claims one BareMetalHost,
// hands it the image and the Machine's bootstrap data, reports its
// provisioning, and releases it on deletion, as CAPM3's Metal3Machine
// does. The host controller (package host) does the hardware work; this
// package only writes BareMetalHost specs.
//
// # Claims
//
// Once CAPI has written the Machine's bootstrap data, [Reconciler] claims
// an available, unclaimed host matching spec.hostSelector (and, for a
// Machine in a failure domain, labelled with it: CAPM3's
// infrastructure.cluster.x-k8s.io/failure-domain). Candidates are ranked:
// a host reserved for this machine's owner (node reuse) first, then
// ordinary free hosts, spares last, so a spare is what a rollout's surge
// machine gets once every other host carries a machine; while an
// ordinary free host is still entering service (an inventory that
// inspects hosts one by one, as baremetal-operator does), a machine waits
// for it rather than take a spare. The claim sets
// the host's consumerRef, image, userData and metaData secrets and online
// in one Update at the resourceVersion read, so two claimants of one host
// can never both win: the loser gets a conflict and looks again at the
// next poll.
//
// Claims are decided on the API server, never the cache (Reconciler.Reader),
// so a claim just made, by this process or one before a restart, is
// always seen; a restarted provider finds its claims by consumerRef. To
// keep that cheap, the host the machine's status names is read by name
// (cache first, then the API server) and the namespace's hosts are listed
// only when that misses: a fleet's namespace holds every host. A machine
// that found no free host is woken by a host becoming available
// (hostWakes) and otherwise looks again every ten polls. Ten
// BareMetalMachines are reconciled at once by default
// ([DefaultConcurrency]; CAPI's own managers default to 100, but each
// reconcile here may read the inventory from the API server).
//
// # The node's identity
//
// The config drive's meta data names the node after the machine and
// carries the provider ID upgradelab://HOST/MACHINE, as CAPM3 passes them,
// so a host that carries one machine after another (node reuse, spares)
// never gives two Nodes one name or ID. status.addresses are the hostname
// (also as InternalDNS) and an InternalIP per NIC address in the host's
// status.hardware, as CAPM3 reports them.
//
// # Release, pause and in-place updates
//
// Deletion releases the host (reserved for the same owner with the
// template's nodeReuse, otherwise labelled spare) and keeps the finalizer
// until the host is deprovisioned, so the Machine's deletion completes
// only once nothing of it runs on the host. The controller keeps CAPI's
// Paused condition (util/paused) and is woken when its Cluster is paused
// or unpaused. The machine's status.image names the image its host runs:
// the one provisioned, then, once the in-place extension reports a
// machine's update done for its current spec (InPlaceUpdated True at its
// generation), the spec's (recordImage). The host's spec.image is never
// changed after provisioning: baremetal-operator would deprovision the
// host for it. The status is patched with an optimistic lock, since the
// extension writes a condition of the same list.
package machine
