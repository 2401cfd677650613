// Package qemu runs the lab's real virtual machines: a private libvirt
// daemon per lab (daemon.go) and QEMU domains that boot a sim/vmdisk disk
// under UEFI (domain.go), with TCG acceleration (KVM when asked for and it
// works), a serial console logged to a file, and QEMU's user network with
// the guest's agent port forwarded to a host loopback port.
//
// The daemon is Debian's libvirtd, started by the harness without systemd.
// It runs in a mount namespace of its own, where libvirt's fixed state
// folders (/run/libvirt, /var/lib/libvirt, /var/log/libvirt,
// /var/cache/libvirt), its qemu.conf and the folder of persistent domain
// definitions (/etc/libvirt/qemu) are the lab's, so two labs (or two test binaries) never share a socket,
// a domain or a pid file, and nothing is left in the machine's folders.
// Its socket is in the lab's folder and clients reach it through
// qemu:///system?socket=PATH.
//
// A harness that dies leaves libvirtd (it gets a parent-death signal) and
// its QEMU processes (libvirt detaches them by design); the next
// StartDaemon ends them (reap.go).
package qemu
