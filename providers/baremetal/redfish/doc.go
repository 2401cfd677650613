// Package redfish is everything the bare-metal managers do to a server's
// BMC over Redfish, with gofish: power, the one-time boot override,
// virtual media, the hardware and firmware inventory, and staged firmware
// updates. It is the managers' only way to a Redfish host's hardware
// besides the host agent, as Ironic's redfish-virtualmedia driver is
// Metal3's. The host controller uses it for Redfish hosts; the in-place
// extension uses it to restart hosts and flash NICs.
//
// [ParseAddress] reads Metal3's
// redfish-virtualmedia+https://HOST:PORT/redfish/v1/Systems/ID. [Dial]
// connects with Basic auth, so a provider that restarts leaves no Redfish
// session behind, and reads the system, which checks the credentials
// ([ErrCredentials]).
//
// The power calls follow Ironic's: [Client.PowerOn] turns a server on or,
// when on, restarts it (ForceRestart), so it boots again either way;
// [Client.Restart] is GracefulRestart, so the OS shuts down first and an
// OSTree host finalises its staged deployment; [Client.GracefulShutdown]
// only signals the OS (the caller reads the power state to learn whether
// it went down); [Client.PowerOff] is ForceOff. [Client.StageFirmware]
// posts SimpleUpdate with @Redfish.OperationApplyTime OnReset for one
// firmware inventory item (e.g. NIC.eno1), so the BMC flashes while no OS
// drives the device; gofish's SimpleUpdateParameters have no apply time,
// so the action is posted as Redfish defines it.
//
// gofish has no retries of its own. [Retrying] wraps an HTTP client with
// sushy's server-side retries, as Ironic gets them: a GET answered with a
// 5xx is sent again after a pause ([DefaultRetries] 10 times,
// [DefaultRetryDelay] 3 s), since a BMC that answers a read so is usually
// busy, not broken. Actions (POST, PATCH) are sent once, as sushy sends
// them: a failed one may have done part of its work, and the reconcile
// that sent it decides what to do next. Without the retries a read a real
// BMC would have answered a moment later fails a whole reconcile, and the
// host's backoff grows with every call a reconcile makes.
package redfish
