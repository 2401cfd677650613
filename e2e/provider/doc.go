// Package provider reads provider configs (fixtures/providers/*.yaml):
// which infrastructure provider the scenarios run against, which managers
// run beside CAPI's and how each is built and started, which cluster
// templates describe a cluster on it, and which upgrade strategies it
// supports. The shape follows CAPI's E2EConfig (providers, their managers,
// templates, variables, intervals), so a provider team points the suite
// at theirs by writing one file; docs/PROVIDERS.md is their view.
//
// A [Config] says:
//   - Lab: the provider drives the lab's hosts as BareMetalHosts. Without
//     it the provider brings its own machines (CAPI's in-memory provider),
//     and the rules about hosts, disks and persistent data do not apply.
//   - [Hosts] and SingleNodeAnnotation: the provider's own names on those
//     BareMetalHosts (spare label, registration pool label, hostname
//     annotation) and on a one-replica in-place control plane. They are
//     settings because they are the provider's vocabulary: the runner,
//     monitors and checks hard-code none of them.
//   - [Manager]s: one of upgradelab's own by Reference (baremetal,
//     inventory, inplace, which the runner wires to the lab through
//     e2e/reference; metal3, Metal3's own inventory, through e2e/bmo and
//     e2e/ironic), a prebuilt Binary, or a main Package built from a
//     Module (at the version this repository's go.mod pins, or at its own
//     Version in a wrapper module whose go.mod restates the module's own,
//     so its dependency choices hold and ours play no part) or from a
//     local Checkout with its own go.mod. Config is the manager's
//     kubebuilder folder; it must hold rbac/, since every manager runs as
//     its own ServiceAccount. OnlyFor limits a manager to some
//     strategies; RuntimeExtension registers it with CAPI's Runtime SDK;
//     FixedPorts names ports it binds whatever its flags say (CAPD's
//     in-memory backend's 19000), which keeps its runs from overlapping.
//   - clusterTemplates (a folder holding the four [TemplateFiles]),
//     strategies, template variables, and intervals (provision 5 min,
//     upgrade 10 min by default).
//
// [Load] validates the file (strictly; each error names file and field)
// and checks the template folder; in-place needs a runtime extension and
// reset needs the lab and a pool label. [Config.Runs] says whether a
// scenario can run against the provider and why not: its strategy, a
// scenario about the lab's hardware, a fault on BMCs or hosts without the
// lab, a restart of a manager it does not run. [Config.ManagersFor] picks
// a strategy's managers.
//
// [Config.Build] builds a manager that comes from source into the cache
// (mgmt.CacheDir): once per module version, or on every call for a
// checkout (Go's build cache makes an unchanged one a link), with a
// progress line when it starts and ends. It runs before any scenario's
// clock starts: a cold build takes minutes. Two builders of the same
// binary (two suites on one machine) take turns on a lock beside it, and
// the second finds the first's binary. [Config.Process] then describes a
// manager that is not a reference one to the management plane as an
// mgmt.Provider (binary, config folder, args, env, gates, extension
// settings); it never builds, and refuses a manager not built yet.
package provider
