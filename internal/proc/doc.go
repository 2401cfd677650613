// Package proc is what the harness knows about the processes it starts,
// read from Linux's /proc: when one has really ended (every thread, not a
// zombie leader), the CPU time and memory it used, its children; and a
// child process with its log ([Process]), and the [Reaper] that ends
// what a killed harness left behind.
//
// The management plane (e2e/mgmt) starts kube-apiserver, etcd,
// kube-controller-manager and CAPI's managers through it; the fleet reads
// their [Usage]; the real VMs' reaper (sim/vm/qemu) tells a live harness
// from a reused pid by its [StartTime].
package proc
