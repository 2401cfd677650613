// Package bmc emulates the Redfish service of each lab host's baseboard
// management controller, so that real Redfish clients (gofish; sushy,
// which Ironic's drivers use) drive the lab unmodified. Real BMC
// firmware cannot run here; this fake behaves like it wherever
// provisioning stacks depend on it. It acts only through the host's
// hardware model (sim/lab.Host): every effect is the model's and shows in
// the lab's events, whoever caused it.
//
// [Start] serves one host over HTTPS only (plain HTTP gets a TLS alert),
// on a loopback port kept for the BMC's life. [StartFleet] starts one BMC
// per host of a lab with a certificate from one CA (internal/pki), writes the
// CA to STATE/bmc-ca.crt and records each host's System URL, IPMI address
// and credentials in lab.json. The lab file's bmc.protocols chooses
// Redfish, IPMI (package sim/ipmi) or both. The two are one controller:
// when it reboots itself through either (Manager.Reset, its own firmware
// update, IPMI's mc reset), Config.OnReboot takes the other down for the
// same time.
//
// # Resources
//
// One file per part of the resource tree:
//
//   - routes.go: the tree. Unknown paths are 404, wrong methods 405, both
//     in Redfish's error body (errors.go). Bodies are decoded strictly:
//     malformed JSON and unknown properties are 400 naming the property.
//     OData annotations are dropped first, as the specification has
//     services ignore them (sushy types its @Redfish.SettingsApplyTime).
//   - server.go, session.go: Basic auth or an X-Auth-Token session; the
//     service root and the login are open, as Redfish requires. Sessions
//     last until deleted.
//   - system.go: ComputerSystem with every reset type and the boot
//     override PATCH. BootSourceOverrideMode reaches the host's firmware
//     model, so a Legacy boot finds no loader in the lab's EFI-only images.
//     A graceful reset of a hung OS is accepted and does nothing, as a
//     real BMC only signals the OS.
//   - manager.go: the Manager (FirmwareVersion; Reset makes the BMC
//     unreachable for 30 s modelled) and the virtual CD, reachable from
//     the Manager and the System alike. A second InsertMedia is 409; a
//     writable insert is refused.
//   - chassis.go: NetworkAdapters (NVM firmware; recovery firmware shows
//     as Critical health) and EthernetInterfaces (MAC, speed, link from
//     the running OS, and the port's DHCP address while it has link).
//   - inspection.go: what Ironic's inspection reads, built from the lab
//     file's facts: Processors, Memory (16 GiB modules), Storage and
//     SimpleStorage, a PCIeDevice per NIC port, and Power and Thermal
//     readings that follow the power state (Power also a failed supply).
//   - boot.go: BootOptions and Boot.BootOrder (a PATCH rewrites the
//     host's order at once, as UEFI's BootOrder variable) and HttpBootUri.
//   - firmware.go: Bios, Bios/Settings (OnReset only; an attribute the
//     registry lacks, or a non-string value, is a 400 naming it), the
//     attribute registry, and SecureBoot (SecureBootEnable is the next
//     boot's, SecureBootCurrentBoot this one's).
//   - events.go: the EventService over Server-Sent Events: power changes
//     read from the host model's events (a virsh destroy shows too) and
//     every task's start and end. A stream ends when the server shuts down.
//   - update.go: FirmwareInventory (BIOS, BMC, NIC.PORT), SimpleUpdate and
//     the MultipartHttpPushUri, answering 202 with a task monitor.
//
// # Firmware updates
//
// Targets may be left out, as real BMCs allow: the image names its
// component (an NVM image from the lab's catalog goes to every NIC port,
// bios-* to the BIOS, bmc-* to the BMC). An NVM image is the last segment
// of ImageURI; a pushed package is named by its descriptor
// (api/image/v1.NVMImage), which must equal the catalog's. Immediate
// tasks start at once. OnReset tasks stay Pending until the next reset of
// the system; the NVM is then flashed and the server resets once more so
// the NIC loads it, so the inventory changes only after a reset. A BMC
// update makes the endpoint unreachable for the modelled time (180 s by
// default).
//
// [BMC.SetFaults] injects latency and a 503 rate; [BMC.Unreachable] closes
// the port and listens again on the same address.
//
// The tests judge the service with real clients: gofish, plain requests
// from DMTF's examples, and Debian's sushy (testdata/sushy_*.py) called
// as Ironic's redfish interfaces call it. A test crawls every link from
// the service root and checks each resource's schema version, required
// properties and collection counts. gofish is pinned at v0.20.0: v0.21.0
// posts ComputerSystem.Reset to the RemoveResourceBlock action's target.
package bmc
