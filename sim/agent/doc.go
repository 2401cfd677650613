// Package agent is the OS running on a lab host once it booted from a disk
// slot: it reads the bootstrap data the provider delivered with the image
// (CABPK's cloud-config), performs a simulated kubeadm init or join against
// the host's workload cluster (sim/workload), keeps the Node following the
// hardware, and serves the update API an OS update agent offers (stage an
// image, activate it, health check and commit, reset, persistent data).
package agent
