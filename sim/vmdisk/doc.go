// Package vmdisk is the real system disk of a qemu-backend host: a GPT disk
// image whose bootloader (GRUB, under UEFI) makes the A/B choice itself, as
// RAUC- and Flatcar-style systems do, and the code both sides of that disk
// share.
//
// The layout (layout.go) is sim/disk's: an EFI system partition holding
// GRUB, its configuration and its environment block; two OS slots, A and
// B; persistent, OEM and recovery partitions. The A/B state lives in
// GRUB's environment block (grubenv.go, slots.go): per slot its state,
// priority, remaining tries and good flag, the same variables sim/disk's
// model keeps. GRUB's script (grubcfg.go) boots the bootable slot with the
// highest priority, lowers an uncommitted slot's tries before it boots it
// and saves them, and boots the recovery partition when no slot can boot.
// The guest (sim/guest) stages, activates and commits by rewriting the same
// block on its own disk.
//
// Building a disk (build.go) needs no root, loop devices or mounts: the ESP
// is filled with mtools, slots are `mkfs.ext4 -d` images, the partition
// table is sfdisk's, and the pieces are placed by offset. Everything but
// build.go is pure Go without cgo, so the guest's static init links it.
package vmdisk
