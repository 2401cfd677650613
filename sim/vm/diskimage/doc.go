// Package diskimage is the real system disk of a qemu-backend host: a raw GPT
// image whose bootloader, GRUB under UEFI, makes the A/B choice itself, as
// RAUC- and Flatcar-style systems do, and the code the host and the guest
// (sim/vm/guest) share to read and change it.
//
// The layout ([DefaultLayout]) is sim/disk's, by GPT partition label: esp
// (16 MiB of FAT: GRUB's EFI loader, grub.cfg and grubenv), slot-a and
// slot-b (a payload each), persistent, oem and recovery. The guest finds
// partitions by label ([ReadGPT], [Find]); GRUB names them by number, so
// grub.cfg is generated from the same [Layout].
//
// The A/B state lives in GRUB's environment block (grubenv.go, slots.go):
// per slot X, X_STATE, X_PRIO, X_TRIES, X_GOOD, X_IMAGE and X_SHA256, and
// RECOVERY_ONCE, which are sim/disk's Slot and RecoveryOnce. [DiskState]
// reads them into sim/disk's model and [SetDiskState] writes them back, so
// the guest applies the update contract with the model's own rules while
// GRUB, not Go, decides each boot. The block is a fixed 1024-byte file
// that GRUB's save_env rewrites in place through its block list, so it
// never moves: [FindEnv] finds it on the ESP by content (the first
// sector-aligned 1024 bytes that parse), and from then on the guest (on
// /dev/vda) and the lab (on the image file, [ReadEnv]) use its offset,
// with no FAT driver. [ParseEnv] is as strict as GRUB.
//
// The boot script ([GrubConfig]) is sim/disk's A/B choice in GRUB's
// script language: a slot is bootable when written and either good or
// with tries left; the bootable slot with the higher priority boots, A on
// a tie; an uncommitted one spends a try, saved with save_env before the
// kernel loads, so a boot that never comes back to commit has still used
// it. GRUB's script has no arithmetic, so the count is lowered through an
// if-chain and an activation may give at most [MaxTries] (9).
// RECOVERY_ONCE, cleared as it is used, or no bootable slot boots the
// recovery partition. The kernel command line ([ParamSource], [ParamSlot],
// [ParamTrial]) is all the guest learns from the bootloader.
//
// [Build] (build.go) needs no root, loop devices or mounts: sfdisk writes
// the table into a sparse file, grub-mkimage makes the loader, mkfs.fat
// and mtools fill the ESP (the environment block copied first, so it is
// one unfragmented run, as save_env requires), and the pieces are placed
// by offset. [MakePayload] makes a slot payload with mkfs.ext4 -d: an ext4
// image holding a kernel, an initramfs and the image's manifest
// ([PayloadKernel], [PayloadInitrd], [PayloadManifest]); its sha256 is
// what a stage is verified against. [BuildISO] (media.go) makes a BMC's
// virtual CD: an El Torito EFI image holding GRUB, whose script, kernel
// and initramfs it reads from the ISO's tree through its iso9660 driver,
// with the medium's URL on the kernel command line ([ParamMedia]).
// [CheckTools] names a missing tool with its Debian package.
//
// The package has no cgo, so the guest's static init links it; only
// build.go and media.go run host tools, and the guest never calls them.
package diskimage
