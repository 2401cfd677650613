// Package integration holds tests that need several layers at once: the
// management plane with the real CAPI managers, the lab, workload clusters
// and host agents. They run in `make test`; each takes seconds.
package integration
