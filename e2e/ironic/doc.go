// Package ironic runs OpenStack Ironic, as Debian 12 ships it, for a lab:
// the bare-metal provisioning service baremetal-operator drives, here
// driving the lab's BMCs and the deploy ramdisk the lab's hosts boot.
//
// [Start] runs one `ironic` process (API and conductor in one, no message
// bus: rpc_transport none, no Keystone: noauth, a sqlite database) on
// loopback ports of the harness's range, with the redfish and ipmi
// hardware types, automated cleaning, and its HTTP boot root (where it
// puts the virtual-media ISOs it builds) served by the harness. The
// process starts without the harness's REQUESTS_CA_BUNDLE and
// CURL_CA_BUNDLE, which make Python's requests ignore the CA sushy is
// given for each BMC (a node's redfish_verify_ca); with Options.TrustedCA
// REQUESTS_CA_BUNDLE is that CA instead, on purpose: the site's trust
// store, for nodes that name no CA (baremetal-operator names none).
// Beside it runs Debian's ironic-inspector (API and conductor in one,
// standalone, sqlite), which Ironic's inspector interface hands in-band
// inspection to, as baremetal-operator v0.11 has this Ironic inspect;
// Ironic keeps the inventory inspector processed (GET
// /v1/nodes/{node}/inventory). Their logs, configurations and databases
// stay in the folder given.
//
// Ironic acts in wall time, so a lab under it runs no faster than
// [MinScale].
//
// [Client] is the little of Ironic's REST API the harness itself needs:
// nodes, their states and a dump for the artifacts. It speaks one
// microversion, [APIVersion], the highest this Ironic offers.
//
// Ironic is installed by `scripts/install-deps.sh metal3` (make
// deps-metal3); [Start] says so when it is missing.
package ironic
