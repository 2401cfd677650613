package check

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// State is the world as the timeline tells it at one moment: each kind's
// objects by name with their latest summary, and the steps taken so far.
type State struct {
	Now     time.Time
	Objects map[string]map[string]map[string]string
	// Changed is when each object ("Kind/name") last changed.
	Changed map[string]time.Time
	Steps   map[string]time.Time
	// Created and Deleted are the objects that appeared and went away
	// after the "upgrade" step ("Kind/name").
	Created, Deleted []string
	// Entry is the change just applied, and pollEntries every change of
	// its poll.
	Entry       timeline.Entry
	pollEntries []timeline.Entry
	// Before is every object's summary at the "upgrade" step.
	Before map[string]map[string]map[string]string
	// LastConsumer is the last machine each host was bound to, and
	// Reprovisioned the hosts deprovisioned after the "upgrade" step.
	LastConsumer  map[string]string
	Reprovisioned map[string]bool
	// APIOutages are the spans the workload API was unavailable during
	// the upgrade (a poll that failed to read, until one that did);
	// apiDownSince is when the open one began, and apiReadFrom when its
	// first failing read did.
	APIOutages   []Outage
	apiDownSince time.Time
	apiReadFrom  time.Time
	// apiSeen: the API's state was known during the upgrade (the
	// recorder writes changes only: one that never changes is one entry,
	// before the upgrade).
	apiSeen bool
	// apiDownCause is what the workload said when its VIP last closed.
	apiDownCause string
	// lab is the API as the lab's workload declares it (its VIP's events
	// and etcd's health), at the moments it changed: exact, whatever
	// the time scale, where polls see an outage only to a poll's
	// precision.
	lab labAPI
	// workloadEvents are the reasons of the workload's events during
	// the upgrade; nodeStops counts its nodes stopped, excusedDrains the
	// nodes stopped undrained after CAPI's nodeDrainTimeout.
	workloadEvents []string
	// nodeDue are the Machines seen leaving an in-place update in a poll
	// whose Node read still showed another kubelet, to be judged against
	// the next poll's Node (specMatchesHost).
	nodeDue       map[string]*nodeDue
	nodeStops     int
	excusedDrains []string
	// drainGaveUp are the nodes whose drain CAPI gave up on (their
	// Machine's nodeDrainTimeout passed); budgets are the application's
	// budgets as afterPoll follows them.
	drainGaveUp map[string]bool
	budgets     map[string]*budgetTrack
	// podNodes is the last node each pod was seen on; excusedBudgets
	// the budget drops CAPI's nodeDrainTimeout caused.
	podNodes       map[string]string
	excusedBudgets []string
	// scaledDown are the pods their ReplicaSet deleted during the
	// upgrade (a Deployment's own rollout, which no budget governs);
	// rolledOut those of them a budget counted as it lost them.
	scaledDown map[string]bool
	rolledOut  int
	// undrainedStops are the nodes of this poll stopped with pods left.
	undrainedStops []string
	// stoppedWith: each node whose host is off now (its pods run not,
	// whatever the API, which a lost quorum freezes, still says), with the
	// pods a drain moves that it still ran as it stopped (its NodeStopped
	// event names them).
	stoppedWith map[string]map[string]bool
	// shutdowns: when each host's graceful shutdown under way began.
	shutdowns map[string]time.Time
	// cuts: for each host, its last power-off that came before its
	// graceful shutdown finished, and how long that shutdown had run
	// (keyed by host and found by the entry's time, as a poll's rules run
	// after all its entries are applied).
	cuts map[string]cutShutdown
	// excusedCuts are the hosts powered off mid-shutdown during the
	// upgrade with their Machine deleting or gone.
	excusedCuts []string
	// hostKubelet: for each host, the Kubernetes version of the image it
	// last booted from its disk ("" or absent: unknown, or it last
	// booted a ramdisk).
	hostKubelet map[string]string
	// foundUnhealthy: the Machines a MachineHealthCheck has found
	// unhealthy at some point; their owner may remediate one on that
	// verdict after it recovered.
	foundUnhealthy map[string]bool
	// Exercise counts what happened that rules judge (see Rule.Exercised).
	Exercise Exercise
}

// Exercise is what happened in a run that a rule needs to have happened
// to mean anything.
type Exercise struct {
	// Deprovisions: hosts that started deprovisioning; of them,
	// ControlPlaneDeprovisions served a control-plane Machine last.
	Deprovisions, ControlPlaneDeprovisions int
	// Deletions: Machines that started deleting after the upgrade step
	// (each a choice of which Machine goes).
	Deletions int
	// ControlPlaneDeletions: control-plane Machines that started
	// deleting at any time.
	ControlPlaneDeletions int
	// UpdateFailures: Machines whose in-place update CAPI reported
	// failed (Updating, InPlaceUpdateFailed) after the upgrade step.
	UpdateFailures int
	// Shutdowns: graceful shutdowns of hosts that began after the
	// upgrade step.
	Shutdowns int
	// ClusterPauses: times a Cluster became paused.
	ClusterPauses int
}

// budgetTrack follows one budget across polls: its healthy pods and
// whether it is below its desired count.
type budgetTrack struct {
	healthy map[string]bool
	low     bool
	// breach is set by the poll that took the budget below without
	// excuse.
	breach *Violation
}

// Outage is one span of an unavailable workload API, and why.
type Outage struct {
	From, To time.Time
	Why      string
	// ReadFrom, for an outage the polls saw, is when the first failing
	// read began (From is when its poll was stamped; zero: at From).
	ReadFrom time.Time
}

// upgrading: between the upgrade and done steps.
func (s *State) upgrading() bool { return s.Before != nil && s.Steps[StepDone].IsZero() }

func newState() *State {
	return &State{Objects: map[string]map[string]map[string]string{}, Steps: map[string]time.Time{},
		LastConsumer: map[string]string{}, Reprovisioned: map[string]bool{}, drainGaveUp: map[string]bool{}, budgets: map[string]*budgetTrack{},
		Changed: map[string]time.Time{}, podNodes: map[string]string{}, stoppedWith: map[string]map[string]bool{}, shutdowns: map[string]time.Time{}, cuts: map[string]cutShutdown{}, foundUnhealthy: map[string]bool{}, nodeDue: map[string]*nodeDue{}, hostKubelet: map[string]string{}, scaledDown: map[string]bool{}}
}

// count records what the entry did that a rule judges (before the
// entry is applied: a host's last consumer is known from earlier ones).
func (s *State) count(e timeline.Entry) {
	if e.Kind == vocab.KindMachine && e.New != nil && e.New[vocab.FieldDeleting] != "" && e.Old[vocab.FieldDeleting] == "" {
		if e.New[vocab.FieldControlPlane] == "true" {
			s.Exercise.ControlPlaneDeletions++
		}
		if s.Before != nil {
			s.Exercise.Deletions++
		}
	}
	if e.Kind == vocab.KindMachine && e.New != nil && e.New[vocab.FieldUpdateFailed] != "" && e.Old[vocab.FieldUpdateFailed] == "" && s.Before != nil {
		s.Exercise.UpdateFailures++
	}
	if startsDeprovisioning(e) {
		s.Exercise.Deprovisions++
		consumer := e.New[vocab.FieldConsumer]
		if consumer == "" {
			consumer = s.LastConsumer[e.Name]
		}
		if consumer != "" && len(s.machines(func(m map[string]string) bool {
			return m[vocab.FieldInfra] == consumer && m[vocab.FieldControlPlane] == "true"
		})) > 0 {
			s.Exercise.ControlPlaneDeprovisions++
		}
	}
}

// apply moves the state past one entry.
func (s *State) apply(e timeline.Entry) {
	s.Now, s.Entry = e.Time, e
	s.Changed[e.Kind+"/"+e.Name] = e.Time
	s.count(e)
	if e.Kind == timeline.KindStep {
		s.applyStep(e)
		return
	}
	if e.Kind == vocab.KindWorkloadEvent {
		s.applyWorkloadEvent(e)
	}
	if e.Kind == timeline.KindLab {
		s.applyLab(e)
		return
	}
	if e.Kind == vocab.KindWorkloadAPI && s.upgrading() && e.New != nil {
		s.applyWorkloadAPI(e)
	}
	if e.Kind == vocab.KindCluster && e.New[vocab.FieldPaused] != "" && e.Old[vocab.FieldPaused] == "" {
		s.Exercise.ClusterPauses++
	}
	s.applyObject(e)
}

// cutShutdown is a power-off at a moment a graceful shutdown had run for
// ran.
type cutShutdown struct {
	at  time.Time
	ran time.Duration
}

// applyLab follows what each host booted, and its graceful shutdowns: a
// power-off that came before the shutdown under way on its host finished
// is a cut.
func (s *State) applyLab(e timeline.Entry) {
	switch {
	case e.New[vocab.FieldReason] == vocab.LabOSRunning && e.New[vocab.FieldLabSource] == vocab.LabSourceDisk:
		s.hostKubelet[e.Name] = e.New[vocab.FieldKubernetesVersion]
	case e.New[vocab.FieldReason] == vocab.LabOSRunning:
		delete(s.hostKubelet, e.Name)
	case e.New[vocab.FieldReason] == vocab.LabOSShuttingDown:
		s.shutdowns[e.Name] = e.Time
		if s.upgrading() {
			s.Exercise.Shutdowns++
		}
	case e.New[vocab.FieldReason] == vocab.LabOSShutdown:
		delete(s.shutdowns, e.Name)
	case e.New[vocab.FieldLabKind] == vocab.LabKindPower && e.New[vocab.FieldPower] == vocab.LabPowerOff:
		began, ok := s.shutdowns[e.Name]
		delete(s.shutdowns, e.Name)
		switch {
		case !ok:
		case len(s.liveMachines(e.Name)) == 0:
			// Its Machine is deleting or gone (a remediation) and its
			// disk is to be wiped: the provisioner's power-off costs
			// nothing.
			if s.upgrading() {
				s.excusedCuts = append(s.excusedCuts, e.Name)
			}
		default:
			s.cuts[e.Name] = cutShutdown{at: e.Time, ran: e.Time.Sub(began)}
		}
	}
}

// applyStep records a runner step: the upgrade's start takes the
// before-picture, its end closes an outage still open.
func (s *State) applyStep(e timeline.Entry) {
	if e.Name == StepDone && !s.apiDownSince.IsZero() {
		why := "still unavailable when the upgrade ended"
		if s.apiDownCause != "" {
			why += ": " + s.apiDownCause
		}
		s.APIOutages = append(s.APIOutages, Outage{From: s.apiDownSince, To: e.Time, Why: why, ReadFrom: s.apiReadFrom})
		s.apiDownSince = time.Time{}
	}
	if e.Name == StepDone {
		s.lab.end(e.Time)
	}
	s.Steps[e.Name] = e.Time
	if e.Name == StepUpgrade {
		s.lab.begin(e.Time)
		s.Before = copyObjects(s.Objects)
		if a := s.get(vocab.KindWorkloadAPI, "api"); a != nil {
			s.apiSeen = true
			if a[vocab.FieldAPIAvailable] == "false" {
				s.apiDownSince = e.Time
				s.apiReadFrom, _ = time.Parse(time.RFC3339Nano, a[vocab.FieldAPIReadFrom])
			}
		}
	}
}

// applyWorkloadEvent records why the workload API went away and, during
// the upgrade, the nodes that stopped and the pods still on them.
func (s *State) applyWorkloadEvent(e timeline.Entry) {
	reason := e.New[vocab.FieldReason]
	if reason == vocab.EventAPIUnavailable {
		s.apiDownCause = e.New[vocab.FieldMessage]
	}
	s.lab.follow(e, s.upgrading())
	if !s.upgrading() {
		return
	}
	s.workloadEvents = append(s.workloadEvents, reason)
	switch reason {
	case vocab.EventNodeStarted:
		delete(s.stoppedWith, e.Name)
	case vocab.EventPodScaledDown:
		pod := e.New["pod"]
		s.scaledDown[pod[strings.LastIndex(pod, "/")+1:]] = true
	case vocab.EventNodeStopped:
		with := map[string]bool{}
		for _, p := range strings.Split(e.New["pods"], ",") {
			if p != "" {
				with[p[strings.LastIndex(p, "/")+1:]] = true
			}
		}
		s.stoppedWith[e.Name] = with
		s.nodeStops++
		if e.New["pods"] != "" {
			s.undrainedStops = append(s.undrainedStops, e.Name)
		}
	}
}

// applyWorkloadAPI opens an outage when the workload API stops answering
// during the upgrade and closes it, with its cause, when it answers again.
func (s *State) applyWorkloadAPI(e timeline.Entry) {
	s.apiSeen = true
	down := e.New[vocab.FieldAPIAvailable] == "false"
	switch {
	case down && s.apiDownSince.IsZero():
		s.apiDownSince = e.Time
		s.apiReadFrom, _ = time.Parse(time.RFC3339Nano, e.New[vocab.FieldAPIReadFrom])
	case !down && !s.apiDownSince.IsZero():
		why := ""
		if e.Old != nil {
			why = e.Old[vocab.FieldAPIError]
		}
		if s.apiDownCause != "" {
			why += ": " + s.apiDownCause
			s.apiDownCause = ""
		}
		s.APIOutages = append(s.APIOutages, Outage{From: s.apiDownSince, To: e.Time, Why: why, ReadFrom: s.apiReadFrom})
		s.apiDownSince, s.apiReadFrom = time.Time{}, time.Time{}
	}
}

// applyObject puts the entry's object as it now is into the state, and
// during the upgrade notes what was created, deleted and reprovisioned.
func (s *State) applyObject(e timeline.Entry) {
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
	if e.Kind == vocab.KindMachine && e.New[vocab.FieldHealthCheck] == "False" {
		s.foundUnhealthy[e.Name] = true
	}
	if e.Kind == vocab.KindHost && e.New != nil {
		if c := e.New[vocab.FieldConsumer]; c != "" {
			s.LastConsumer[e.Name] = c
		}
		if upgrading && e.New[vocab.FieldState] == "deprovisioning" {
			s.Reprovisioned[e.Name] = true
		}
	}
}

// nodeDue is a Machine's end of update whose Node is judged a poll
// later: the version the Machine then said, its Node, and whether the
// poll judging it has come.
type nodeDue struct {
	version, node string
	at            time.Time
	judging       bool
}

// dueNodeChecks moves the Node checks of Machines' update ends along by
// one poll: those of an earlier poll are judged at this one, those
// judged are done, and a Machine that left its update in this poll while
// its Node read showed another kubelet waits for the next poll. A moment
// that is no poll (vocab.PolledKinds: a step, a lab event) moves nothing:
// its Node is the one read before. A poll's Node read came after every
// earlier poll's Machine read.
func (s *State) dueNodeChecks() {
	if !slices.ContainsFunc(s.pollEntries, func(e timeline.Entry) bool { return slices.Contains(vocab.PolledKinds, e.Kind) }) {
		return
	}
	for name, d := range s.nodeDue {
		if d.judging {
			delete(s.nodeDue, name)
		} else if d.at.Before(s.Now) {
			d.judging = true
		}
	}
	for _, e := range s.pollEntries {
		if e.Kind != vocab.KindMachine || e.Old[vocab.FieldUpdating] == "" || e.New == nil || e.New[vocab.FieldUpdating] != "" ||
			e.New[vocab.FieldDeleting] != "" {
			continue
		}
		version, node := e.New[vocab.FieldVersion], e.New[vocab.FieldNode]
		if kubelet := s.get(vocab.KindNode, node)[vocab.FieldKubelet]; node != "" && kubelet != "" && kubelet != version {
			s.nodeDue[e.Name] = &nodeDue{version: version, node: node, at: s.Now}
		}
	}
}

// afterPoll brings what rules follow across moments up to the poll just
// applied: the drains CAPI gave up on, and each budget's drop below its
// desired count with its cause.
func (s *State) afterPoll() {
	s.dueNodeChecks()
	for _, m := range s.names(vocab.KindMachine) {
		sum := s.get(vocab.KindMachine, m)
		started, err := time.Parse(time.RFC3339, sum[vocab.FieldDrainStarted])
		timeout := time.Duration(num(sum, vocab.FieldDrainTimeout)) * time.Second
		if err == nil && timeout > 0 && sum[vocab.FieldNode] != "" && !s.Now.Before(started.Add(timeout)) {
			s.drainGaveUp[sum[vocab.FieldNode]] = true
		}
	}
	for _, node := range s.undrainedStops {
		if s.drainGaveUp[node] {
			s.excusedDrains = append(s.excusedDrains, node)
		}
	}
	s.undrainedStops = nil
	for _, b := range s.names(vocab.KindBudget) {
		t := s.budgets[b]
		if t == nil {
			t = &budgetTrack{healthy: map[string]bool{}}
			s.budgets[b] = t
		}
		t.breach = nil
		now := map[string]bool{}
		for _, pod := range s.budgetPods(b) {
			if sum := s.get(vocab.KindPod, pod); healthy(sum) && !s.stopped(sum[vocab.FieldNode]) {
				now[pod] = true
			}
		}
		desired := num(s.get(vocab.KindBudget, b), vocab.FieldDesired)
		var lost []string
		excused := true
		for pod := range t.healthy {
			if now[pod] {
				continue
			}
			if s.scaledDown[pod] {
				// Its ReplicaSet deleted it: the Deployment's rollout
				// or scale-down, which a budget does not govern (the
				// Deployment's strategy does).
				s.rolledOut++
				continue
			}
			if with, stopped := s.stoppedWith[s.podNodes[pod]]; stopped && !with[pod] {
				// The workload says the pod was no longer on its node
				// when the node stopped (evicted and gone between two
				// polls, the last of which still listed it): it left by
				// an eviction the budget allowed, not with the node.
				continue
			}
			lost = append(lost, pod)
			excused = excused && s.drainGaveUp[s.podNodes[pod]]
		}
		sort.Strings(lost)
		switch {
		case len(now) >= desired:
			t.low = false
		case len(lost) > 0:
			// A drop (or a further one while below): its pods' nodes say
			// whether CAPI's nodeDrainTimeout let them go.
			if excused {
				s.excusedBudgets = append(s.excusedBudgets, b+" ("+strings.Join(lost, ", ")+")")
			} else if s.upgrading() {
				t.breach = &Violation{Time: s.Now, Objects: append(objs(vocab.KindPod, lost), vocab.KindBudget+"/"+b),
					Message: fmt.Sprintf("budget %s has %d healthy pods, it needs %d (lost %s)", b, len(now), desired, strings.Join(lost, ", "))}
			}
			t.low = true
		}
		t.healthy = now
	}
	for _, pod := range s.names(vocab.KindPod) {
		if n := s.get(vocab.KindPod, pod)[vocab.FieldNode]; n != "" {
			s.podNodes[pod] = n
		}
	}
}

// stopped says whether node's host is off (it stopped and did not start
// again).
func (s *State) stopped(node string) bool {
	_, ok := s.stoppedWith[node]
	return ok
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
	// StepRevert: the update failed and the runner reverts the spec
	// (outcome reverted).
	StepRevert = "revert"
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

// liveMachines are the Machines, not deleting, of the host's last
// consumer.
func (s *State) liveMachines(host string) []string {
	consumer := s.LastConsumer[host]
	return s.machines(func(m map[string]string) bool {
		return consumer != "" && m[vocab.FieldInfra] == consumer && m[vocab.FieldDeleting] == ""
	})
}

func num(sum map[string]string, field string) int {
	n, _ := strconv.Atoi(sum[field])
	return n
}

// machines returns the Machines for which keep holds, by name.
func (s *State) machines(keep func(map[string]string) bool) []string {
	var out []string
	for _, n := range s.names(vocab.KindMachine) {
		if keep(s.get(vocab.KindMachine, n)) {
			out = append(out, n)
		}
	}
	return out
}
