// Package hostagent is the managers' client of the API a host's OS offers
// (a deploy ramdisk, a recovery OS, the installed OS). The paths and wire
// types are api/hostagent/v1, the contract between the managers and the
// agent; the lab's agent (sim/agent) serves it.
//
// [Client] calls one agent at its base URL: Status and Inventory; Stage
// (write an image, verified against its sha256 first, into the root the
// host stages into, and answer that root), Activate (boot a staged root
// next, with a number of tries before the bootloader falls back),
// Rollback and Health (the OS's health check, which commits the running
// root when it passes; an unhealthy host is an answer, not an error); the
// config drive, /etc, files and kubeadm upgrade node; Clean, Reboot and
// Reset. An agent's refusal is an [*Error] with its status code and
// message.
//
// The update calls are the same whether the host keeps its OS in A/B slots
// or OSTree deployments: the host decides where an image goes and names
// it by a RootID (the contract sim/disk models), so neither the host
// controller nor the in-place extension knows which kind a host has.
//
// [SiteTLS] and [HTTPClient] build the mutual TLS both managers
// (cmd/upgradelab-baremetal, cmd/upgradelab-inplace) use with BMCs and
// agents: the site's CA for their certificates, and the manager's own
// pair shown as a client certificate. The client's timeout must cover an
// image write, which takes the image's modelled write time.
package hostagent
