// Package v1 is what a lab host's network boot firmware (PXE, then iPXE)
// reads from the provisioning network's boot server: a boot [Script] per
// MAC address, as Ironic's iPXE configuration is. The firmware asks the
// boot server its network's DHCP offers (sim/lab's SetNetworkBoot, as
// Ironic's dnsmasq), with the booting port's MAC as [MACParam].
//
// The provider under test serves it (providers/baremetal/netboot). A
// script chains an image over HTTP(S), which boots as a network OS, or
// exits, and the firmware tries its next boot device, as it does when
// the server has no script for the MAC (404). Scripts are iPXE's
// language; the lab's firmware runs them with sim/ipxe, which also runs
// the richer scripts Ironic writes. It imports only the standard
// library.
package v1
