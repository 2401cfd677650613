// Command upgradelab-baremetal is the reference bare-metal provider's
// manager: the BareMetalHost controller (package host), the endpoint hosts
// call (package callback) and, for ipmi:// hosts, the boot server (package
// netboot); the CAPI infrastructure controllers (packages machine and
// cluster) and their webhooks. It takes the flags CAPI's managers take
// (--webhook-port, --webhook-cert-dir, --health-addr,
// --diagnostics-address, --leader-elect, --sync-period, --kube-api-qps,
// --kube-api-burst), so the harness runs it as it runs them.
//
// --controllers runs either half alone, or both (the default):
//   - hosts: the BareMetalHost inventory, what baremetal-operator and
//     Ironic are beside CAPM3. It alone reaches hardware (BMCs, host
//     agents) and needs --ca-file, --cert-dir and --deploy-image-url. Its
//     RBAC is providers/baremetal/inventory-config, generated from the host
//     and callback packages' markers only.
//   - machines: the infrastructure provider that consumes BareMetalHosts,
//     as CAPM3 does, with the webhooks; it reaches no hardware, and its
//     readiness is the webhook server's.
//
// A provider config's "reference: inventory" manager is the hosts part,
// beside a BareMetalHost-based provider of the config's own
// (fixtures/providers/baremetal-split.yaml runs this command's machines
// part as such a provider, built from a checkout; docs/PROVIDERS.md). Each
// part combination takes its own leader-election ID.
//
// The hosts part's knobs: --callback-addr and --callback-url (where hosts
// post heartbeats and registrations), --netboot-addr, --ipmitool,
// --bmc-retries and --bmc-retry-delay (sushy's server-side retries of
// Redfish reads, package redfish), --poll, --deploy-timeout,
// --reset-timeout, --soft-power-off-timeout (Ironic's
// soft_power_off_timeout), --power-check-interval (10 s; BMO's is a
// minute) and --host-concurrency (BMO's default: the CPUs, at least 2, at
// most 8). The machines part's: --baremetalmachine-concurrency (10).
package main
