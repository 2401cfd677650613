// Package vmboot makes what a qemu-backend host boots: Debian's cloud
// kernel, taken from its package without installing it, and an initramfs
// whose init is the upgradelab guest (cmd/upgradelab-guest) with the few
// kernel modules a virtio machine needs. Together with an image's manifest
// they are one slot payload (sim/vmdisk.MakePayload).
package vmboot
