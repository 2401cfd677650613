// Package callback is the HTTPS endpoint hosts call: deploy ramdisks post
// heartbeats (Ironic's lookup and heartbeat API), and the recovery OSes of
// a registration pool register themselves (Elemental's registration
// endpoint), which creates their BareMetalHost.
//
// [Server] serves POST /v1/heartbeat and POST
// /v1/registration/{namespace}/{pool}. The bodies are api/hostagent/v1's
// Heartbeat and Registration, decoded strictly ([ParseHeartbeat],
// [ParseRegistration]). The caller binds the listener, so the URL hosts are
// told is known before the server starts; cmd/upgradelab-baremetal runs
// the server in its hosts part only.
//
// [Heartbeats] keeps the last heartbeat of each MAC in memory only: after a
// provider restart the ramdisks' next heartbeats fill it again, so nothing
// needs persisting. Each heartbeat is also handed to the listeners
// ([Heartbeats.Listen]), as Ironic's heartbeat wakes the deploy waiting on
// it: the host controller queues the host whose deploy boot awaited that
// MAC, so a booting host costs no BMC call until its ramdisk answers.
//
// A registration creates a BareMetalHost named after the pool and the first
// eight characters of the machine ID, labelled with [PoolLabel] and
// annotated with the identity ([MachineIDAnnotation]), the agent's URL and
// the hostname. It has no BMC. The same machine ID registering again only
// refreshes the agent URL. A host that registers under a new identity with
// the same boot MAC has finished a reset (recovery wiped and reinstalled
// it): its old object, if unclaimed, is deleted then, and that deletion is
// how the host controller learns the reset is done. An old object still
// bound to a machine is kept.
package callback
