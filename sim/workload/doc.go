// Package workload runs the workload clusters that lab hosts join, and
// makes them fail the way real ones do when their hosts go.
//
// The request handlers are CAPI's own in-memory API server and etcd
// emulation (sigs.k8s.io/cluster-api/test, infrastructure/inmemory), over
// one store (CAPI's in-memory manager) for a run. A real kube-apiserver
// and etcd per cluster cannot run here (two cores, many clusters, nodes
// rebooting); the in-memory server is the one KCP's own tests trust, and
// it answers the calls CAPI makes, etcd's through port-forward included.
// What is around the handlers is this package's, because CAPI's mux binds
// every interface, never stops answering while an API server instance is
// registered, and keeps every object whatever happens to the hosts.
//
// [Start] returns the [Clusters] of a run; [Clusters.Create] makes an
// empty cluster and reserves its endpoint (sim/site's VIP). The hosts'
// side is what sim/agent's Workload interface lists: kubeadm's
// [Clusters.JoinControlPlane] and [Clusters.InitObjects], the kubelet's
// [Clusters.SetNode], and [Clusters.StopNode] and
// [Clusters.MemberDataLost] when a host goes off or loses its disk. The
// harness reads through [Clusters.AdminConfig], [Clusters.Health] and
// [Clusters.Subscribe].
//
// # The VIP is kube-vip's (vip.go, server.go)
//
// Each cluster has one loopback listener, its controlPlaneEndpoint as
// kube-vip would announce it, held by one control-plane node and
// answered by that node's API server alone. A node's API server runs
// while its host runs, its static pod starts (releases.go) and its own
// etcd member runs (a stacked API server talks to its local member
// only). When the holder's API server goes, the address answers nothing
// until kube-vip's lease runs out (VIPLeaseDuration, lab time): its
// connections hang when the holder's host is gone and are refused when
// only its API server is. Then a node whose API server runs takes it;
// with none left the address refuses connections until one starts, as
// from a load balancer with no healthy backend. Each change is an event
// with the moment it happened, which the rules judge the outage by.
// Certificates are signed by the CAs CAPI generated for the cluster,
// which the hosts bring in CABPK's bootstrap data, so CAPI's kubeconfig
// secret works ([CAFromSecretData]). An etcd member's serving
// certificate is chosen by the server name KCP's etcd client
// port-forwards to, and the handshake fails while that member is not
// running. One RSA key serves every certificate of a run: generating keys
// is slow, and CAPI's in-memory provider makes the same trade.
//
// # etcd lives on the hosts (etcd.go, store.go)
//
// Each member is in one [MemberState]: running, stopped with its host,
// wiped with its disk, or removed by KCP's MemberRemove. The members give
// the cluster one [Health]: quorum (more than half of the members KCP has
// not removed are running), no quorum, data lost (no voting member has
// the data) or no members yet. Each Health has one row of [Behaviour]:
// quorum serves; no quorum answers every read and write with etcd's
// timeout as a 500; data lost empties the store once and answers "no
// leader". The tables are tested row by row. Every caller passes the same
// gate: the API behind the VIP (answered as a Status before CAPI's
// handler; open watches and port-forwards pass), CAPI's etcd emulation,
// the hosts' kubelets and the lab's controllers. A member that rejoins
// after a reboot catches up (the store is one); a wiped member never has
// its data back, and a removed one never votes again.
//
// A leader that stops while the running members keep quorum is replaced
// after etcd's election timeout ([ElectionTimeout], lab time; reads and
// writes fail with "no leader" meanwhile) by the first running member
// (the leader-from annotation CAPI's etcd emulation reads). Without
// that, KCP's remediation cannot move leadership off a dead member and
// never removes it.
//
// # Static pods follow kubeadm (node.go, releases.go)
//
// A control-plane node's kube-apiserver, kube-controller-manager and
// kube-scheduler run with the extraArgs kubeadm wrote into their
// manifests: the user data's ClusterConfiguration at init, the
// cluster's kubeadm-config at join and at kubeadm upgrade node (KCP
// syncs its ClusterConfiguration there before it rolls), unchanged
// across a reboot. A component whose release refuses its args exits at
// start and crash-loops, as the real binary does: a flag or a feature
// gate that release removed, from a table read off the releases'
// sources. KCP finds the pod failed and holds its rollout; an API
// server that crash-loops takes no traffic on the VIP.
//
// # Applications (apps.go)
//
// The lab plays kube-controller-manager, kube-scheduler and each node's
// kubelet for everything outside kube-system and for kube-system's
// add-ons (kubeadm's CoreDNS Deployment, two replicas that tolerate the
// control plane, and its kube-proxy DaemonSet on every node). Static pods
// are the hosts' own. A template change rolls out (rollout.go): a
// Deployment through a ReplicaSet per template within maxSurge and
// maxUnavailable, a DaemonSet node by node, so KCP's change of an add-on
// reaches its pods as on a real cluster. (The ReplicaSets live in the
// store for the lab's controllers; CAPI's in-memory API server, which
// serves the cluster, does not list them.) Pods are bound to
// Ready, schedulable nodes whose taints they tolerate, spread by owner;
// become Ready after a modelled start ([AppTiming], again after their
// node's kubelet restarts); and end only when their node's kubelet stops
// them (a finalizer holds them, which is graceful deletion). Pods of a
// deleted node go at once, and so do the static pods' mirrors (pod GC;
// a node never seen yet is spared, since its static pods come before its
// kubelet registers it). Pods of a node NotReady past the toleration
// (300 s modelled) are deleted. PodDisruptionBudgets get the disruption
// controller's status. Because CAPI's store bumps generation on every
// write, a status write records the generation it leaves behind.
//
// The controllers run only while the cluster has an API server, and
// write through etcd's gate. They look every 50 ms but read a cluster only
// when something may have changed: its store's resource version moved, a
// kubelet started or stopped, a deadline from the last pass came, or a
// second went by. Reading every cluster whole at every tick costs too
// much CPU in a fleet of dozens of clusters.
//
// # What CAPI's handler lacks (subresources.go, eviction.go, store.go)
//
//   - POST .../pods/NAME/eviction is kube-apiserver's Eviction API:
//     terminating, finished or pending pods go without asking; more than
//     one budget is a 500; a not-Ready pod goes while its budget is met;
//     otherwise the budget must allow a disruption, which is taken, or the
//     answer is 429 with the DisruptionBudget cause. A budget's
//     observedGeneration cannot be checked (generation moves on every
//     write); instead the controller recomputes the status at the tick
//     after any write to the cluster.
//   - nodes/NAME/status and pods/NAME/status take PUT and PATCH of the
//     status only.
//   - Objects get UIDs (owner references match by UID). An update without
//     resourceVersion replaces a built-in kind, as kube-apiserver allows;
//     KCP's CoreDNS upgrade relies on it. A patch is applied to the stored
//     object into a fresh typed one (CAPI's decodes over the old object,
//     losing a merge patch's null such as an uncordon), and a strategic
//     merge patch uses the kind's patch strategy.
//
// # Events (events.go)
//
// [Event]s tell what no API object shows: the VIP, etcd members, Health
// and leader, data lost, evictions granted and refused, pods scheduled
// and stopped, and nodes stopped (with the pods a drain would have moved
// still on them) or started. They fan out through internal/queue, which
// never blocks the cluster; e2e/monitor records them in the timeline.
package workload
