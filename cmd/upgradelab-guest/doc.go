// Command upgradelab-guest is the init of a qemu-backend VM's initramfs:
// built static with CGO_ENABLED=0 by sim/vm and packed as /init by
// sim/vm/boot. As pid 1 it mounts the kernel's filesystems and loads the
// virtio modules; then it reads GRUB's choice from the kernel command
// line and the image's manifest from the initramfs, waits up to 20 s each
// for /dev/vda and eth0, configures QEMU's user network, opens the disk,
// marks a slot whose write the last power loss cut corrupt, and serves the
// agent API on :8080 (sim/vm/guest). It reports the machine's DMI serial as
// its host name when there is one.
//
// If any step fails it exits; the kernel panics and, with panic=1 on the
// command line (sim/vm's KernelArgs), restarts the VM, as a broken image
// does on real hardware: that boot has spent its try, so GRUB falls back
// as it does for any image that never comes up.
//
// Run with another pid, as a test does, it skips the mounts and the
// module loading.
package main
