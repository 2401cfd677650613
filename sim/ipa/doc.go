// Package ipa is the host's side of Ironic's agent protocol: what a lab
// host runs when it boots the deploy ramdisk Ironic builds (the Ironic
// Python Agent, IPA, on real machines), acting on the host's own
// hardware and disk.
//
// The kernel command line Ironic put on the boot ISO names Ironic's API
// (ipa-api-url) and the node's token (ipa-agent-token), and, when the
// boot is an inspection, ironic-inspector's callback
// (ipa-inspection-callback-url): the agent first posts the host's
// inventory there in IPA's format (CPUs, memory, the disk, every NIC
// with its MAC, carrier and lease, and with the extra-hardware collector
// each NIC's driver and firmware, all read from the host in band;
// inspect.go). The agent looks
// its node up by MAC, serves Ironic's command API on loopback while the
// boot lasts and heartbeats its URL, at once, after every asynchronous
// command and every few seconds (0.45 of the heartbeat timeout Ironic's
// lookup gives, as IPA waits 0.3 to 0.6 of it). Ironic then drives
// cleaning and deployment through commands; a table (commands.go) says,
// as data, which exist, whether Ironic waits
// for each, and what each does to the host:
//
//   - clean.get_clean_steps / deploy.get_deploy_steps list the steps of a
//     generic hardware manager (erase_devices_metadata, erase_devices,
//     write_image) with IPA's priorities;
//   - clean.execute_clean_step erases the disk's metadata through the
//     disk contract (the disk really is blank after it);
//   - deploy.execute_deploy_step write_image downloads the image from
//     Ironic's image URL and writes it through the disk contract, after
//     checking its sha256 (a mismatch fails the step with the host's
//     error, as Ironic reports it), and writes the config drive Ironic
//     built (a gzipped, base64 ISO 9660 image, read with sim/iso9660);
//   - standby.get_partition_uuids, image.install_bootloader (makes the
//     written root the one to boot, with the lab's boot counting),
//     standby.power_off and standby.sync.
//
// Where it is kinder than IPA: no hardware managers beyond the generic
// one, no RAID or firmware steps, no log collection (Ironic's
// deploy_logs_collect is set to never), and the agent speaks plain HTTP
// on loopback.
package ipa
