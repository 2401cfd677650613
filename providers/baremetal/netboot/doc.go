// Package netboot is the provider's boot server on the provisioning
// network, as Ironic's iPXE configuration and HTTP server are for hosts
// without virtual media (ipmi://). [Server] answers GET /boot?mac=MAC with
// that MAC's boot script (api/netboot/v1); a MAC with no script gets 404,
// and its firmware goes on to the next boot device.
//
// The host controller sets a script chaining to the deploy ramdisk
// ([Server.Chain]) before it PXE-boots a host, and withdraws it
// ([Server.Forget]) when it sets the host's next boot back to disk: after
// the install, after cleaning, after in-band inspection. It serves plain
// HTTP, as Ironic's boot server does: iPXE fetches the script before it
// could check a certificate. cmd/upgradelab-baremetal runs it on
// --netboot-addr (none without the flag: ipmi:// hosts then cannot be
// deployed), and the site's DHCP names it in its offers
// (lab.SetNetworkBoot in the simulator).
package netboot
