// Package reference is how the harness runs upgradelab's own bare-metal
// provider (providers/baremetal) and in-place extension (providers/inplace)
// against a site: build their binaries, describe them to the management
// plane as mgmt.Provider values, and enroll the site's hosts as
// BareMetalHosts the way an operator does from the rack's inventory. It is
// the one package of the harness that knows those providers; the runner
// reaches them only through provider configs and this adapter
// (internal/layering checks it).
//
// [Build] and [BuildAll] compile the commands with CGO_ENABLED=0, as
// internal/layering requires, so each can run alone in a one-file image on
// a kind plane; the Go build cache makes a rebuild of unchanged code a
// link step. [Provider] describes the provider: the site's CA and a
// provider certificate, its callback endpoint, the boot server that ipmi://
// hosts PXE-boot the deploy ramdisk from (the site's DHCP offers it on
// every network, as a provisioning network's dnsmasq offers Ironic's), the
// deploy ramdisk's URL, and, with Options.Inventory, only the
// BareMetalHost inventory (--controllers=hosts) for a provider of its own
// that consumes BareMetalHosts. The callback port is picked once from
// internal/loopback, below the ephemeral range, so nothing else takes it
// and a restarted provider keeps the URL its hosts were given. [Extension]
// describes the extension: a runtime extension whose ExtensionConfig
// selects namespaces labelled [ExtensionNamespaceLabel], so CAPI asks it
// only about those clusters.
//
// [Enroll] creates a BareMetalHost and its BMC credentials Secret for each
// host of the site with a BMC (those keep selects), copying the lab's host
// labels, with a redfish-virtualmedia address where the BMC serves
// Redfish and ipmi otherwise, as Metal3 names Ironic's hardware types.
// [Scheme] knows the plane's kinds and the provider's; [RepoRoot] finds the
// module's root.
package reference
