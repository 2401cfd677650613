package check

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Kinds of the entries the runner writes about the data it left before
// the upgrade, on a host's persistent partition or as an object in the
// workload cluster: New["marker"] is "written", then "present" or
// "absent" at the end.
const (
	KindHostData     = "HostData"
	KindWorkloadData = "WorkloadData"
	// KindHostEtc is an admin's edit of /etc on an OSTree host.
	KindHostEtc = "HostEtc"
	FieldMarker = "marker"
	// KindForbidden is what the API server refused one manager (named by
	// the entry): FieldCount refusals in its log, FieldFirst the first.
	KindForbidden = "ManagerForbidden"
	FieldCount    = "count"
	FieldFirst    = "first"
)

// Rules is every rule, in report order. docs/CONFORMANCE.md explains each.
var Rules = []Rule{
	// CAPI's invariants while it rolls out, at every moment.
	{Name: "kcp-max-machines", Group: GroupRollout, Why: "KCP never has more Machines than replicas + maxSurge",
		During: kcpMaxMachines},
	{Name: "kcp-one-deleting", Group: GroupRollout, Why: "KCP deletes at most one control-plane Machine at a time (etcd quorum)",
		During: kcpOneDeleting, Exercised: func(s *State, _ Params) bool { return s.Exercise.ControlPlaneDeletions > 0 }},
	{Name: "md-max-machines", Group: GroupRollout, Why: "a MachineDeployment never has more Machines than replicas + maxSurge",
		Applies: func(p Params) bool { return p.Workers > 0 }, During: mdMaxMachines},
	{Name: "md-min-available", Group: GroupRollout, Why: "during the upgrade a MachineDeployment keeps replicas - maxUnavailable Machines available",
		Applies: func(p Params) bool { return p.Workers > 0 }, During: mdMinAvailable},
	{Name: "etcd-quorum", Group: GroupRollout, Why: "during the upgrade etcd keeps its quorum: more than half of the members KCP has not removed run (as the hosts hold them; the members' Nodes Ready where a provider's etcd is not modelled)",
		Applies: func(p Params) bool { return p.ControlPlaneReplicas >= 3 }, During: etcdQuorumRule},
	{Name: "deletion-order", Group: GroupRollout, Why: "a Machine at the new version is never deleted while one of the same owner is still at the old version (unless a MachineHealthCheck found it unhealthy: remediation)",
		During: deletionOrder, Exercised: func(s *State, _ Params) bool { return s.Exercise.Deletions > 0 }},
	{Name: "paused-respected", Group: GroupRollout, Why: "while its Cluster is paused (spec.paused, as during clusterctl move), none of its Machines is created, deleted, starts an in-place update or changes version",
		During: pausedRespected, Exercised: func(s *State, _ Params) bool { return s.Exercise.ClusterPauses > 0 }},
	{Name: "spec-matches-host", Group: GroupRollout, Why: "outside an in-place update, a Machine's version is its Node's kubelet and the version of the image its host booted (an update answered done while the host runs another image leaves CAPI judging a cluster that is not there)",
		During: specMatchesHost, End: func(s *State, _ Params) []Violation { return dueNodeMismatches(s, true) }},
	{Name: "static-pods-run", Group: GroupRollout, Why: "no control-plane static pod crash-loops (a flag or feature gate its release removed makes the binary exit at start; KCP then holds the rollout at its preflight checks)",
		During: staticPodsRun, Note: kcpBlockedNote},
	{Name: "same-machines", Group: GroupRollout, Why: "an in-place upgrade keeps every Machine (name and UID); none created, deleted or being deleted",
		Applies: func(p Params) bool { return p.Expect.SameMachines }, During: sameMachines},
	// Where CAPI and the cluster end.
	{Name: "end-machines-up-to-date", Group: GroupEnd, Why: "every Machine ends UpToDate at the new version, no update in progress",
		Applies: upgraded, End: endMachines},
	{Name: "end-control-plane", Group: GroupEnd, Why: "KCP ends with upToDateReplicas and availableReplicas == replicas at the new version",
		Applies: upgraded, End: endControlPlane},
	{Name: "end-workers", Group: GroupEnd, Why: "the MachineDeployment ends with upToDateReplicas and availableReplicas == replicas",
		Applies: func(p Params) bool { return p.Workers > 0 && upgraded(p) }, End: endWorkers},
	{Name: "end-kubeadm-config", Group: GroupEnd, Why: "the kubeadm-config ClusterConfiguration ends at the new kubernetesVersion (KCP updates it before it rolls a Machine; kubeadm upgrade node reads it)",
		Applies: upgraded, End: endKubeadmConfig},
	{Name: "end-kube-proxy", Group: GroupEnd, Why: "KCP moved the kube-proxy DaemonSet to the new version's image, and every kube-proxy pod runs it",
		Applies: upgraded, End: endKubeProxy},
	{Name: "end-coredns", Group: GroupEnd, Why: "KCP moved CoreDNS to the tag its spec asks for at the new version, and every CoreDNS pod runs it",
		Applies: func(p Params) bool { return upgraded(p) && p.ToCoreDNS != "" }, End: endCoreDNS},
	{Name: "end-etcd", Group: GroupEnd, Why: "every etcd member runs the end version's etcd or a newer one (kubeadm on a new or upgraded node; it never downgrades a member, so one a failed update moved up keeps it after a revert)",
		Applies: func(p Params) bool { return upgraded(p) && p.ToEtcd != "" }, End: endEtcd},
	{Name: "end-rolled-back", Group: GroupEnd, Why: "a failed in-place update is reported by CAPI on the Machine, which is kept, none deleting",
		Applies: isRolledBack, End: endRolledBack},
	{Name: "reverted-after-failure", Group: GroupEnd, Why: "a reverted run saw CAPI report the failed in-place update before the spec went back (else the revert tested nothing)",
		Applies: func(p Params) bool { return p.Expect.Outcome == scenario.Reverted }, End: revertedAfterFailure},
	{Name: "end-nodes-ready", Group: GroupEnd, Why: "every Node is Ready with the new kubelet (after a rollback: the old one)",
		Applies: finished, End: endNodes},
	{Name: "rbac-sufficient", Group: GroupEnd, Why: "every manager did its work with the permissions its config/rbac grants: the API server refused it nothing",
		Applies: func(p Params) bool { return p.RBACEnforced }, End: rbacSufficient, Span: RunHistory},
	{Name: "capi-agrees", Group: GroupEnd, Why: "CAPI's own Cluster conditions agree with this verdict", Applies: finished},
	// What the cluster's users see.
	{Name: "api-availability", Group: GroupWorkload, Why: "the workload API answers through the upgrade: down no longer than the scenario allows (by default a VIP failover with three or more control-plane nodes, a reboot with one), as the lab declares its outages, or as polls see them where it does not",
		End: apiAvailability, Note: apiAvailabilityNote, Span: UpgradeHistory},
	{Name: "pdb-respected", Group: GroupWorkload, Why: "no eviction or node loss takes a budgeted application below its PodDisruptionBudget (except where CAPI's nodeDrainTimeout passed)",
		Applies: func(p Params) bool { return p.Apps }, During: pdbRespected, Note: pdbNote},
	{Name: "drained-before-disruption", Group: GroupWorkload, Why: "no node is rebooted, powered off or deleted while it still runs pods a drain moves (unless CAPI's nodeDrainTimeout passed)",
		Applies: func(p Params) bool { return p.Apps }, During: drainedBeforeDisruption, Note: drainedNote},
	{Name: "end-application", Group: GroupWorkload, Why: "the application ends whole: every replica of its Deployment Ready (after a rollback too)",
		Applies: func(p Params) bool { return p.Apps && finished(p) }, End: endApplication},
	{Name: "workload-data", Group: GroupWorkload, Why: "objects written into the workload cluster before the upgrade are still there after it",
		Applies: func(p Params) bool { return p.WorkloadData }, End: workloadData},
	// The hosts under the Machines.
	{Name: "host-bound-once", Group: GroupHost, Why: "no host is bound to two Machines at once",
		Applies: func(p Params) bool { return p.HostsVisible }, During: hostBoundOnce},
	{Name: "no-wipe-under-live-machine", Group: GroupHost, Why: "no host is deprovisioned while the Machine it served is alive",
		Applies: func(p Params) bool { return p.HostsVisible }, During: noWipeUnderLiveMachine,
		Exercised: func(s *State, _ Params) bool { return s.Exercise.Deprovisions > 0 }},
	{Name: "etcd-member-removed-first", Group: GroupHost, Why: "a control-plane host is deprovisioned only after KCP removed its etcd member",
		Applies: func(p Params) bool { return p.HostsVisible }, During: etcdMemberRemovedFirst,
		Exercised: func(s *State, _ Params) bool { return s.Exercise.ControlPlaneDeprovisions > 0 }},
	{Name: "clean-shutdowns", Group: GroupHost, Why: "no host's graceful shutdown is cut short by a power-off during the upgrade (an OSTree host would lose its staged deployment, an A/B host's services stop uncleanly, etcd among them), unless its Machine is being deleted; a fault that cuts the power is not judged",
		Applies: func(p Params) bool { return p.HostsVisible && !p.PowerCuts }, During: cleanShutdowns, Note: cleanShutdownsNote,
		Exercised: func(s *State, _ Params) bool { return s.Exercise.Shutdowns > 0 }},
	{Name: "one-writer", Group: GroupHost, Why: "no host is asked for an image write while another is under way on its disk (two writers into one partition leave neither image whole; the host refuses the second, and an updater that sends it lost track of its own write)",
		During: oneWriter},
	{Name: "same-hosts", Group: GroupHost, Why: "the cluster ends on the hosts it started on (node reuse)",
		Applies: func(p Params) bool { return p.Expect.SameHosts && p.HostsVisible && finished(p) }, End: sameHosts},
	{Name: "spares-left", Group: GroupHost, Why: "the expected number of spare hosts is free at the end",
		Applies: func(p Params) bool { return p.Expect.SparesLeft != nil && p.HostsVisible && p.SparesVisible }, End: sparesLeft},
	{Name: "persistent-data", Group: GroupHost, Why: "data on persistent partitions survives an in-place update and is gone from a host that changed hands",
		Applies: func(p Params) bool { return p.Expect.PersistentData != "" && p.HostData }, End: persistentData},
	{Name: "etc-merged", Group: GroupHost, Why: "an admin's /etc edit on an OSTree host survives an in-place update, as OSTree's three-way /etc merge keeps it (an A/B slot switch starts from the image's /etc, so A/B hosts are not judged)",
		Applies: func(p Params) bool { return p.OSTreeHosts && p.Expect.PersistentData == "kept" }, End: etcMerged},
}

// upgraded: the cluster is to end whole, every Machine up to date, at
// endVersion: the new release, or (reverted) the one the user went back
// to after the update failed.
func upgraded(p Params) bool {
	return p.Expect.Outcome == scenario.Upgraded || p.Expect.Outcome == "" || p.Expect.Outcome == scenario.Reverted
}

// endVersion is the version the cluster is to end at.
func endVersion(p Params) string {
	if p.Expect.Outcome == scenario.Upgraded || p.Expect.Outcome == "" {
		return p.ToVersion
	}
	return p.FromVersion
}

func isRolledBack(p Params) bool { return p.Expect.Outcome == scenario.RolledBack }

// finished: the upgrade was expected to end, one way or the other (not
// stalled by a fault the cluster cannot survive).
func finished(p Params) bool { return p.Expect.Outcome != scenario.Stalled }

func violation(s *State, msg string, objects ...string) []Violation {
	sort.Strings(objects)
	return []Violation{{Time: s.Now, Objects: objects, Message: msg}}
}

func objs(kind string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = kind + "/" + n
	}
	return out
}

// ownedByKCP: a Machine of the named KubeadmControlPlane (by its
// control-plane-name label; a control-plane Machine recorded without the
// label is counted for every KCP).
func ownedByKCP(m map[string]string, kcp string) bool {
	return m[vocab.FieldControlPlane] == "true" && (m[vocab.FieldControlPlaneName] == "" || m[vocab.FieldControlPlaneName] == kcp)
}

func kcpMaxMachines(s *State, _ Params) []Violation {
	var out []Violation
	for _, name := range s.names(vocab.KindControlPlane) {
		k := s.get(vocab.KindControlPlane, name)
		limit := num(k, vocab.FieldReplicas) + num(k, vocab.FieldMaxSurge)
		cp := s.machines(func(m map[string]string) bool { return ownedByKCP(m, name) })
		if len(cp) > limit {
			out = append(out, violation(s, fmt.Sprintf("%d Machines of the control plane, KCP allows %d (replicas %s + maxSurge %s)",
				len(cp), limit, k[vocab.FieldReplicas], k[vocab.FieldMaxSurge]), append(objs(vocab.KindMachine, cp), vocab.KindControlPlane+"/"+name)...)...)
		}
	}
	return out
}

func kcpOneDeleting(s *State, _ Params) []Violation {
	var out []Violation
	for _, name := range s.names(vocab.KindControlPlane) {
		deleting := s.machines(func(m map[string]string) bool { return ownedByKCP(m, name) && m[vocab.FieldDeleting] == "true" })
		if len(deleting) > 1 {
			out = append(out, violation(s, fmt.Sprintf("%d Machines of the control plane deleting at once", len(deleting)),
				append(objs(vocab.KindMachine, deleting), vocab.KindControlPlane+"/"+name)...)...)
		}
	}
	return out
}

// fenceposts are a MachineDeployment's maxSurge and maxUnavailable as
// its controller reads them (mdutil.ResolveFenceposts: percentages of
// its replicas, surge rounded up, unavailable down, and both 0 read as
// unavailable 1). A summary it cannot read counts as 0 and 0.
func fenceposts(d map[string]string) (surge, unavailable int) {
	ms, mu := intstr.Parse(d[vocab.FieldMaxSurge]), intstr.Parse(d[vocab.FieldMaxUnavailable])
	sg, un, err := mdutil.ResolveFenceposts(&ms, &mu, int32(num(d, vocab.FieldReplicas)))
	if err != nil {
		return 0, 0
	}
	return int(sg), int(un)
}

func mdMaxMachines(s *State, _ Params) []Violation {
	var out []Violation
	for _, name := range s.names(vocab.KindMachineDeployment) {
		d := s.get(vocab.KindMachineDeployment, name)
		surge, _ := fenceposts(d)
		limit := num(d, vocab.FieldReplicas) + surge
		ms := s.machines(func(m map[string]string) bool { return m[vocab.FieldDeployment] == name })
		if len(ms) > limit {
			out = append(out, violation(s, fmt.Sprintf("%d Machines, the MachineDeployment allows %d (replicas %s + maxSurge %s = %d)",
				len(ms), limit, d[vocab.FieldReplicas], d[vocab.FieldMaxSurge], surge), append(objs(vocab.KindMachine, ms), vocab.KindMachineDeployment+"/"+name)...)...)
		}
	}
	return out
}

// mdMinAvailable holds between the "upgrade" and "done" steps: before,
// the cluster was still being provisioned.
func mdMinAvailable(s *State, _ Params) []Violation {
	if s.Before == nil || !s.Steps[StepDone].IsZero() {
		return nil
	}
	var out []Violation
	for _, name := range s.names(vocab.KindMachineDeployment) {
		d := s.get(vocab.KindMachineDeployment, name)
		_, unavailable := fenceposts(d)
		floor := num(d, vocab.FieldReplicas) - unavailable
		available := s.machines(func(m map[string]string) bool {
			return m[vocab.FieldDeployment] == name && m[vocab.FieldAvailable] == "True" && m[vocab.FieldDeleting] == ""
		})
		if len(available) < floor {
			out = append(out, violation(s, fmt.Sprintf("%d Machines available, the MachineDeployment promises %d (replicas %s - maxUnavailable %s = %d)",
				len(available), floor, d[vocab.FieldReplicas], d[vocab.FieldMaxUnavailable], unavailable), vocab.KindMachineDeployment+"/"+name)...)
		}
	}
	return out
}

func hostBoundOnce(s *State, _ Params) []Violation {
	byConsumer := map[string][]string{}
	for _, h := range s.names(vocab.KindHost) {
		if c := s.get(vocab.KindHost, h)[vocab.FieldConsumer]; c != "" {
			byConsumer[c] = append(byConsumer[c], h)
		}
	}
	var out []Violation
	for c, hosts := range byConsumer {
		if len(hosts) > 1 {
			out = append(out, violation(s, fmt.Sprintf("BareMetalMachine %s is bound to %d hosts", c, len(hosts)), objs(vocab.KindHost, hosts)...)...)
		}
	}
	return out
}

// startsDeprovisioning: the entry is a host entering deprovisioning (the
// moment its disk starts being wiped).
func startsDeprovisioning(e timeline.Entry) bool {
	return e.Kind == vocab.KindHost && e.New[vocab.FieldState] == "deprovisioning" && e.Old[vocab.FieldState] != "deprovisioning"
}

// noWipeUnderLiveMachine judges the moment a host starts deprovisioning:
// the Machine of the last BareMetalMachine it served must be deleting or
// gone.
func noWipeUnderLiveMachine(s *State, _ Params) []Violation {
	e := s.Entry
	if !startsDeprovisioning(e) {
		return nil
	}
	if live := s.liveMachines(e.Name); len(live) > 0 {
		return violation(s, fmt.Sprintf("host deprovisioning while Machine %s (BareMetalMachine %s) is alive and not deleting", live[0], s.LastConsumer[e.Name]),
			vocab.KindHost+"/"+e.Name, vocab.KindMachine+"/"+live[0])
	}
	return nil
}

// cleanShutdowns: a power-off of a host whose graceful shutdown was
// still under way.
func cleanShutdowns(s *State, p Params) []Violation {
	e := s.Entry
	c, ok := s.cuts[e.Name]
	if !ok || !c.at.Equal(e.Time) || !s.upgrading() || e.Kind != timeline.KindLab || e.New[vocab.FieldPower] != vocab.LabPowerOff {
		return nil
	}
	return violation(s, fmt.Sprintf("host %s was powered off %s into its graceful shutdown, before it finished", e.Name, p.labTime(c.ran)),
		vocab.KindHost+"/"+e.Name)
}

// oneWriter: a host's disk refused a write because another was under
// way.
func oneWriter(s *State, _ Params) []Violation {
	e := s.Entry
	if e.Kind != timeline.KindLab || e.New[vocab.FieldReason] != vocab.LabWriteBusy {
		return nil
	}
	return violation(s, fmt.Sprintf("host %s was asked to write %s while another write was under way on its disk", e.Name, or(e.New["image"], "an image")),
		vocab.KindHost+"/"+e.Name)
}

func cleanShutdownsNote(s *State, _ Params) string {
	note := fmt.Sprintf("%d graceful shutdowns during the upgrade", s.Exercise.Shutdowns)
	if len(s.excusedCuts) > 0 {
		note += "; powered off mid-shutdown with their Machine deleting or gone: " + strings.Join(s.excusedCuts, ", ")
	}
	return note
}

// etcdQuorumRule judges etcd as the hosts hold it where the lab models
// it, and by its members' Nodes otherwise.
func etcdQuorumRule(s *State, p Params) []Violation {
	if p.EtcdOnHosts {
		return etcdHealthy(s, p)
	}
	return etcdQuorum(s, p)
}

// etcdQuorum counts, between the upgrade and done steps, the etcd members
// KCP has not removed and how many of them sit on a Ready node. A node
// that reboots shows NotReady only once the kubelet's silence is
// noticed, so a short outage can go unseen; one that is seen is real.
func etcdQuorum(s *State, _ Params) []Violation {
	if s.Before == nil || !s.Steps[StepDone].IsZero() {
		return nil
	}
	var members, down []string
	for _, name := range s.names(vocab.KindEtcdMember) {
		em := s.get(vocab.KindEtcdMember, name)
		if em[vocab.FieldRemoved] != "" {
			continue
		}
		members = append(members, name)
		if n := s.get(vocab.KindNode, em[vocab.FieldNode]); n == nil || n[vocab.FieldReady] != "True" {
			down = append(down, name)
		}
	}
	if len(members) == 0 || 2*(len(members)-len(down)) > len(members) {
		return nil
	}
	return violation(s, fmt.Sprintf("etcd quorum lost: %d of %d members on Ready nodes", len(members)-len(down), len(members)),
		objs(vocab.KindEtcdMember, down)...)
}

// deletionOrder judges the moment a Machine starts deleting: no Machine
// of the same owner (the control plane, or the same MachineDeployment)
// may still be at another version when one at the new version goes.
func deletionOrder(s *State, p Params) []Violation {
	e := s.Entry
	if e.Kind != vocab.KindMachine || e.New == nil || e.New[vocab.FieldDeleting] == "" || e.Old[vocab.FieldDeleting] != "" ||
		e.New[vocab.FieldVersion] != p.ToVersion || s.Before == nil {
		return nil
	}
	if e.New[vocab.FieldHealthCheck] == "False" || s.foundUnhealthy[e.Name] {
		// Remediation: a MachineHealthCheck found it unhealthy, whatever
		// its version (KCP can act on that verdict after the Machine
		// recovered: fault-mhc-shorter-than-reboot).
		return nil
	}
	owner := func(m map[string]string) string {
		if m[vocab.FieldControlPlane] != "" {
			return "control plane"
		}
		return "MachineDeployment " + m[vocab.FieldDeployment]
	}
	mine := owner(e.New)
	var out []Violation
	for _, other := range s.machines(func(m map[string]string) bool {
		return owner(m) == mine && m[vocab.FieldVersion] != p.ToVersion && m[vocab.FieldDeleting] == ""
	}) {
		out = append(out, violation(s, fmt.Sprintf("Machine %s at %s deleted while %s of the %s is still at %s", e.Name, p.ToVersion, other, mine,
			s.get(vocab.KindMachine, other)[vocab.FieldVersion]), vocab.KindMachine+"/"+e.Name, vocab.KindMachine+"/"+other)...)
	}
	return out
}

// etcdMemberRemovedFirst judges the moment a host starts deprovisioning:
// the etcd member on the node of the Machine it served must be removed.
func etcdMemberRemovedFirst(s *State, _ Params) []Violation {
	e := s.Entry
	if !startsDeprovisioning(e) {
		return nil
	}
	consumer := s.LastConsumer[e.Name]
	var out []Violation
	for _, m := range s.machines(func(m map[string]string) bool {
		return consumer != "" && m[vocab.FieldInfra] == consumer && m[vocab.FieldControlPlane] == "true"
	}) {
		node := s.get(vocab.KindMachine, m)[vocab.FieldNode]
		for _, member := range s.names(vocab.KindEtcdMember) {
			em := s.get(vocab.KindEtcdMember, member)
			if node != "" && em[vocab.FieldNode] == node && em[vocab.FieldRemoved] == "" {
				out = append(out, violation(s, fmt.Sprintf("host deprovisioning while the etcd member on node %s of Machine %s is still a member", node, m),
					vocab.KindHost+"/"+e.Name, vocab.KindEtcdMember+"/"+member)...)
			}
		}
	}
	return out
}

// pausedRespected judges the change just applied: a Machine's, while
// the Cluster is paused.
func pausedRespected(s *State, _ Params) []Violation {
	e := s.Entry
	if e.Kind != vocab.KindMachine || !clusterPaused(s) {
		return nil
	}
	var what string
	switch {
	case e.Old == nil && e.New != nil:
		what = "was created"
	case e.New == nil || e.New[vocab.FieldDeleting] != "" && e.Old[vocab.FieldDeleting] == "":
		what = "was deleted"
	case e.New[vocab.FieldUpdating] != "" && e.Old[vocab.FieldUpdating] == "":
		what = "started an in-place update"
	case e.New[vocab.FieldVersion] != e.Old[vocab.FieldVersion]:
		what = fmt.Sprintf("changed version %s -> %s", e.Old[vocab.FieldVersion], e.New[vocab.FieldVersion])
	default:
		return nil
	}
	return violation(s, fmt.Sprintf("Machine %s %s while its Cluster was paused", e.Name, what), e.Object())
}

// specMatchesHost judges every moment: each Machine with a Node, not
// updating in place and not deleting, says the version its Node's
// kubelet runs, and the image its host last booted from disk (where the
// lab's events tell it) ships that version too. An in-place update ends
// after its Node reports the new kubelet (the extension waits for it),
// and a poll reads Nodes before Machines (monitor.Recorder): the poll in
// which a Machine leaves its update can hold its Node as read just
// before the Node changed. That poll's Node is not judged against it;
// the next poll's, read after this poll's Machine, is.
func specMatchesHost(s *State, _ Params) []Violation {
	var out []Violation
	hostOf := map[string]string{}
	for _, h := range s.names(vocab.KindHost) {
		if c := s.get(vocab.KindHost, h)[vocab.FieldConsumer]; c != "" {
			hostOf[c] = h
		}
	}
	for _, name := range s.names(vocab.KindMachine) {
		m := s.get(vocab.KindMachine, name)
		if m[vocab.FieldUpdating] != "" || m[vocab.FieldDeleting] != "" || m[vocab.FieldNode] == "" {
			continue
		}
		version, node := m[vocab.FieldVersion], m[vocab.FieldNode]
		if d := s.nodeDue[name]; d != nil && !d.judging {
			// Its update ended in this poll: the next poll's Node judges it.
		} else if kubelet := s.get(vocab.KindNode, node)[vocab.FieldKubelet]; kubelet != "" && kubelet != version {
			out = append(out, nodeMismatch(s, name, version, node, kubelet)...)
		}
		host := hostOf[m[vocab.FieldInfra]]
		if booted := s.hostKubelet[host]; booted != "" && booted != version {
			out = append(out, violation(s, fmt.Sprintf("Machine %s says %s, not updating, while its host %s runs an image of %s", name, version, host, booted),
				vocab.KindMachine+"/"+name, vocab.KindHost+"/"+host)...)
		}
	}
	return append(out, dueNodeMismatches(s, false)...)
}

// dueNodeMismatches judges the update ends whose poll has come (all of
// them at the end of the run: no later poll will read their Nodes)
// against their Nodes, unless the Machine is gone or deleting.
func dueNodeMismatches(s *State, atEnd bool) []Violation {
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(s.nodeDue)) {
		d, m := s.nodeDue[name], s.get(vocab.KindMachine, name)
		if !d.judging && !atEnd || m == nil || m[vocab.FieldDeleting] != "" {
			continue
		}
		if kubelet := s.get(vocab.KindNode, d.node)[vocab.FieldKubelet]; kubelet != "" && kubelet != d.version {
			out = append(out, nodeMismatch(s, name, d.version, d.node, kubelet)...)
		}
	}
	return out
}

func nodeMismatch(s *State, machine, version, node, kubelet string) []Violation {
	return violation(s, fmt.Sprintf("Machine %s says %s, not updating, while its Node %s runs kubelet %s", machine, version, node, kubelet),
		vocab.KindMachine+"/"+machine, vocab.KindNode+"/"+node)
}

func staticPodsRun(s *State, _ Params) []Violation {
	var out []Violation
	for _, name := range s.names(vocab.KindStaticPod) {
		p := s.get(vocab.KindStaticPod, name)
		if why := p[vocab.FieldCrashLoop]; why != "" {
			out = append(out, violation(s, fmt.Sprintf("%s on node %s (%s) crash-loops: %s", name, p[vocab.FieldNode], p[vocab.FieldImage], why),
				vocab.KindStaticPod+"/"+name)...)
		}
	}
	return out
}

// kcpBlockedNote is what KCP says holds its rollout where the run ends
// with a static pod crash-looping (which fails KCP's preflight checks).
func kcpBlockedNote(s *State, p Params) string {
	if len(staticPodsRun(s, p)) == 0 {
		return ""
	}
	var out []string
	for _, name := range s.names(vocab.KindControlPlane) {
		if why := s.get(vocab.KindControlPlane, name)[vocab.FieldBlocked]; why != "" {
			out = append(out, fmt.Sprintf("KCP %s ends saying: %s", name, why))
		}
	}
	return strings.Join(out, "; ")
}

// clusterPaused says whether a Cluster of the run is paused now.
func clusterPaused(s *State) bool {
	for _, c := range s.Objects[vocab.KindCluster] {
		if c[vocab.FieldPaused] != "" {
			return true
		}
	}
	return false
}

func sameMachines(s *State, _ Params) []Violation {
	var out []Violation
	for _, o := range s.Created {
		if strings.HasPrefix(o, vocab.KindMachine+"/") {
			out = append(out, violation(s, "a Machine was created during an in-place upgrade", o)...)
		}
	}
	for _, o := range s.Deleted {
		if strings.HasPrefix(o, vocab.KindMachine+"/") {
			out = append(out, violation(s, "a Machine was deleted during an in-place upgrade", o)...)
		}
	}
	if s.Before != nil {
		for name, m := range s.Objects[vocab.KindMachine] {
			if _, ok := s.Before[vocab.KindMachine][name]; ok && m[vocab.FieldDeleting] != "" {
				out = append(out, violation(s, "a Machine is being deleted during an in-place upgrade", vocab.KindMachine+"/"+name)...)
			}
			if was, ok := s.Before[vocab.KindMachine][name]; ok && was[vocab.FieldUID] != m[vocab.FieldUID] {
				out = append(out, violation(s, fmt.Sprintf("Machine %s has UID %s, had %s", name, m[vocab.FieldUID], was[vocab.FieldUID]), vocab.KindMachine+"/"+name)...)
			}
			if was, ok := s.Before[vocab.KindMachine][name]; ok && was[vocab.FieldProviderID] != m[vocab.FieldProviderID] && m[vocab.FieldProviderID] != "" {
				out = append(out, violation(s, fmt.Sprintf("Machine %s has providerID %s, had %s", name, m[vocab.FieldProviderID], was[vocab.FieldProviderID]), vocab.KindMachine+"/"+name)...)
			}
		}
	}
	return out
}

func expected(s *State) int {
	n := 0
	for _, k := range []string{vocab.KindControlPlane, vocab.KindMachineDeployment} {
		for _, name := range s.names(k) {
			n += num(s.get(k, name), vocab.FieldReplicas)
		}
	}
	return n
}

func endMachines(s *State, p Params) []Violation {
	var out []Violation
	for _, name := range s.names(vocab.KindMachine) {
		m := s.get(vocab.KindMachine, name)
		var why []string
		if m[vocab.FieldUpToDate] != "True" {
			why = append(why, "UpToDate "+or(m[vocab.FieldUpToDate], "absent"))
		}
		if m[vocab.FieldVersion] != endVersion(p) {
			why = append(why, "version "+m[vocab.FieldVersion])
		}
		if m[vocab.FieldUpdating] != "" {
			why = append(why, "an update in progress")
		}
		if m[vocab.FieldDeleting] != "" {
			why = append(why, "deleting")
		}
		if len(why) > 0 {
			out = append(out, violation(s, "Machine "+name+" ends with "+strings.Join(why, ", "), vocab.KindMachine+"/"+name)...)
		}
	}
	if got, want := len(s.names(vocab.KindMachine)), expected(s); got != want {
		out = append(out, violation(s, fmt.Sprintf("%d Machines at the end, replicas add up to %d", got, want), "Machines")...)
	}
	return out
}

func endControlPlane(s *State, p Params) []Violation {
	var out []Violation
	for _, name := range s.names(vocab.KindControlPlane) {
		k := s.get(vocab.KindControlPlane, name)
		if k[vocab.FieldUpToDateCount] != k[vocab.FieldReplicas] || k[vocab.FieldAvailableCount] != k[vocab.FieldReplicas] || k[vocab.FieldVersion] != endVersion(p) {
			out = append(out, violation(s, fmt.Sprintf("KCP ends at %s with upToDateReplicas %s, availableReplicas %s of %s",
				k[vocab.FieldVersion], k[vocab.FieldUpToDateCount], k[vocab.FieldAvailableCount], k[vocab.FieldReplicas]), vocab.KindControlPlane+"/"+name)...)
		}
	}
	if len(s.names(vocab.KindControlPlane)) == 0 {
		out = append(out, violation(s, "no KubeadmControlPlane was seen", vocab.KindControlPlane)...)
	}
	return out
}

func endWorkers(s *State, p Params) []Violation {
	var out []Violation
	if len(s.names(vocab.KindMachineDeployment)) == 0 {
		out = append(out, violation(s, "no MachineDeployment was seen", vocab.KindMachineDeployment)...)
	}
	for _, name := range s.names(vocab.KindMachineDeployment) {
		d := s.get(vocab.KindMachineDeployment, name)
		if d[vocab.FieldUpToDateCount] != d[vocab.FieldReplicas] || d[vocab.FieldAvailableCount] != d[vocab.FieldReplicas] || d[vocab.FieldVersion] != endVersion(p) {
			out = append(out, violation(s, fmt.Sprintf("MachineDeployment ends at %s with upToDateReplicas %s, availableReplicas %s of %s",
				d[vocab.FieldVersion], d[vocab.FieldUpToDateCount], d[vocab.FieldAvailableCount], d[vocab.FieldReplicas]), vocab.KindMachineDeployment+"/"+name)...)
		}
	}
	return out
}

// endKubeadmConfig: the ClusterConfiguration in kubeadm-config says the
// new version. A KCP bypassed (or paused through the moment it would
// update it) leaves it at the old one, and hosts that join or run
// kubeadm upgrade node read that.
func endKubeadmConfig(s *State, p Params) []Violation {
	c := s.get(vocab.KindAddon, vocab.AddonKubeadmConfig)
	if c == nil {
		return violation(s, "no kubeadm-config ConfigMap was seen in the workload cluster", vocab.KindAddon+"/"+vocab.AddonKubeadmConfig)
	}
	if c[vocab.FieldVersion] != endVersion(p) {
		return violation(s, fmt.Sprintf("kubeadm-config's ClusterConfiguration ends at kubernetesVersion %q, not %s (featureGates %s)",
			c[vocab.FieldVersion], endVersion(p), or(c[vocab.FieldFeatureGates], "none")), vocab.KindAddon+"/"+vocab.AddonKubeadmConfig)
	}
	return nil
}

// endKubeProxy: kubeadm's kube-proxy runs the image of the control
// plane's version, which KCP sets during an upgrade, on every pod.
func endKubeProxy(s *State, p Params) []Violation {
	return addonEndsOn(s, p, "kube-proxy", "kube-proxy", "DaemonSet", endVersion(p), "the image of "+endVersion(p))
}

// endCoreDNS: KCP's last upgrade step rewrote the CoreDNS Deployment to
// the tag its ClusterConfiguration names, and its pods rolled to it.
func endCoreDNS(s *State, p Params) []Violation {
	return addonEndsOn(s, p, "coredns", "CoreDNS", "Deployment", p.ToCoreDNS, p.ToCoreDNS)
}

// addonEndsOn: the add-on recorded as name (label, a kind of workload)
// ends on an image tagged tag (AddonOff); want says that tag in the
// message.
func addonEndsOn(s *State, p Params, name, label, kind, tag, want string) []Violation {
	a := s.get(vocab.KindAddon, name)
	if a == nil {
		return violation(s, "no "+label+" "+kind+" was seen in the workload cluster", vocab.KindAddon+"/"+name)
	}
	if why := AddonOff(a, label+" "+kind, tag, want, p.AddonPods); why != "" {
		return violation(s, why, vocab.KindAddon+"/"+name)
	}
	return nil
}

// AddonOff says why an add-on's summary (what, e.g. "CoreDNS
// Deployment") is not on an image tagged tag ("" when it is): its
// template, or (pods: the cluster runs the add-ons' pods) a pod on
// another image, or none at all. want names the tag in the answer. The
// runner's wait for the upgrade's end asks it too.
func AddonOff(a map[string]string, what, tag, want string, pods bool) string {
	if !strings.HasSuffix(a[vocab.FieldImage], ":"+tag) {
		return "the " + what + " ends on " + a[vocab.FieldImage] + ", not " + want
	}
	if !pods {
		return ""
	}
	images := a[vocab.FieldPodImages]
	if images == "" {
		return "the " + what + " ends with no pods"
	}
	for _, image := range strings.Split(images, ",") {
		if !strings.HasSuffix(image, ":"+tag) {
			return fmt.Sprintf("the %s asks for %s, but its pods end on %s: the rollout did not reach them", what, a[vocab.FieldImage], images)
		}
	}
	return ""
}

// endEtcd: no etcd member is left on the old release's etcd.
func endEtcd(s *State, p Params) []Violation {
	var out []Violation
	members := s.names(vocab.KindEtcdMember)
	if len(members) == 0 {
		return violation(s, "no etcd member was seen in the workload cluster", vocab.KindEtcdMember)
	}
	for _, name := range members {
		m := s.get(vocab.KindEtcdMember, name)
		if m[vocab.FieldRemoved] == "true" {
			continue
		}
		if !etcdAtLeast(m[vocab.FieldImage], p.ToEtcd) {
			out = append(out, violation(s, fmt.Sprintf("etcd member on %s ends on %q, older than etcd %s", m[vocab.FieldNode], m[vocab.FieldImage], p.ToEtcd), vocab.KindEtcdMember+"/"+name)...)
		}
	}
	return out
}

// etcdAtLeast says whether an etcd image's tag (3.6.5-0) is tag or newer;
// an image without a readable tag is not.
func etcdAtLeast(image, tag string) bool {
	_, have, ok := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return ok && semver.IsValid("v"+have) && semver.Compare("v"+have, "v"+tag) >= 0
}

// endRolledBack: the update failed where CAPI shows it, and nothing
// was replaced on the way back.
func endRolledBack(s *State, _ Params) []Violation {
	var out []Violation
	failed := 0
	for _, name := range s.names(vocab.KindMachine) {
		m := s.get(vocab.KindMachine, name)
		if m[vocab.FieldUpdateFailed] != "" {
			failed++
		}
		if m[vocab.FieldDeleting] != "" {
			out = append(out, violation(s, "Machine "+name+" is deleting after the rollback", vocab.KindMachine+"/"+name)...)
		}
	}
	if failed == 0 {
		out = append(out, violation(s, "no Machine's Updating condition says the in-place update failed", objs(vocab.KindMachine, s.names(vocab.KindMachine))...)...)
	}
	if got, want := len(s.names(vocab.KindMachine)), expected(s); got != want {
		out = append(out, violation(s, fmt.Sprintf("%d Machines at the end, replicas add up to %d", got, want), "Machines")...)
	}
	return out
}

func endNodes(s *State, p Params) []Violation {
	var out []Violation
	ready := 0
	version := endVersion(p)
	for _, name := range s.names(vocab.KindNode) {
		n := s.get(vocab.KindNode, name)
		if n[vocab.FieldReady] == "True" && n[vocab.FieldKubelet] == version {
			ready++
			continue
		}
		out = append(out, violation(s, fmt.Sprintf("Node %s ends Ready=%s with kubelet %s", name, or(n[vocab.FieldReady], "absent"), n[vocab.FieldKubelet]), vocab.KindNode+"/"+name)...)
	}
	if want := expected(s); ready+len(out) != want {
		out = append(out, violation(s, fmt.Sprintf("%d Nodes at the end, replicas add up to %d", ready+len(out), want), "Nodes")...)
	}
	return out
}

func boundHosts(objects map[string]map[string]string) []string {
	var out []string
	for h, sum := range objects {
		if sum[vocab.FieldConsumer] != "" {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

func sameHosts(s *State, _ Params) []Violation {
	if s.Before == nil {
		return violation(s, "the run never reached the upgrade step", "Step/upgrade")
	}
	before, after := boundHosts(s.Before[vocab.KindHost]), boundHosts(s.Objects[vocab.KindHost])
	if strings.Join(before, ",") != strings.Join(after, ",") {
		return violation(s, fmt.Sprintf("bound hosts before %v, after %v", before, after), objs(vocab.KindHost, after)...)
	}
	return nil
}

func sparesLeft(s *State, p Params) []Violation {
	var free []string
	for _, h := range s.names(vocab.KindHost) {
		sum := s.get(vocab.KindHost, h)
		if sum[vocab.FieldSpare] == "true" && sum[vocab.FieldConsumer] == "" {
			free = append(free, h)
		}
	}
	if len(free) != *p.Expect.SparesLeft {
		return violation(s, fmt.Sprintf("%d free spare hosts at the end %v, want %d", len(free), free, *p.Expect.SparesLeft), objs(vocab.KindHost, free)...)
	}
	return nil
}

// persistentData compares the markers written before the upgrade with
// what the hosts hold at the end: kept everywhere, or gone from every
// host that was deprovisioned.
func persistentData(s *State, p Params) []Violation {
	var out []Violation
	marked := 0
	for _, h := range s.names(KindHostData) {
		m := s.get(KindHostData, h)[FieldMarker]
		marked++
		switch {
		case p.Expect.PersistentData == "kept" && m != "present":
			out = append(out, violation(s, "the marker written before the upgrade is "+m, KindHostData+"/"+h)...)
		case p.Expect.PersistentData == "wiped" && s.Reprovisioned[h] && m != "absent":
			out = append(out, violation(s, "the host changed hands but its marker is "+m, KindHostData+"/"+h)...)
		}
	}
	if marked == 0 {
		out = append(out, violation(s, "no persistent-data markers were recorded", KindHostData)...)
	}
	if p.Expect.PersistentData == "wiped" && len(s.Reprovisioned) == 0 {
		out = append(out, violation(s, "no host was deprovisioned, so nothing shows the data wiped", KindHostData)...)
	}
	return out
}

// etcMerged: every /etc edit written on an OSTree host before the upgrade
// is still in the /etc the host runs at the end.
func etcMerged(s *State, _ Params) []Violation {
	return markersPresent(s, KindHostEtc, "the /etc edit made", "no /etc edits were recorded on the OSTree hosts")
}

// markersPresent: every marker of kind the runner wrote before the
// upgrade reads "present" at the end (what names the marker in a
// violation), and some were written (none: why there was nothing to
// judge).
func markersPresent(s *State, kind, what, none string) []Violation {
	var out []Violation
	names := s.names(kind)
	for _, n := range names {
		if m := s.get(kind, n)[FieldMarker]; m != "present" {
			out = append(out, violation(s, what+" before the upgrade is "+m, kind+"/"+n)...)
		}
	}
	if len(names) == 0 {
		out = append(out, violation(s, none, kind)...)
	}
	return out
}

// staleClusters are the Clusters whose recorded state is older than the
// last change of a Machine.
func staleClusters(s *State) []string {
	var lastMachine time.Time
	for _, m := range s.names(vocab.KindMachine) {
		if t := s.Changed[vocab.KindMachine+"/"+m]; t.After(lastMachine) {
			lastMachine = t
		}
	}
	var out []string
	for _, c := range s.names(vocab.KindCluster) {
		if s.Changed[vocab.KindCluster+"/"+c].Before(lastMachine) {
			out = append(out, c)
		}
	}
	return out
}

// CAPISays whether a Cluster's summary says what the outcome means to
// CAPI: upgraded is Available, both machine sets UpToDate and not
// RollingOut; rolled back is Available with some machines not Ready or
// not up to date. (CAPI's UpToDate is about the spec: a Machine whose
// in-place update failed already has the new spec and stays UpToDate;
// its Ready, which counts Updating, is what turns False.)
func CAPISays(c map[string]string, outcome scenario.Outcome) bool {
	available := c[vocab.FieldAvailable] == "True"
	upToDate := c[vocab.FieldCPUpToDate] == "True" && c[vocab.FieldWorkersUpToDate] == "True"
	if outcome == scenario.RolledBack {
		ready := c[vocab.FieldCPMachinesReady] == "True" && c[vocab.FieldWorkerMachinesReady] == "True"
		return available && !(upToDate && ready)
	}
	return available && upToDate && c[vocab.FieldRollingOut] != "True"
}

func revertedAfterFailure(s *State, _ Params) []Violation {
	if s.Exercise.UpdateFailures == 0 {
		return violation(s, "no Machine's in-place update was reported failed after the upgrade: the revert undid an update that never failed", "Step/upgrade")
	}
	return nil
}

// workloadData: every upgrade, whatever it replaces, keeps the cluster's
// etcd and so every object in it.
func workloadData(s *State, _ Params) []Violation {
	return markersPresent(s, KindWorkloadData, "the object written", "no workload objects were recorded")
}

// rbacSufficient: no manager's log holds a Forbidden from the API server.
func rbacSufficient(s *State, _ Params) []Violation {
	var out []Violation
	for _, name := range s.names(KindForbidden) {
		e := s.get(KindForbidden, name)
		out = append(out, violation(s, fmt.Sprintf("manager %s was refused %s request(s) for want of RBAC; the first: %s", name, e[FieldCount], e[FieldFirst]),
			KindForbidden+"/"+name)...)
	}
	return out
}

// agree compares the verdict of the end rules with CAPI's Cluster
// conditions: both must say the outcome happened, or both not.
func agree(s *State, p Params, results []Result) {
	var capi *Result
	ours := true
	var failed []string
	for i := range results {
		r := &results[i]
		switch {
		case r.Rule == "capi-agrees":
			capi = r
		case strings.HasPrefix(r.Rule, "end-") && r.Status == Fail:
			ours = false
			failed = append(failed, r.Rule)
		}
	}
	if capi == nil || capi.Status == NotApplicable {
		return
	}
	theirs, says := true, []string{}
	for _, name := range s.names(vocab.KindCluster) {
		c := s.get(vocab.KindCluster, name)
		theirs = theirs && CAPISays(c, p.Expect.Outcome)
		fields := []string{vocab.FieldAvailable, vocab.FieldCPUpToDate, vocab.FieldWorkersUpToDate, vocab.FieldRollingOut}
		if !upgraded(p) {
			fields = append(fields, vocab.FieldCPMachinesReady, vocab.FieldWorkerMachinesReady)
		}
		for _, f := range fields {
			says = append(says, f+"="+or(c[f], "absent"))
		}
	}
	if len(s.names(vocab.KindCluster)) == 0 {
		theirs, says = false, []string{"no Cluster seen"}
	}
	if ours == theirs {
		return
	}
	if ours && !upgraded(p) {
		if stale := staleClusters(s); len(stale) > 0 {
			// CAPI's cluster controller does not reconcile a Cluster
			// when a control-plane Machine changes once the control
			// plane is initialised (core/reconcilers/cluster:
			// controlPlaneMachineToCluster); it catches up at the next
			// change of the control plane object or its resync. Its
			// conditions still describe the Machines before the failed
			// update: they could not have agreed, so they did not.
			capi.Status = NotExercised
			capi.Note = "CAPI's Cluster " + strings.Join(stale, ", ") + " was not reconciled after the last Machine change (CAPI does not watch control-plane Machines once the control plane is initialised), so its conditions still describe the Machines before the update failed"
			return
		}
	}
	want := "the upgrade is done"
	if !upgraded(p) {
		want = "the cluster is available with machines not ready or not up to date (the update failed)"
	}
	msg := "CAPI's Cluster says " + strings.Join(says, ", ") + ", not that " + want + ", while every end rule passed"
	if !ours {
		msg = "CAPI's Cluster says " + strings.Join(says, ", ") + " (" + want + ") while " + strings.Join(failed, ", ") + " failed"
	}
	capi.Status = Fail
	capi.Violations = append(capi.Violations, Violation{Time: s.Now, Rule: capi.Rule, Objects: objs(vocab.KindCluster, s.names(vocab.KindCluster)), Message: msg})
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
