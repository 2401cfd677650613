// Package lab runs a simulated bare-metal lab: the servers of a lab file
// (fixtures/labs/*.yaml), each a libvirt domain with a system disk
// (sim/disk), i40e ports (sim/nic) and system firmware, booting the OS
// images of a catalog (sim/image) on a modelled clock (internal/timescale). The
// BMCs (sim/bmc, sim/ipmi) and the host agent (sim/agent) act on a host
// only through [Host]'s methods: what a BMC and an OS can do to hardware.
//
// [Load] reads a lab file ([Spec], strictly) and the catalogs and NIC
// rules it names, and checks every reference across them; errors name the
// file, the host and the field. Each port is leased an IPv4 address on its
// network (nics[].ip, or the next free one from the network's 10th). A
// BMC that serves IPMI is held to IPMI v2.0's credential limits at load.
// [Definition.WithHostOS] runs one lab with A/B hosts, OSTree hosts or
// both in turn ("mixed"); [Definition.WithBackend], [Definition.Scaled]
// and [Compose] make the other variants a run needs.
//
// # Power and boot
//
// [Up] defines each host as a domain of a [Backend]: by default libvirt's
// in-process test driver on a node file private to the lab
// ([TestDriverURI]). Power changes only through the hypervisor's lifecycle
// events: [Host.PowerOn] starts the domain and waits for the event, so a
// virsh destroy, a BMC's reset and the lab's own call look the same and a
// late event never undoes a newer change. Each host's state is mirrored
// into its domain's metadata, where virsh dumpxml shows it.
//
// A power cycle (boot.go) is POST, which applies pending firmware
// settings, then each boot device in the firmware's order, an override
// first (Once is used up by the boot, as on Redfish BMCs): Hdd asks the
// disk's bootloader; Cd boots the virtual medium's URL; Pxe (netboot.go)
// takes each port's DHCP offer, whose boot server whoever provisions sets
// at run time ([Lab.SetNetworkBoot], as Ironic's dnsmasq offers Ironic's),
// and runs the script for the port's MAC (api/netboot/v1), which chains an
// image or exits to the next device, as does a 404; UefiHttp loads an
// override's URI; BiosSetup stops in the setup screen. The lab's images
// carry only an EFI loader, as Metal3's do, so a legacy-mode boot finds
// none ([ErrLegacyBoot]): a provider that forgets UEFI fails as on a
// UEFI-only server. What booted is read from the bytes booted (each
// payload starts with its manifest); the NIC rules then decide each port's
// link for the booted driver. Every step waits its modelled time.
//
// # Disk, firmware and faults
//
// [Host.WriteImage] stages as an OS does: fetch, refuse before a byte is
// written if the sha256 is not the one asked for, then write into the
// root the disk stages into for size / disk speed. A power loss meanwhile
// leaves an A/B slot corrupt or drops an OSTree deployment being pulled,
// as a cut [Host.FlashNVM] leaves the NIC in recovery mode. Activate,
// Commit, Rollback and WriteEtc pass the disk's update contract through.
// [Host.Shutdown] (systemctl reboot, a BMC's graceful request) finalises an
// activated OSTree deployment last, as ostree-finalize-staged does; a
// reset or power-off does not. [Host.EraseDisk] works only from a deploy
// ramdisk and [Host.WipeData] only from the recovery OS, so a disk an
// installed OS runs from is never erased under it. Firmware settings
// (firmware.go: a BIOS attribute registry, secure boot, the boot order)
// are pending until the next POST, as on real servers, except the boot
// order, which changes at once as UEFI's BootOrder variable does. Of the
// attributes only BootMode and PxeBoot change the boot.
//
// [Host.Hang] freezes a running OS: power stays on, the agent and the
// simulated kubelet stop on its OSHung event, and a graceful request is
// never acted on ([ErrHung]) until a power cycle. [Host.FailPowerSupply]
// turns the host off and refuses every later power-on, across restarts. A
// mere power-off would not do as a fault: a provider that keeps hosts
// online, as baremetal-operator does, powers an off host back on.
//
// # Real VMs
//
// On the qemu backend each host is a real VM (qemu.go). [Up] starts a
// private libvirtd (sim/vm/qemu) in a short temporary folder, as its socket
// path must fit 108 bytes, and defines the VMs through the same
// [LibvirtBackend] with sim/vm/qemu's domain XML. Each host's disk is built
// blank, with the recovery image on its recovery partition, in
// STATE/hosts/NAME/vm/system.img and kept, so a lab brought up again boots
// what its disks hold. Power is still the domain's events (off at
// STOPPED, not at SHUTDOWN, which comes while QEMU still runs), so BMCs
// and virsh act on VMs as on the test driver. A Host reaches what differs
// only through its machine (machine.go), which its backend supplies: the
// lab's model on the test driver, the VM on qemu. What differs:
//   - PowerOn first plans the boot: a Once override is used up, and an
//     inserted virtual medium becomes an ISO of its image in the VM's CD
//     drive, first when the plan reaches the CD before the disk.
//   - A power cycle follows the guest instead of modelling the boot. A new
//     boot ID is a new boot (libvirt does not report a guest's own
//     reboot); a guest silent for 3 s is booting again. The A/B state in
//     Status is read from the disk image's GRUB environment block.
//   - Disk operations go to the guest (sim/vm/guest). WriteImage verifies
//     the catalog image as on the test backend, has the guest write its VM
//     payload (served at 10.0.2.2, the host's loopback on QEMU's user
//     network) and reports the catalog's checksum. A guest's 507 and 409
//     become sim/disk's ErrNoSpace and ErrNotWritten, so the agent API
//     answers as on the test backend.
//   - A graceful shutdown asks the guest to power off, standing in for the
//     ACPI button its init does not handle.
//
// Network and HTTP boot, the setup screen and hangs are refused there
// ([ErrNotOnQEMU]) and disks are A/B only. NIC firmware, /etc, the config
// drive and the persistent partition stay the lab's model on both
// backends.
//
// # State
//
// STATE/lab.json ([Info], with BMC endpoints once [Lab.RecordBMCs] adds
// them) and STATE/hosts/NAME/host.json ([HostStatus]) are replaced
// atomically through internal/statefile; each root's bytes are a file beside
// host.json (slot-A.img, deployment-N.img); events are appended to
// STATE/events.jsonl and fanned out to subscribers, each on its own
// unbounded queue so a slow one never blocks the lab. [Up] on the same
// folder continues with power off; [ReadState] reads a folder without
// running it. The image server listens on a port of internal/loopback's
// range, which a management cluster on kind can reach.
package lab
