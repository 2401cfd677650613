// Package vm is the host side of the qemu backend's machines: it builds
// what they boot (Builder: the static guest, Debian's cloud kernel, one
// slot payload per OS image, factory disks) and drives one VM as a lab
// host is driven (Machine: power on, power cut, reset, and the guest's
// agent API through QEMU's forwarded port).
//
// The VMs themselves are sim/qemu's; what runs in them is sim/guest.
package vm
