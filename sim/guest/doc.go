// Package guest is the OS inside a qemu-backend VM: the init of the
// initramfs a slot payload carries (cmd/upgradelab-guest). It does as pid 1
// what a minimal image-based OS does at boot (mount the kernel's
// filesystems, load the virtio modules, bring up its network), learns from
// the kernel command line where GRUB booted it from, and serves the host
// agent's update API (api/hostagent/v1) on its real disk:
//
//   - stage: download an image from the image server and write it into the
//     inactive slot's partition, marking the slot "writing" in GRUB's
//     environment block first, so a power cut mid-write leaves a slot GRUB
//     will not boot;
//   - activate, health (commit) and rollback: rewrite the block;
//   - reboot: sync and restart the VM, which GRUB boots again.
//
// The slot bookkeeping is sim/disk's model (Disk.BeginStage, Activate,
// Commit, ...) applied to the block's variables (sim/vmdisk.Slots): the Go
// model decides nothing about which slot boots; GRUB does.
//
// It is pure Go without cgo, linked statically.
package guest
