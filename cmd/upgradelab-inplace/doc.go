// Command upgradelab-inplace is the in-place update extension's process: a
// Cluster API Runtime Extension server (CanUpdateMachine,
// CanUpdateMachineSet and UpdateMachine, served by package inplace's
// Handlers) for machines of the reference bare-metal provider, and the
// single-node controller with its mutating webhook (package singlenode)
// for one-machine control planes. The hooks and the webhook are served on
// --webhook-port with the certificate in --webhook-cert-dir, which the
// ExtensionConfig's caBundle must trust; CAPI calls the hooks only with
// the InPlaceUpdates feature gate on. It takes the flags CAPI's managers
// take; --sync-period is accepted for symmetry only.
//
// Several replicas may run at once. Every one serves the hooks and the
// webhook: an update's progress is kept on its BareMetalMachine and read
// back from the host (an image write under way shows in the agent's
// status), so a replica that never saw the update, or one restarted,
// goes on with it. With --leader-elect (and, outside a cluster,
// --leader-election-namespace) only the elected replica runs the
// single-node controller.
//
// --ca-file and --cert-dir give the site's CA and the client certificate
// the extension shows to host agents and BMCs (package hostagent's
// SiteTLS). The updater reads the management cluster without a cache, and
// reads two things over HTTP: an image's manifest (the head of the image
// bundle, one ranged GET) and a NIC firmware package's JSON descriptor.
//
// The update's knobs: --health-grace (30 s: how long a freshly booted
// image may fail its health check), --drain-timeout (5 min; 0 waits
// forever), --flash-timeout (15 min), --update-deadline (1 h from the
// update's first step; 0: none), --reboot-retry (30 s: how long the old
// OS may go on running after a reboot was asked before a hard reset),
// --shutdown-timeout (10 min: how long an OS reporting its graceful
// shutdown is left to finish), --retry (the RetryAfterSeconds of an
// update in progress), --bmc-retries and --bmc-retry-delay (package
// redfish's Retrying), --singlenode-concurrency (10, KCP's own default).
package main
