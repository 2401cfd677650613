// Package host is the BareMetalHost controller: what baremetal-operator
// (BMO) and Ironic do on real fleets, on Metal3's BareMetalHost API
// (github.com/metal3-io/baremetal-operator/apis). It reaches hardware only
// through the host's BMC (Redfish or IPMI, by the scheme of
// spec.bmc.address) and the host's own agent (deploy ramdisk, recovery OS),
// never through the lab.
//
// # States
//
// The state machine is BMO's, one phase function per state, dispatched by
// [Reconciler.Reconcile]: registering (register: the BMC accepts the
// credentials of spec.bmc.credentialsName) -> inspecting (inspect) ->
// available -> provisioning (provision) -> provisioned -> deprovisioning
// (deprovision) -> available. Hosts that registered themselves
// (callback.MachineIDAnnotation) have no BMC: they go straight to
// available, their power is only reported (whether their agent answers),
// and on release they are reset through their agent instead of cleaned,
// asked again after ResetTimeout ([ResetRequestedAnnotation]); their
// object goes when they register again under a new identity.
//
// Each host is read from the manager's cache, and from the API server
// (Reconciler.Reader) only while the cache has not caught up with this
// reconciler's last write of it, compared by resourceVersion as CAPI's
// stale-cache guard compares them. A phase acts on the hardware before it
// writes the state it reached, and a reconcile that read a state older
// than its own last write would act twice (boot a just-cleaned host into
// the deploy ramdisk again). Every step
// of a phase repeats safely, so a provider killed midway starts over
// without harm.
//
// # Provisioning and cleaning
//
// The deploy ramdisk is booted as Ironic boots it (deployRamdisk): power
// off first, because firmware still in POST could use up a one-time boot
// override set while it runs, and the restart after it would boot the
// installed OS; then the boot device (Redfish: virtual media and boot Once
// Cd; IPMI: a script for the boot MAC on the provider's netboot server,
// then chassis bootdev pxe options=efiboot); then power on. Until the
// ramdisk's heartbeat arrives (package callback, whose heartbeat wakes the
// host) the host is looked at only every ten polls and without a BMC
// connection; after DeployTimeout it is booted again. install then stages
// the image through the agent (skipped when a staged root already holds
// the checksum), writes the config drive and activates the root with three
// tries; where the image goes (slot A of a blank A/B disk, a first OSTree
// deployment) is the host's business. Last, the media is ejected, the
// next boot set to Once Hdd and the host restarted (a registered host,
// which installs from its recovery OS, reboots through its agent).
//
// Deprovisioning cleans the disk through the deploy ramdisk (unless
// spec.automatedCleaningMode is disabled) and powers off. A host deleted
// while provisioned or provisioning is deprovisioned first, as BMO does
// (cleanBeforeDelete).
//
// # Inspection
//
// A Redfish host is inspected out of band: CPUs, memory, NICs, and every
// firmware version (BIOS, BMC, each NIC's NVM) into the host's
// HostFirmwareComponents, one component per item as BMO names them. An
// IPMI BMC knows nothing of the hardware, so an ipmi:// host is inspected
// in band, as Ironic does it: the deploy ramdisk boots, the agent's
// inventory gives CPUs, memory, disk and NICs with their DHCP leases and
// NVM versions (the HostFirmwareComponents then hold the NICs only), and
// the host is powered off.
//
// # Power in the steady states
//
// Available and provisioned hosts get BMO's manageHostPower (power.go):
// status.poweredOn follows the BMC first; the wanted power is spec.online,
// off while a reboot.metal3.io annotation is on (on an available host only
// one with "force": true). A host found off under the plain annotation
// has it deleted (the reboot happened); a suffixed one
// (reboot.metal3.io/KEY) keeps the host off until its client deletes it.
// Powering off is soft (GracefulShutdown) unless an annotation asks for
// {"mode": "hard"} or the last attempt failed; a soft power-off not done
// within SoftPowerOffTimeout (Ironic's soft_power_off_timeout) is a
// PowerManagementError, and the next attempt is hard.
//
// The same pass refreshes what the BMC knows of a running host: the NICs'
// addresses into status.hardware and the firmware versions into
// HostFirmwareComponents (an in-place NIC flash changes them). BMO takes
// the addresses from in-band inspection; out-of-band inspection finds
// none while no OS runs, so they are read from the BMC once the installed
// OS runs. A steady host is looked at every PowerCheck, [DefaultPowerCheck]
// unless told: 10 s, so an out-of-band power loss or a flashed NIC shows
// within seconds in a time-scaled lab. BMO's minute suits fleets of
// hundreds of hosts, where each pass costs an API read and a BMC
// connection.
//
// BMO's annotations hold too: baremetalhost.metal3.io/paused stops all
// reconciling; baremetalhost.metal3.io/detached on a steady host sets
// operationalStatus detached and leaves the host alone until the
// annotation goes. Deleted while detached, a host is let go untouched, or
// with {"deleteAction": "delay"} kept until attached again.
//
// # The image
//
// As in BMO, a provisioned host whose spec.image is removed or names
// another URL than status.provisioning.image is deprovisioned
// (imageChanged): there is no in-place update of a host's image through
// its BareMetalHost, so a provider that updates hosts in place records
// the new image elsewhere (the reference provider: its machine's
// status.image).
//
// # Errors and concurrency
//
// Errors set errorType and errorMessage, publish a Warning event named as
// BMO names them (PowerManagementError, ProvisioningError, ...) and back
// off, doubling from the poll interval up to a minute. As in BMO, a change
// of the status alone triggers no reconcile: the controller's own writes
// would defeat the backoff. Hosts are reconciled several at once (BMO's
// default: the CPUs, at least 2, at most 8), each host one at a time.
// [Finalizer] is the provider's own name, so a real BMO beside this
// controller never takes it for its own.
package host
