// Package pki makes the certificate authorities the harness needs at run
// time, and the certificates they sign: the lab's BMCs (sim/bmc), the host
// agents and the provider that calls them over mutual TLS (sim/site), and
// the management plane's webhooks (e2e/mgmt).
//
// [NewCA] makes an ECDSA P-256 CA valid for a week; [CA.Serving] signs a
// server certificate for IP addresses and names, [CA.Client] a client
// certificate, and [CA.Peer] one that does both, for a party that is
// called and calls over mutual TLS (a provider's callback endpoint that
// also calls host agents). A [Pair] is PEM, usable as a tls.Certificate
// ([Pair.TLS]) or written as tls.crt and tls.key ([Pair.Write]), the
// layout a Kubernetes TLS secret and controller-runtime's cert dir use.
// [CA.Pool] and the CA's PEM are what clients trust.
//
// Nothing here is meant to outlive one run: every CA is made afresh and
// its key is held in memory only.
package pki
