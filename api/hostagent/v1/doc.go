// Package v1 is the host agent's wire API, version 1: what crosses
// between a host's OS (its update agent, a deploy ramdisk, a recovery OS)
// and whatever provisions and updates it. The agent serves it over mutual
// TLS at the Path* endpoints; a deploy ramdisk and a recovery OS also
// call their provisioner with a [Heartbeat] or a [Registration].
//
// The simulator implements it (sim/agent for every host, sim/vm/guest
// inside a real VM); providers consume it (the reference provider's
// hostagent client and callback endpoint, the in-place extension). It
// imports only the standard library and api/image/v1, so a provider built
// from its own module can require it without taking the simulator along;
// internal/layering enforces that.
//
// Everything here is what a real agent can know from inside its host.
// Nothing names the simulator's rules, and no field asks a reader to
// compare the host's clock with its own: a reboot shows as a new
// RunningOS.BootID (the kernel's boot_id), how long the OS has run as
// UptimeSeconds, and a NIC on recovery firmware as PortLink.Recovery
// rather than a driver message to match.
//
// The update contract is the same for both kinds of disk ([DiskKind]): a
// [StageRequest] writes an image, verified against its checksum before a
// byte is written, into the root the disk stages into and answers its
// [RootID]; an [ActivateRequest] makes a root boot next with a number of
// tries; the health check ([Health]) commits the booted root; rollback
// returns to the committed fallback. [Images] reports booted, staged and
// fallback roots. Callers take RootIDs from the agent and never make one
// up.
//
// Other parts: [AgentURLAnnotation] (where a Node's agent answers),
// [DeployCallbackParam] (Ironic's ipa-api-url), [ConfigDrive],
// [FilesRequest] with [FileSum], [Kubeadm], [Inventory] for in-band
// inspection, and [Error], the body of every non-2xx answer.
package v1
