// Package cluster is the BareMetalCluster controller. On bare metal the
// API server's endpoint is a VIP the site assigns, not something the
// provider creates, so [Reconciler] reports the cluster's infrastructure
// provisioned (status.initialization.provisioned, Ready True with reason
// ControlPlaneEndpointSet) as soon as spec.controlPlaneEndpoint is valid,
// and waits with reason WaitingForControlPlaneEndpoint until then. It
// copies spec.failureDomains to status.failureDomains, the InfraCluster
// contract's list CAPI copies into the Cluster, as CAPM3's Metal3Cluster
// declares them.
//
// It keeps CAPI's Paused condition (util/paused) and does nothing else
// while the Cluster or the object is paused; a Cluster paused or unpaused
// wakes it (CAPI's ClusterPausedTransitions predicate), other Cluster
// changes do not. Package webhooks keeps the endpoint immutable once set,
// since CAPI and every kubeconfig point at it.
package cluster
