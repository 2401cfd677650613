// Package check validates a scenario's timeline against what CAPI
// promises and what the scenario expects, as etcd's robustness tests
// validate a recorded history: the timeline is replayed entry by entry,
// the continuous rules judge every moment, the final rules the end. A
// broken rule names the moment, the objects and the rule.
package check

import (
	"sort"
	"strconv"
	"time"

	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// State is the world as the timeline tells it at one moment: each kind's
// objects by name with their latest summary, and the steps taken so far.
type State struct {
	Now     time.Time
	Objects map[string]map[string]map[string]string
	Steps   map[string]time.Time
	// Created and Deleted are the objects that appeared and went away
	// after the "upgrade" step ("Kind/name").
	Created, Deleted []string
	// Entry is the change just applied.
	Entry timeline.Entry
	// Before is every object's summary at the "upgrade" step.
	Before map[string]map[string]map[string]string
	// LastConsumer is the last machine each host was bound to, and
	// Reprovisioned the hosts deprovisioned after the "upgrade" step.
	LastConsumer  map[string]string
	Reprovisioned map[string]bool
	// APIOutages are the spans the workload API was unavailable during
	// the upgrade (a poll that failed to read, until one that did);
	// apiDownSince is when the open one began.
	APIOutages   []Outage
	apiDownSince time.Time
	// apiSeen: the API's state was known during the upgrade (the
	// recorder writes changes only: one that never changes is one entry,
	// before the upgrade).
	apiSeen bool
	// apiDownCause is what the workload said when its VIP last closed.
	apiDownCause string
	// workloadEvents are the reasons of the workload's events during
	// the upgrade; nodeStops counts its nodes stopped, excusedDrains the
	// nodes stopped undrained after CAPI's nodeDrainTimeout.
	workloadEvents []string
	nodeStops      int
	excusedDrains  []string
}

// Outage is one span of an unavailable workload API, and why.
type Outage struct {
	From, To time.Time
	Why      string
}

// upgrading: between the upgrade and done steps.
func (s *State) upgrading() bool { return s.Before != nil && s.Steps[StepDone].IsZero() }

func newState() *State {
	return &State{Objects: map[string]map[string]map[string]string{}, Steps: map[string]time.Time{},
		LastConsumer: map[string]string{}, Reprovisioned: map[string]bool{}}
}

// apply moves the state past one entry.
func (s *State) apply(e timeline.Entry) {
	s.Now, s.Entry = e.Time, e
	if e.Kind == timeline.KindStep {
		if e.Name == StepDone && !s.apiDownSince.IsZero() {
			why := "still unavailable when the upgrade ended"
			if s.apiDownCause != "" {
				why += ": " + s.apiDownCause
			}
			s.APIOutages = append(s.APIOutages, Outage{From: s.apiDownSince, To: e.Time, Why: why})
			s.apiDownSince = time.Time{}
		}
		s.Steps[e.Name] = e.Time
		if e.Name == StepUpgrade {
			s.Before = copyObjects(s.Objects)
			if a := s.get(monitor.KindWorkloadAPI, "api"); a != nil {
				s.apiSeen = true
				if a[monitor.FieldAPIAvailable] == "false" {
					s.apiDownSince = e.Time
				}
			}
		}
		return
	}
	if e.Kind == monitor.KindWorkloadEvent && e.New[monitor.FieldReason] == workload.EventAPIUnavailable {
		s.apiDownCause = e.New[monitor.FieldMessage]
	}
	if e.Kind == monitor.KindWorkloadEvent && s.upgrading() {
		s.workloadEvents = append(s.workloadEvents, e.New[monitor.FieldReason])
		if e.New[monitor.FieldReason] == workload.EventNodeStopped {
			s.nodeStops++
			if e.New["pods"] != "" && s.drainTimedOut(e.Name) {
				s.excusedDrains = append(s.excusedDrains, e.Name)
			}
		}
	}
	if e.Kind == monitor.KindWorkloadAPI && s.upgrading() && e.New != nil {
		s.apiSeen = true
		down := e.New[monitor.FieldAPIAvailable] == "false"
		switch {
		case down && s.apiDownSince.IsZero():
			s.apiDownSince = e.Time
		case !down && !s.apiDownSince.IsZero():
			why := ""
			if e.Old != nil {
				why = e.Old[monitor.FieldAPIError]
			}
			if s.apiDownCause != "" {
				why += ": " + s.apiDownCause
				s.apiDownCause = ""
			}
			s.APIOutages = append(s.APIOutages, Outage{From: s.apiDownSince, To: e.Time, Why: why})
			s.apiDownSince = time.Time{}
		}
	}
	objs := s.Objects[e.Kind]
	if objs == nil {
		objs = map[string]map[string]string{}
		s.Objects[e.Kind] = objs
	}
	upgrading := s.Before != nil
	switch {
	case e.New == nil:
		delete(objs, e.Name)
		if upgrading {
			s.Deleted = append(s.Deleted, e.Object())
		}
	default:
		if _, ok := objs[e.Name]; !ok && upgrading {
			s.Created = append(s.Created, e.Object())
		}
		objs[e.Name] = e.New
	}
	if e.Kind == monitor.KindHost && e.New != nil {
		if c := e.New[monitor.FieldConsumer]; c != "" {
			s.LastConsumer[e.Name] = c
		}
		if upgrading && e.New[monitor.FieldState] == "deprovisioning" {
			s.Reprovisioned[e.Name] = true
		}
	}
}

func copyObjects(in map[string]map[string]map[string]string) map[string]map[string]map[string]string {
	out := map[string]map[string]map[string]string{}
	for kind, objs := range in {
		out[kind] = map[string]map[string]string{}
		for name, sum := range objs {
			out[kind][name] = sum
		}
	}
	return out
}

// Steps the runner records that rules refer to.
const (
	// StepUpgrade: the cluster was provisioned and the upgrade starts.
	StepUpgrade = "upgrade"
	// StepDone: the runner saw the upgrade finish (or gave up).
	StepDone = "done"
)

// names of a kind, sorted.
func (s *State) names(kind string) []string {
	var out []string
	for n := range s.Objects[kind] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *State) get(kind, name string) map[string]string { return s.Objects[kind][name] }

func num(sum map[string]string, field string) int {
	n, _ := strconv.Atoi(sum[field])
	return n
}

// machines returns the Machines for which keep holds, by name.
func (s *State) machines(keep func(map[string]string) bool) []string {
	var out []string
	for _, n := range s.names(monitor.KindMachine) {
		if keep(s.get(monitor.KindMachine, n)) {
			out = append(out, n)
		}
	}
	return out
}
