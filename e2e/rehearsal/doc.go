// Package rehearsal turns a site's inventory into a lab and a fleet that
// mirror it, so an upgrade can be rehearsed before the real wave
// (`upgradelab rehearse import`, docs/REHEARSAL.md).
//
// [Read] reads an export as kubectl writes it: BareMetalHosts with their
// inspected hardware and HostFirmwareComponents, CAPI's Clusters,
// KubeadmControlPlanes, MachineDeployments, Machines and ClusterClasses,
// and each workload cluster's Deployments and PodDisruptionBudgets. It
// refuses an object of a kind it reads in a version it does not
// ([Supported]) and never reads a Secret. [Import] maps what the lab can
// model, the way the site's own components would see it (Ironic's root
// disk, the BMC driver of the address, the NIC firmware version of the
// HostFirmwareComponents), and lists everything else with the reason
// instead of guessing it. [Site.Write] writes a lab file and a scenario
// per cluster and one fleet file, each checked as a hand-written one is;
// a cluster the checks refuse (too few hosts for its rollout, say) is
// left out with the checks' words.
package rehearsal
