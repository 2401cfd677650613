// Package qemu runs the lab's real virtual machines: a private libvirt
// daemon per lab (daemon.go), QEMU domains that boot a sim/vm/diskimage disk
// under UEFI (domain.go), and the reaper that ends what a dead harness
// left running (reap.go).
//
// [StartDaemon] runs Debian's libvirtd without systemd, inside unshare
// --mount, where libvirt's fixed folders (/run/libvirt, /var/lib/libvirt,
// /var/log/libvirt, /var/cache/libvirt), /etc/libvirt/qemu.conf and the
// folder of persistent domain definitions (/etc/libvirt/qemu) are bind
// mounts of the lab's own. Two labs, or two test binaries, thus share no
// socket, domain or pid file, and nothing lands in the machine's folders;
// without the last mount, two labs' daemons load each other's domains.
// QEMU runs as root with no security driver, cgroups or virtlogd
// (stdio_handler "file"): there is no systemd and no libvirt-qemu user to
// manage them. Clients reach the daemon at
// qemu:///system?socket=DIR/run/libvirt-sock ([Daemon].URI); a unix socket
// path must fit 108 bytes, so a lab's libvirt folder must be short.
// [CheckInstalled] names a missing piece with its Debian package.
//
// [DomainXML] is a q35 machine under OVMF with its own copy of the UEFI
// variable store ([PrepareVM]), a virtio disk, a SATA CD drive for virtual
// media (only OVMF reads it; the guest's kernel needs no SATA driver), the
// serial console appended to [VMSpec.ConsoleLog], and QEMU's user network
// with the guest's agent port forwarded to a host loopback port. The
// forward is a <qemu:commandline> netdev, since libvirt 9.0's user
// interfaces forward ports only through passt. Guests run under TCG with
// a 32 MiB translation cache: what a boot fills of QEMU's 1 GiB default
// counts in QEMU's RSS, and a small guest boots as fast with a small one.
// [AccelFromEnv] reads UPGRADELAB_VM_ACCEL=kvm; KVM is never probed for,
// since on the project's CI machines /dev/kvm opens and answers, yet
// guests hang or QEMU aborts under it.
//
// [Hypervisor] is a connection for callers that drive VMs themselves
// (sim/vm); the lab defines its VMs through its own libvirt backend with
// [PrepareVM] and [DomainXML]. [Hypervisor.Destroy] is a power cut: QEMU
// is killed with whatever the guest had not yet handed to the disk.
//
// libvirtd gets a parent-death signal, but the QEMU processes it starts
// outlive it by libvirt's design. So each daemon is recorded in a registry
// folder (UPGRADELAB_CACHE/run/libvirt-*.json) with its harness's pid and
// start time, and every [StartDaemon] first runs [ReapOrphans]: for each
// harness that is gone, it kills the QEMU processes named by the pid files
// in its lab folder and its libvirtd, checking each executable's name so
// a reused pid is spared. [Daemon.Stop] ends its own QEMUs and daemon.
package qemu
