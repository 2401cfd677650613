package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// The rules about what an upgrade does to the workload cluster's users:
// its API staying up, its applications' budgets and drains, and etcd as
// the members on the hosts are.

// apiAvailability judges the workload API's outages during the upgrade
// against the scenario's bound (none for a control plane of three or
// more).
func apiAvailability(s *State, p Params) []Violation {
	var out []Violation
	for _, o := range s.judgedOutages() {
		if d := o.To.Sub(o.From); d > p.MaxAPIOutage {
			out = append(out, Violation{Time: o.From, Objects: []string{vocab.KindWorkloadAPI + "/api@" + o.From.UTC().Format("15:04:05.000")},
				Message: fmt.Sprintf("the workload API was unavailable for %s (%s), the scenario allows %s", p.labTime(d), or(o.Why, "reads failed"), p.labTime(p.MaxAPIOutage))})
		}
	}
	if !s.apiSeen {
		out = append(out, violation(s, "the workload API was never polled during the upgrade", vocab.KindWorkloadAPI+"/api")...)
	}
	return out
}

func apiAvailabilityNote(s *State, p Params) string {
	var total, longest time.Duration
	outages := s.judgedOutages()
	for _, o := range outages {
		d := o.To.Sub(o.From)
		total += d
		longest = max(longest, d)
	}
	source := "as the recorder's polls saw it"
	if s.lab.seen {
		source = "as the lab's VIP and etcd said"
	}
	return fmt.Sprintf("unavailable %s during the upgrade in %d outage(s), the longest %s (allowed %s), %s",
		p.labTime(total), len(outages), p.labTime(longest), p.labTime(p.MaxAPIOutage), source)
}

// budgetPods are the pods a budget selects (its selector's labels all on
// the pod), by name.
func (s *State) budgetPods(budget string) []string {
	sel := strings.Split(s.get(vocab.KindBudget, budget)[vocab.FieldSelector], ",")
	var out []string
	for _, name := range s.names(vocab.KindPod) {
		labels := "," + s.get(vocab.KindPod, name)[vocab.FieldLabels] + ","
		match := len(sel) > 0 && sel[0] != ""
		for _, kv := range sel {
			match = match && strings.Contains(labels, ","+kv+",")
		}
		if match {
			out = append(out, name)
		}
	}
	return out
}

func healthy(pod map[string]string) bool {
	return pod[vocab.FieldReady] == "true" && pod[vocab.FieldTerminating] == ""
}

// pdbRespected reports each poll that took a budget below its
// desiredHealthy pods (Ready, not terminating, on a node whose host
// runs) during the upgrade, naming
// the pods it lost (State.afterPoll follows the budgets). A drop whose
// pods were all on nodes whose drain CAPI gave up after nodeDrainTimeout
// is excused until the budget is whole again: CAPI documents that it
// deletes such a Machine anyway; pdbNote tells.
func pdbRespected(s *State, _ Params) []Violation {
	var out []Violation
	for _, b := range s.names(vocab.KindBudget) {
		if t := s.budgets[b]; t != nil && t.breach != nil {
			out = append(out, *t.breach)
		}
	}
	return out
}

func pdbNote(s *State, _ Params) string {
	evicted, refused := 0, 0
	for _, e := range s.workloadEvents {
		switch e {
		case vocab.EventEvicted:
			evicted++
		case vocab.EventEvictionDenied:
			refused++
		}
	}
	note := fmt.Sprintf("%d evictions granted, %d refused by a budget during the upgrade", evicted, refused)
	if len(s.excusedBudgets) > 0 {
		note += "; below budget after CAPI's nodeDrainTimeout passed (excused): " + strings.Join(s.excusedBudgets, "; ")
	}
	if s.rolledOut > 0 {
		note += fmt.Sprintf("; %d budgeted pod(s) deleted by their ReplicaSet (the Deployment's own rollout or scale-down, which no budget governs)", s.rolledOut)
	}
	return note
}

// drainedBeforeDisruption judges each node stopped during the upgrade
// (its host powered off: a reboot, a deprovisioning, a reset): no pod a
// drain moves may still be on it, unless CAPI's nodeDrainTimeout passed
// for its Machine. The workload names the pods left at that very moment.
func drainedBeforeDisruption(s *State, _ Params) []Violation {
	e := s.Entry
	if !s.upgrading() || e.Kind != vocab.KindWorkloadEvent || e.New[vocab.FieldReason] != vocab.EventNodeStopped || e.New["pods"] == "" {
		return nil
	}
	if s.drainGaveUp[e.Name] {
		return nil // excused, and noted (State.excusedDrains)
	}
	pods := strings.Split(e.New["pods"], ",")
	sort.Strings(pods)
	return violation(s, fmt.Sprintf("node %s stopped while it still ran %s (not drained)", e.Name, strings.Join(pods, ", ")),
		append(objs(vocab.KindPod, pods), vocab.KindNode+"/"+e.Name)...)
}

func drainedNote(s *State, _ Params) string {
	note := fmt.Sprintf("%d node stops during the upgrade", s.nodeStops)
	if len(s.excusedDrains) > 0 {
		note += "; drained only partly, CAPI's nodeDrainTimeout having passed: " + strings.Join(s.excusedDrains, ", ")
	}
	return note
}

// etcdHealthy judges etcd as the members on the hosts are (the lab's
// workload events): it must keep its quorum through the upgrade.
func etcdHealthy(s *State, _ Params) []Violation {
	e := s.Entry
	if !s.upgrading() || e.Kind != vocab.KindWorkloadEvent || e.New[vocab.FieldReason] != vocab.EventEtcdHealth {
		return nil
	}
	if h := e.New["health"]; h != vocab.EtcdHealthQuorum {
		return violation(s, e.New[vocab.FieldMessage], vocab.KindWorkloadEvent+"/"+e.Name)
	}
	return nil
}

// endApplication: the application's Deployment ends with every replica
// Ready and (where recorded) of its current template; an upgrade (or a
// failed one) that leaves a node cordoned or a budget's pods nowhere to
// go, or a rollout that never finished, shows here.
func endApplication(s *State, _ Params) []Violation {
	names := s.names(vocab.KindApp)
	if len(names) == 0 {
		return violation(s, "no application Deployment was seen in the workload cluster", vocab.KindApp)
	}
	var out []Violation
	for _, n := range names {
		d := s.get(vocab.KindApp, n)
		if d[vocab.FieldReadyCount] != d[vocab.FieldReplicas] {
			out = append(out, violation(s, fmt.Sprintf("Deployment %s ends with %s of %s replicas Ready", n, or(d[vocab.FieldReadyCount], "0"), d[vocab.FieldReplicas]), vocab.KindApp+"/"+n)...)
		} else if u, ok := d[vocab.FieldUpToDateCount]; ok && u != d[vocab.FieldReplicas] {
			out = append(out, violation(s, fmt.Sprintf("Deployment %s ends with %s of %s replicas of its current template: its rollout did not finish", n, u, d[vocab.FieldReplicas]), vocab.KindApp+"/"+n)...)
		}
	}
	return out
}
