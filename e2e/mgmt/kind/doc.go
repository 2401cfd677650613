// Package kind is the management plane's kind target: a one-node kind
// cluster created, reused or attached through kind's Go library, as CAPI's
// own e2e drives it; commands in its node; managers' static binaries as
// one-layer images loaded into the node's containerd; and the address
// translation that lets managers in the node reach the lab on the host's
// loopback and the lab reach the ports they listen on (network.go).
//
// It knows nothing of CAPI: e2e/mgmt deploys the managers into the
// cluster (incluster.go) and restarts its kube-apiserver through Run.
package kind
