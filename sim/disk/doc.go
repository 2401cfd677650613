// Package disk models a server's system disk under an image-based OS, in
// one of the two ways a host keeps its OS images ([Kind], chosen per host
// by the lab file's os.kind):
//
//   - A/B (ab.go), as RAUC and Flatcar do: two root slots, each with a
//     priority, boot tries left and a good flag. Staging writes the slot
//     that is not running (with none running, the one that would boot
//     last, so a committed image stays the fallback; A on a blank disk).
//     Activation gives it the higher priority and N tries; the bootloader
//     boots the best bootable slot and spends a try on an uncommitted one.
//     Each slot has its own /etc (its image's, plus edits while it runs):
//     a slot switch does not carry edits over.
//   - OSTree (ostree.go), as Fedora CoreOS, RHEL for Edge and bootc do:
//     deployments in one root, listed in the bootloader's order. Staging
//     pulls the image into a staged deployment with a new serial, which
//     the bootloader does not know yet. Activation marks it for
//     finalisation with N tries (greenboot's boot counter). The running
//     OS's graceful shutdown finalises it into the bootloader as the
//     default ([Disk.BeginFinalise], [Disk.FinishFinalise]), as
//     ostree-finalize-staged does: /etc is merged three ways (a file the
//     admin added, changed or deleted keeps the admin's version) and the
//     list is pruned to Keep (default 2). The staged deployment lives in
//     /run, so a hard reset, a power cut or any power-off without that
//     finalisation loses it and the old deployment boots. An installer (a
//     deploy ramdisk or recovery OS: nothing runs from the tree) writes
//     the entry at activation, as ostree admin deploy does outside a
//     booted deployment. An entry passed over for want of tries is
//     greenboot's fallback: the deployment that boots becomes the default
//     again, as rpm-ostree rollback makes it.
//
// Both share the rest of the disk: a recovery partition that boots when no
// root can, or once when asked (RecoveryOnce); the persistent (/var) and
// OEM partitions, which image switches keep; and the config drive a
// provisioner writes. [Disk.Erase] wipes all of it but recovery.
//
// # The update contract
//
// Callers speak one contract whichever the kind (contract.go):
// [Disk.BeginStage] and [Disk.FinishStage] (or [Disk.AbortStage]) answer
// the [RootID] staged into, a slot name or a deployment serial;
// [Disk.Activate] gives it tries; [Disk.Commit] marks the running root
// good after its health check; [Disk.Rollback] makes the committed
// fallback the default; [Disk.Images] reports the booted, staged and
// fallback roots and every root ([Images.Wire] is the agent API's form).
// The lab host, the agent API and the providers speak only these terms;
// the two kinds differ behind the unexported model interface. The qemu
// backend's real disks run the A/B half for real: sim/vm/diskimage keeps the
// same slot variables in GRUB's environment block and sim/vm/guest applies
// these methods to them, and sim/abcases holds model and VM to one table.
//
// [Disk.SelectBoot] is the bootloader's choice for one boot
// ([BootDecision]: the root, whether the boot is a trial, why roots were
// passed over). [Disk.PowerLoss] is the power going off and answers what
// it cost ([Loss]: WriteInterrupted for a cut write or finalisation,
// StagedDropped for a staged deployment never finalised).
//
// Space is bounded by RootMiB: each A/B slot's size, or what an OSTree
// root holds for the deployments in the bootloader plus the staged one.
// An image with no room is refused before anything changes ([ErrNoSpace]).
// The model gives each deployment its image's whole size, sharing no
// objects between them, so it errs on the full side; nothing is pruned to
// make room, as ostree prunes after a deployment, not before.
//
// [Disk] is a plain value with no clock and no I/O, so both kinds go
// through one table test with each kind's own expectations (disk_test.go)
// and a fuzz test of the contract. The lab keeps it in each host's
// host.json and checks it with [Disk.Validate] when a lab comes up again.
package disk
