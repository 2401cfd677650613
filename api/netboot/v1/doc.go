// Package v1 is what a lab host's network boot firmware (PXE, then iPXE)
// reads from the provisioning network's boot server: a boot [Script] per
// MAC address, as Ironic's iPXE configuration is. The firmware asks the
// boot server its network's DHCP offers (sim/lab's SetNetworkBoot, as
// Ironic's dnsmasq), with the booting port's MAC as [MACParam].
//
// The provider under test serves it (providers/baremetal/netboot); the
// lab's firmware fetches and runs it (sim/lab). A script chains an image
// over HTTP(S), which boots as a network OS, or exits, and the firmware
// tries its next boot device, as it does when the server has no script
// for the MAC (404). Only that subset of iPXE's language is defined:
// [Parse] refuses any other command with its line number, as iPXE stops
// on an unknown command; FuzzParseBootScript fuzzes it. It imports only
// the standard library.
package v1
