// Package vm is the host side of the qemu backend's machines: it builds
// what they boot and drives one VM as a lab host is driven.
//
// [Builder] builds the guest (cmd/upgradelab-guest, with CGO_ENABLED=0,
// unless given a binary), fetches Debian's cloud kernel (sim/vm/boot) and
// makes, once per image name, an OS image's slot payload
// ([Builder.Payload]: the kernel, an initramfs holding the guest and the
// image's manifest, and the manifest); factory disks on sim/vm/diskimage's
// layout and boot script ([Builder.Disk]); and a virtual-media ISO per
// image and URL ([Builder.ISO]). BootScript is a field so a test can break
// the bootloader on purpose. The lab's qemu backend (sim/lab) keeps one
// Builder per lab.
//
// [KernelArgs] is every payload kernel's command line: the serial console;
// panic=1, so a failing init restarts the VM and spends the slot's try as
// on hardware; and softlockup_panic=1, so a CPU stuck in the kernel for
// 20 s panics and restarts the machine, as a hardware watchdog restarts a
// hung one. Under TCG on a loaded 2-core host a guest can hang between its
// reboot(2) and the restart past a test's 90 s boot deadline; the panic
// bounds that at about 20 s and prints the stack on the console, and the
// A/B outcome is unchanged, since the activation synced the slot choice
// before the reboot was asked for.
//
// [Guest] is a guest's agent API through QEMU's forwarded loopback port;
// [Guest.Call] turns a refusal into an [AgentError] with the HTTP status,
// which the lab maps back to sim/disk's errors. [Machine] is one VM on a
// sim/vm/qemu Hypervisor: [Machine.PowerOn], [Machine.PowerCut] (QEMU
// killed), [Machine.Remove] and its Guest. QEMU's user network accepts a
// forwarded connection before the guest listens, so a connection says
// nothing: [Machine.WaitBoot] waits for an answer from a boot ID other
// than the last, and a boot that never comes names the console's last
// lines. The lab uses Builder and Guest; Machine serves this package's
// tests and benchmarks.
//
// TestRealDiskAgreesWithTheModel plays each sim/abcases case on sim/disk's
// model and on a VM of its own (two at a time) and requires the same
// trace. Its power cut is real: the test's image server sends at 4 MiB/s,
// the test waits until the guest reports the slot writing, and kills QEMU.
// TestRealDiskCatchesABootloaderThatDoesNotCountTries removes save_env from
// the boot script and must fail at the trial boot, which shows the
// agreement test can fail.
package vm
