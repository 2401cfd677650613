package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/timescale"
)

// Violation is one broken rule at one moment.
type Violation struct {
	Time    time.Time `json:"time"`
	Rule    string    `json:"rule"`
	Objects []string  `json:"objects"`
	Message string    `json:"message"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s: %s [%s]", v.Time.UTC().Format("15:04:05.000"), v.Rule, v.Message, strings.Join(v.Objects, ", "))
}

// Params are what the rules need to know of the run.
type Params struct {
	Strategy             scenario.Strategy
	ControlPlaneReplicas int
	Workers              int
	FromVersion          string
	ToVersion            string
	// ToCoreDNS is the CoreDNS tag KCP is asked for at the end (its
	// dns.imageTag; "": KCP leaves CoreDNS alone and end-coredns is n/a);
	// ToEtcd the etcd tag the new version's kubeadm runs, "" where etcd
	// members carry no image (CAPI's in-memory provider): end-etcd is
	// then n/a.
	ToCoreDNS, ToEtcd string
	// Expect is the scenario's, its durations in wall time at the run's
	// scale (scenario.Scenario.AtScale), as params.json keeps them.
	Expect scenario.Expect
	// HostsVisible: the provider keeps hosts as BareMetalHosts (the
	// host rules mean nothing for a provider without them).
	HostsVisible bool
	// RBACEnforced: every manager ran as its own ServiceAccount with only
	// its config/rbac (the runner's plane always does; its refusals are
	// KindForbidden entries).
	RBACEnforced bool
	// SparesVisible: the provider marks its spare hosts with a label the
	// runner knows (its config's hosts.spareLabel).
	SparesVisible bool
	// HostData: the runner recorded persistent-data markers.
	HostData bool
	// OSTreeHosts: some of the lab's hosts keep their OS as OSTree
	// deployments, and the runner recorded an admin's /etc edit on each.
	OSTreeHosts bool
	// WorkloadData: the runner recorded objects it wrote into the
	// workload cluster.
	WorkloadData bool
	// Apps: the workload cluster ran the application (pods, budget), so
	// the drain and budget rules can judge it.
	Apps bool
	// AddonPods: the workload cluster runs the add-ons' pods (the lab's
	// controllers roll them), so end-kube-proxy and end-coredns judge the
	// images the pods run, not only the templates KCP wrote.
	AddonPods bool `json:",omitempty"`
	// EtcdOnHosts: etcd's state comes from the members on the hosts (the
	// lab's workload events); otherwise etcd-quorum reads the members'
	// Nodes.
	EtcdOnHosts bool
	// MaxAPIOutage is the longest the workload API may be unavailable
	// during the upgrade, in wall time (the timeline's): the scenario's
	// lab-time bound at the run's scale (scenario.Scenario.AtScale).
	MaxAPIOutage time.Duration
	// PowerCuts: the scenario cuts hosts' power on purpose (a powerLoss
	// fault), so clean-shutdowns does not judge it.
	PowerCuts bool `json:",omitempty"`
	// Scale is the run's time scale, so that notes and messages give lab
	// time beside the timeline's wall time (0: wall time only).
	Scale timescale.Scale `json:",omitempty"`
	// Stopped is why the run stopped early ("" when it did not): the
	// rules it never reached are NotRun (see Stopped).
	Stopped string `json:",omitempty"`
}

// ParamsFor is the Params of a scenario run against the reference
// provider.
func ParamsFor(s *scenario.Scenario) Params {
	return Params{Strategy: s.Strategy, ControlPlaneReplicas: s.Cluster.ControlPlane.Replicas, Workers: s.Cluster.Workers.Replicas, FromVersion: s.From.Version, ToVersion: s.To.Version,
		Expect: s.Expect, HostsVisible: true, HostData: true, WorkloadData: true, Apps: true, AddonPods: true, EtcdOnHosts: true, MaxAPIOutage: s.APIOutageBound(),
		PowerCuts: s.CutsPower()}
}

// Rule is one expectation. During judges every moment of the replay,
// End the final state; either may be nil.
type Rule struct {
	Name string
	// Group is the kind of promise, for the report's columns.
	Group Group
	// Why is what the rule protects, for the report.
	Why     string
	Applies func(Params) bool
	During  func(*State, Params) []Violation
	End     func(*State, Params) []Violation
	// Note says what the rule saw (figures, the cases it excused), for
	// the report, whatever the verdict.
	Note func(*State, Params) string
	// Exercised says whether what the rule judges happened in the run (a
	// host deprovisioned, a Machine deleted); a rule that held without
	// it is NotExercised, not a pass. nil: every run exercises it.
	Exercised func(*State, Params) bool
	// Span is what End judges: the state the run ends in (the default),
	// or what happened over the upgrade or the whole run. A run that
	// stopped early never reached its end state, but has its history
	// judged as far as it got (see Stopped).
	Span Span
}

// Span is the part of a run an End rule judges.
type Span int

const (
	// EndState is where the run ends: Machines, nodes, data, hosts.
	EndState Span = iota
	// UpgradeHistory is what happened from the upgrade step on (the
	// workload API's outages).
	UpgradeHistory
	// RunHistory is what happened over the whole run (the requests the
	// API server refused the managers).
	RunHistory
)

// Group is a kind of rule.
type Group string

const (
	// GroupRollout is CAPI's invariants during a rollout, judged at
	// every moment.
	GroupRollout Group = "rollout"
	// GroupEnd judges where CAPI and the cluster end.
	GroupEnd Group = "end"
	// GroupWorkload judges what the cluster's users see: its API, their
	// applications and data.
	GroupWorkload Group = "workload"
	// GroupHost judges the hosts under the Machines: binding, wipes,
	// reuse, spares and what their disks keep.
	GroupHost Group = "host"
)

// Groups are the groups in report order.
var Groups = []Group{GroupRollout, GroupEnd, GroupWorkload, GroupHost}

// Status of a rule in one run.
type Status string

const (
	Pass          Status = "pass"
	Fail          Status = "fail"
	NotApplicable Status = "n/a"
	// ExpectedFail is a rule the scenario's faults were to break, and did
	// (expect.brokenRules): its violations show what the fault did.
	ExpectedFail Status = "expected fail"
	// NotExercised is a rule that applies and held, but what it judges
	// never happened in the run (no host was deprovisioned, no Machine
	// deleted): it could not have failed, so it did not pass.
	NotExercised Status = "not exercised"
	// NotRun is a rule the run never reached: it stopped before its
	// upgrade (every rule), or before its end (the rules of its end).
	NotRun Status = "not run"
)

// Result is one rule's verdict.
type Result struct {
	Rule       string      `json:"rule"`
	Why        string      `json:"why"`
	Status     Status      `json:"status"`
	Note       string      `json:"note,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

// Run replays the timeline through every rule. A rule's violation is
// reported once per set of objects (the first moment it broke).
func Run(entries []timeline.Entry, p Params) []Result {
	sorted := replayOrder(entries)
	results := make([]Result, len(Rules))
	seen := make([]map[string]bool, len(Rules))
	for i, r := range Rules {
		results[i] = Result{Rule: r.Name, Why: r.Why, Status: Pass}
		seen[i] = map[string]bool{}
		if r.Applies != nil && !r.Applies(p) {
			results[i].Status = NotApplicable
		}
	}
	add := func(i int, vs []Violation) {
		for _, v := range vs {
			v.Rule = Rules[i].Name
			key := strings.Join(v.Objects, ",")
			if seen[i][key] {
				continue
			}
			seen[i][key] = true
			results[i].Violations = append(results[i].Violations, v)
			results[i].Status = Fail
		}
	}
	s := replay(sorted, func(s *State, poll []timeline.Entry) {
		for _, e := range poll {
			s.Entry = e
			for i, r := range Rules {
				if r.During != nil && results[i].Status != NotApplicable {
					add(i, r.During(s, p))
				}
			}
		}
	})
	for i, r := range Rules {
		if r.End != nil && results[i].Status != NotApplicable {
			add(i, r.End(s, p))
		}
		if r.Note != nil && results[i].Status != NotApplicable {
			results[i].Note = r.Note(s, p)
		}
		if r.Exercised != nil && results[i].Status == Pass && !r.Exercised(s, p) {
			results[i].Status = NotExercised
		}
	}
	agree(s, p, results)
	if p.Stopped != "" {
		results = Stopped(results, entries, p.Stopped)
	}
	return expectBroken(s, p, results)
}

// expectBroken turns the failures the scenario's faults were to cause
// into expected ones, and a rule that was to break and did not into a
// failure: the fault did not do what the scenario says.
func expectBroken(s *State, p Params, results []Result) []Result {
	for _, name := range p.Expect.BrokenRules {
		broke := func(r *Result, msg string) {
			r.Status = Fail
			r.Violations = append(r.Violations, Violation{Time: s.Now, Rule: r.Rule, Objects: []string{"Scenario/expect.brokenRules"}, Message: msg})
		}
		found := false
		for i := range results {
			r := &results[i]
			if r.Rule != name {
				continue
			}
			found = true
			switch r.Status {
			case Fail:
				r.Status = ExpectedFail
			case Pass:
				broke(r, "the scenario's fault was to break this rule, and it held: the fault did not do what the scenario says")
			case NotExercised:
				broke(r, "the scenario's fault was to break this rule, but what it judges never happened in the run")
			case NotApplicable:
				broke(r, "the scenario expects this rule broken, but it does not apply to the run")
			}
		}
		if !found {
			r := Result{Rule: name, Why: "named in expect.brokenRules"}
			broke(&r, "expect.brokenRules names "+name+", which is no rule (docs/CONFORMANCE.md lists them)")
			results = append(results, r)
		}
	}
	for _, name := range p.Expect.MayBreak {
		for i := range results {
			if results[i].Rule == name && results[i].Status == Fail {
				results[i].Status = ExpectedFail
			}
		}
	}
	return results
}

// replay applies the sorted entries poll by poll and calls afterPoll
// after each. The changes of one poll (one time) are one observation:
// all of them are applied before any is judged. Judged one by one, a
// Machine seen deleting and its replacement seen available in the same
// poll would replay, in whichever order, as a moment one of them never
// had.
func replay(sorted []timeline.Entry, afterPoll func(s *State, poll []timeline.Entry)) *State {
	s := newState()
	for start := 0; start < len(sorted); {
		end := start
		for end < len(sorted) && sorted[end].Time.Equal(sorted[start].Time) {
			s.apply(sorted[end])
			end++
		}
		s.pollEntries = sorted[start:end]
		s.afterPoll()
		afterPoll(s, sorted[start:end])
		start = end
	}
	return s
}

// replayOrder is the entries in the order the replay applies them.
// Changes seen in one poll share a time and their real order is
// unknown: objects gone come first, so the replay never shows a deleted
// Machine beside its replacement (see monitor.Recorder.diff).
func replayOrder(entries []timeline.Entry) []timeline.Entry {
	sorted := append([]timeline.Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return gone(a) && !gone(b)
	})
	return sorted
}

func gone(e timeline.Entry) bool { return e.New == nil && e.Old != nil }

// Stopped marks what a run that stopped early (why) never reached as
// NotRun, with the reason as its note: a rule of the end state (and
// capi-agrees, which holds the end rules against CAPI) always; a rule of
// the upgrade's history when the upgrade never began; any other rule
// that held, when the upgrade never began. A failure of a rule judged at
// every moment or over the run's history stands: a violation seen is
// real (a manager refused for want of RBAC may be why the run stopped).
func Stopped(results []Result, entries []timeline.Entry, why string) []Result {
	upgraded := slices.ContainsFunc(entries, func(e timeline.Entry) bool { return e.Kind == timeline.KindStep && e.Name == StepUpgrade })
	note := "the run stopped before its upgrade: " + why
	if upgraded {
		note = "the run stopped before its end: " + why
	}
	out := append([]Result(nil), results...)
	for i, r := range out {
		rule, known := ruleNamed(r.Rule)
		if !known || r.Status == NotApplicable {
			continue
		}
		failed := r.Status == Fail || r.Status == ExpectedFail
		switch {
		case rule.During == nil && rule.Span == EndState,
			rule.Span == UpgradeHistory && !upgraded,
			!upgraded && !failed:
			out[i] = Result{Rule: r.Rule, Why: r.Why, Status: NotRun, Note: note}
		}
	}
	return out
}

func ruleNamed(name string) (Rule, bool) {
	for _, r := range Rules {
		if r.Name == name {
			return r, true
		}
	}
	return Rule{}, false
}

// Failed is the violations of every failed rule, in time order (an
// expected failure is not one).
func Failed(results []Result) []Violation {
	var out []Violation
	for _, r := range results {
		if r.Status == ExpectedFail {
			continue
		}
		out = append(out, r.Violations...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// Summary counts the verdicts and names the rules that did not pass or
// fail outright (not exercised, expected fail), for a run's log and its
// JUnit test case: "24 pass, 4 not exercised (deletion-order, ...), 3 n/a".
func Summary(results []Result) string {
	byStatus := map[Status][]string{}
	for _, r := range results {
		byStatus[r.Status] = append(byStatus[r.Status], r.Rule)
	}
	var parts []string
	for _, st := range []Status{Pass, Fail, ExpectedFail, NotExercised, NotRun, NotApplicable} {
		rules := byStatus[st]
		if len(rules) == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", len(rules), st)
		if st != Pass && st != NotApplicable && st != NotRun {
			part += " (" + strings.Join(rules, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// labTime shows a wall-time span of the timeline as lab time, with the
// wall time beside it: "2m0s lab (1.2s wall)"; without a scale, wall
// time alone.
func (p Params) labTime(wall time.Duration) string {
	if p.Scale <= 0 {
		return wall.Round(time.Millisecond).String()
	}
	lab := time.Duration(float64(wall) / float64(p.Scale))
	return fmt.Sprintf("%s lab (%s wall)", lab.Round(time.Second), wall.Round(time.Millisecond))
}
