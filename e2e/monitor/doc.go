// Package monitor watches a scenario run and records every change into its
// timeline (e2e/timeline), each object as a flat summary of the fields the
// checks read (summary.go names them; the runner's waits read the same
// summaries).
//
// A [Recorder] follows one cluster's namespace. On the management cluster
// it reads Clusters, KubeadmControlPlanes, MachineDeployments,
// MachineSets, Machines and, for a lab provider, BareMetalHosts. In the
// workload cluster, once CAPI has written its kubeconfig, it reads the
// etcd members (their static pods: node, image, and whether KCP removed
// the member), Nodes, the application's pods, budgets and Deployment
// (apps.go), the kube-proxy and CoreDNS add-ons, kubeadm-config's
// ClusterConfiguration (version and feature gates), and the workload API
// itself, one read per poll: up, or down and how. [RecordLab] and
// [RecordWorkload] add the lab's hardware events (power, boot, disk, NIC)
// and its workload clusters' events (VIP, etcd, evictions, nodes stopped).
//
// # Causal order
//
// The kinds are listed in the order changes flow (CAPI's objects, what
// they change in the workload cluster, the hosts they free) and read in
// the reverse order, effects before their causes, so no poll records an
// effect without its cause: a poll that finds a host deprovisioning reads
// its Machine afterwards, already deleting. An etcd member is removed
// before its Node goes, so the member is read after the Node. Read the
// other way round, a Machine read just before it starts deleting and its
// host read just after the host is freed would replay as a host wiped
// under a live Machine.
//
// Every change of one poll carries one time: the poll is one observation,
// and e2e/check applies its changes together. Objects gone are recorded
// before objects new or changed, so a Machine deleted and its replacement
// created between two polls never replay as existing at once.
//
// # When it polls
//
// Management objects come from a watch-fed cache ([WatchedReader]: the
// run's namespace, or every namespace for the runs of a fleet's shared
// plane), not from lists at every poll: listing six CAPI kinds ten times a
// second costs a quarter of a core per plane in the API server, which
// serves CRDs as JSON. The watches only say when to read (wake.go); the
// reads stay direct and in causal order, since caches of each kind lag on
// their own and would lose that order. The recorder polls when something
// changed, at most every Interval (100 ms by default), so it sees each
// state that lasts longer than that; CAPI's own steps last seconds. What
// wakes it:
//   - the management cache's informers, for the run's namespace;
//   - one watch per kind it reads in the workload cluster (a watch that
//     breaks, as each does when the VIP closes, wakes it too);
//   - [Recorder.Wake], which the runner hands to RecordLab and
//     RecordWorkload for each event: a host powered off, an API server
//     stopped or quorum lost change the API's answer without changing an
//     object.
//
// While the workload API does not answer, the recorder polls every
// Interval until it does; with nothing changing, at least every Idle
// ([DefaultIdle], one second), which bounds how late it sees a change
// nothing announces (a provider without the lab) and how soon it connects
// to a new workload cluster.
package monitor
