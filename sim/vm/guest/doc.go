// Package guest is the OS inside a qemu-backend VM: what the init of its
// initramfs (cmd/upgradelab-guest) does as pid 1, and the part of the host
// agent's API it serves on the VM's real disk.
//
// At boot it does what a minimal image-based OS does:
// [MountKernelFilesystems] (devtmpfs, proc, sysfs and a tmpfs on /run; the
// cloud kernel does not mount devtmpfs itself), [LoadModules] with
// finit_module, and [ConfigureNetwork], which brings eth0 up as
// 10.0.2.15/24 by ioctl: QEMU's user network gives every guest that
// address and shows the host's loopback as 10.0.2.2, so no DHCP client is
// needed. [KernelParams] reads
// what GRUB chose from /proc/cmdline (sim/vm/diskimage's upgradelab.*
// parameters). [OpenDisk] finds the partitions and GRUB's environment
// block on /dev/vda, and [Disk.RecoverInterruptedWrites] marks a slot
// still "writing" from the last boot corrupt: a power cut ended that
// write.
//
// [Server] serves on [Port] the update part of api/hostagent/v1: status
// (the running OS from the command line and the initramfs's manifest, the
// kernel's boot ID, the disk's images), stage, activate, health (which
// commits the booted slot), rollback, reboot, reset (recovery once, then
// reboot) and clean. Two paths are not on the agent's wire API:
// [PathPowerOff], the lab's stand-in for the ACPI power button, which this
// init does not handle, and [PathRecoveryOnce], recovery once without the
// reboot that the lab's half of the host's OS makes itself. Refusals keep
// the contract's meaning: 409 for a root not written, not booted or
// without a fallback, 507 for no space, as sim/agent answers.
//
// Each operation is sim/disk's update contract applied to the environment
// block: read it, apply the method to the model sim/vm/diskimage makes of it,
// write it back and fsync before answering, since the bootloader reads it
// at the next boot however that boot comes. Go keeps the books; GRUB
// decides. [Disk.Stage] checks the download's size against the slot
// partition before it changes anything, marks the slot writing durably
// before the first byte, streams the download into the partition, and
// marks it written only if the bytes written hash to the sha256 asked
// for. It does not hold the disk lock while it writes, so status reads go
// on and a test can cut the power while a slot shows writing.
// [Disk.Erase] runs only when the OS did not boot from a slot: it zeroes
// the first MiB of each slot, persistent and OEM partition, as Ironic's
// metadata cleaning does, and empties the slots in the block.
//
// The API is plain HTTP: only the lab reaches it, through QEMU's port
// forward on the host's loopback. The agent API that providers call, with
// mutual TLS, stays sim/agent's, outside the VM. The package has no cgo,
// so the guest links statically.
package guest
