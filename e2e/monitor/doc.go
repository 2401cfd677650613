// Package monitor watches a scenario run and writes what changes into its
// timeline: CAPI's objects, the provider's BareMetalHosts, the workload
// cluster's Nodes and the lab's hardware events, each as a flat summary
// (summary.go) the checks read.
package monitor
