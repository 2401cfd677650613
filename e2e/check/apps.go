package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// The rules about what an upgrade does to the workload cluster's users:
// its API staying up, its applications' budgets and drains, and etcd as
// the members on the hosts are.

// apiAvailability judges the workload API's outages during the upgrade
// against the scenario's bound (none for a control plane of three or
// more).
func apiAvailability(s *State, p Params) []Violation {
	var out []Violation
	for _, o := range s.APIOutages {
		if d := o.To.Sub(o.From); d > p.MaxAPIOutage {
			out = append(out, Violation{Time: o.From, Objects: []string{monitor.KindWorkloadAPI + "/api@" + o.From.UTC().Format("15:04:05.000")},
				Message: fmt.Sprintf("the workload API was unavailable for %s (%s), the scenario allows %s", d.Round(time.Millisecond), or(o.Why, "reads failed"), p.MaxAPIOutage)})
		}
	}
	if !s.apiSeen {
		out = append(out, violation(s, "the workload API was never polled during the upgrade", monitor.KindWorkloadAPI+"/api")...)
	}
	return out
}

func apiAvailabilityNote(s *State, p Params) string {
	var total, longest time.Duration
	for _, o := range s.APIOutages {
		d := o.To.Sub(o.From)
		total += d
		longest = max(longest, d)
	}
	return fmt.Sprintf("unavailable %s during the upgrade in %d outage(s), the longest %s (allowed %s)",
		total.Round(time.Millisecond), len(s.APIOutages), longest.Round(time.Millisecond), p.MaxAPIOutage)
}

// budgetPods are the pods a budget selects (its selector's labels all on
// the pod), by name.
func (s *State) budgetPods(budget string) []string {
	sel := strings.Split(s.get(monitor.KindBudget, budget)[monitor.FieldSelector], ",")
	var out []string
	for _, name := range s.names(monitor.KindPod) {
		labels := "," + s.get(monitor.KindPod, name)[monitor.FieldLabels] + ","
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
	return pod[monitor.FieldReady] == "true" && pod[monitor.FieldTerminating] == ""
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
	for _, b := range s.names(monitor.KindBudget) {
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
		case workload.EventEvicted:
			evicted++
		case workload.EventEvictionDenied:
			refused++
		}
	}
	note := fmt.Sprintf("%d evictions granted, %d refused by a budget during the upgrade", evicted, refused)
	if len(s.excusedBudgets) > 0 {
		note += "; below budget after CAPI's nodeDrainTimeout passed (excused): " + strings.Join(s.excusedBudgets, "; ")
	}
	return note
}

// drainedBeforeDisruption judges each node stopped during the upgrade
// (its host powered off: a reboot, a deprovisioning, a reset): no pod a
// drain moves may still be on it, unless CAPI's nodeDrainTimeout passed
// for its Machine. The workload names the pods left at that very moment.
func drainedBeforeDisruption(s *State, _ Params) []Violation {
	e := s.Entry
	if !s.upgrading() || e.Kind != monitor.KindWorkloadEvent || e.New[monitor.FieldReason] != workload.EventNodeStopped || e.New["pods"] == "" {
		return nil
	}
	if s.drainGaveUp[e.Name] {
		return nil // excused, and noted (State.excusedDrains)
	}
	pods := strings.Split(e.New["pods"], ",")
	sort.Strings(pods)
	return violation(s, fmt.Sprintf("node %s stopped while it still ran %s (not drained)", e.Name, strings.Join(pods, ", ")),
		append(objs(monitor.KindPod, pods), monitor.KindNode+"/"+e.Name)...)
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
	if !s.upgrading() || e.Kind != monitor.KindWorkloadEvent || e.New[monitor.FieldReason] != workload.EventEtcdHealth {
		return nil
	}
	if h := e.New["health"]; h != string(workload.HealthQuorum) {
		return violation(s, e.New[monitor.FieldMessage], monitor.KindWorkloadEvent+"/"+e.Name)
	}
	return nil
}

// endApplication: the application's Deployment ends with every replica
// Ready; an upgrade (or a failed one) that leaves a node cordoned or a
// budget's pods nowhere to go shows here.
func endApplication(s *State, _ Params) []Violation {
	names := s.names(monitor.KindApp)
	if len(names) == 0 {
		return violation(s, "no application Deployment was seen in the workload cluster", monitor.KindApp)
	}
	var out []Violation
	for _, n := range names {
		d := s.get(monitor.KindApp, n)
		if d[monitor.FieldReadyCount] != d[monitor.FieldReplicas] {
			out = append(out, violation(s, fmt.Sprintf("Deployment %s ends with %s of %s replicas Ready", n, or(d[monitor.FieldReadyCount], "0"), d[monitor.FieldReplicas]), monitor.KindApp+"/"+n)...)
		}
	}
	return out
}
