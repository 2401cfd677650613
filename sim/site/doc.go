// Package site starts everything around the provider under test that a
// real bare-metal site has: the lab's servers, their BMCs (sim/bmc and
// sim/ipmi), one agent per host serving its API on loopback (sim/agent),
// the workload clusters (sim/workload), and one site CA (internal/pki) that
// signs the BMCs', the agents' and the provider's certificates. The lab
// up command and the e2e runner each run one.
//
// [Start] brings it all up (Options.Backend picks the test or qemu
// backend over the lab file's); [Site.Stop] takes it down. Around it:
//
//   - [Site.VIP] assigns a workload cluster's API server address, as
//     kube-vip or a load balancer would on a real site.
//   - [Site.WriteProviderCertificate] and [Site.ProviderCertificate] give
//     the provider a certificate from the site CA: it serves the
//     provider's callback endpoint, and it is the client certificate the
//     agents accept.
//   - [Site.JoinRegistrationPool] bakes a registration URL into a host's
//     recovery media (Elemental's seed image): from its next recovery boot
//     the host registers there.
//   - [Site.CrashAgent] makes a host's agent process die and come back.
//
// Hosts reach their provisioner trusting the site CA. The site runs until
// Stop, not until the context Start was given ends. Every listener binds a
// loopback address, so a developer's lab is not reachable from the
// network the machine is on; a test checks it.
package site
