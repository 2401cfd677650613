package check

import (
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// threeNodes is a 3-node in-place upgrade with the application: web-a,
// web-b, web-c on nodes a, b, c under a budget that needs 2 healthy; the
// caller adds what happens during the upgrade.
func threeNodes(during func(h *history)) *history {
	h := newHistory()
	h.set(vocab.KindWorkloadAPI, "api", apiUp)
	h.set(vocab.KindBudget, "web", budget("app=web", 2))
	for _, n := range []string{"a", "b", "c"} {
		m := machine("v1.35.3", "u-"+n, n, true, "True")
		m[vocab.FieldNode] = n
		h.set(vocab.KindMachine, n, m)
		h.set(vocab.KindPod, "web-"+n, pod(n, "app=web", true, false))
	}
	h.step(StepUpgrade)
	during(h)
	h.step(StepDone)
	return h
}

var threeInPlace = func() Params {
	p := inPlace
	p.ControlPlaneReplicas, p.MaxAPIOutage = 3, 0
	return p
}()

func result(h *history, p Params, rule string) Result {
	for _, r := range Run(h.entries, p) {
		if r.Rule == rule {
			return r
		}
	}
	return Result{}
}

// A drain that evicts one pod at a time and waits for its replacement
// keeps the budget and stops each node empty.
func TestADrainThatKeepsTheBudgetPasses(t *testing.T) {
	h := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventEvicted})
		h.set(vocab.KindPod, "web-a", pod("a", "app=web", false, true))
		h.set(vocab.KindPod, "web-a", nil)
		h.set(vocab.KindPod, "web-d", pod("b", "app=web", true, false))
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": ""})
	})
	for _, rule := range []string{"pdb-respected", "drained-before-disruption", "api-availability"} {
		if r := result(h, threeInPlace, rule); r.Status != Pass {
			t.Errorf("%s: %s %v", rule, r.Status, r.Violations)
		}
	}
	if n := result(h, threeInPlace, "pdb-respected").Note; !strings.Contains(n, "1 evictions granted, 0 refused") {
		t.Errorf("pdb-respected note %q", n)
	}
	if n := result(h, threeInPlace, "api-availability").Note; !strings.Contains(n, "unavailable 0s during the upgrade in 0 outage(s)") {
		t.Errorf("api-availability note %q", n)
	}
}

func TestAppRulesBrokenOnPurpose(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		params     Params
		during     func(h *history)
		objects    []string
		message    string
	}{
		// The old extension drain: delete every pod of the node at once,
		// no Eviction API, no budget asked.
		{name: "a drain that deletes without eviction", rule: "pdb-respected", params: threeInPlace,
			during: func(h *history) {
				h.set(vocab.KindPod, "web-a", pod("a", "app=web", false, true))
				h.set(vocab.KindPod, "web-b", pod("b", "app=web", false, true))
			},
			objects: []string{"Pod/web-b", "PodDisruptionBudget/web"}, message: "budget web has 1 healthy pods, it needs 2 (lost web-b)"},
		{name: "two pods deleted in one moment", rule: "pdb-respected", params: threeInPlace,
			during: func(h *history) {
				h.set(vocab.KindPod, "web-a", pod("a", "app=web", false, true))
				h.sameMoment(vocab.KindPod, "web-b", pod("b", "app=web", false, true))
			},
			objects: []string{"Pod/web-a", "Pod/web-b", "PodDisruptionBudget/web"}, message: "budget web has 1 healthy pods, it needs 2 (lost web-a, web-b)"},
		// Two hosts lose power: their pods stop, though the API (no
		// quorum, no writes) still says they are Ready.
		{name: "two nodes lost at once", rule: "pdb-respected", params: threeInPlace,
			during: func(h *history) {
				h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": "apps/web-a"})
				h.sameMoment(vocab.KindWorkloadEvent, "b", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": "apps/web-b"})
			},
			objects: []string{"Pod/web-a", "Pod/web-b", "PodDisruptionBudget/web"}, message: "budget web has 1 healthy pods, it needs 2"},
		{name: "a node that stops undrained", rule: "drained-before-disruption", params: threeInPlace,
			during: func(h *history) {
				h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": "apps/web-a"})
			},
			objects: []string{"Node/a", "Pod/apps/web-a"}, message: "node a stopped while it still ran apps/web-a (not drained)"},
		{name: "an API outage with three control planes", rule: "api-availability", params: threeInPlace,
			during: func(h *history) {
				h.set(vocab.KindWorkloadAPI, "api", apiDown)
				h.set(vocab.KindWorkloadAPI, "api", apiUp)
			},
			message: "the workload API was unavailable for 100ms (connection refused), the scenario allows 0s"},
		{name: "a single node's outage past its bound", rule: "api-availability", params: func() Params { p := inPlace; p.MaxAPIOutage = 150 * time.Millisecond; return p }(),
			during: func(h *history) {
				h.set(vocab.KindWorkloadAPI, "api", apiDown)
				h.set(vocab.KindWorkloadAPI, "api", apiDown) // a later poll, still down
				h.set(vocab.KindWorkloadAPI, "api", apiUp)
			},
			message: "unavailable for 200ms (connection refused), the scenario allows 150ms"},
		{name: "etcd's quorum lost on the hosts", rule: "etcd-quorum", params: threeInPlace,
			during: func(h *history) {
				h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventEtcdHealth, "health": "no-quorum",
					vocab.FieldMessage: "etcd no-quorum (was quorum): a=running, b=wiped, c=wiped"})
			},
			objects: []string{"WorkloadEvent/wl"}, message: "etcd no-quorum (was quorum): a=running, b=wiped, c=wiped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := result(threeNodes(tc.during), tc.params, tc.rule)
			if r.Status != Fail || len(r.Violations) == 0 {
				t.Fatalf("%s: %+v; want it failed", tc.rule, r)
			}
			v := r.Violations[0]
			if tc.objects != nil && strings.Join(v.Objects, ",") != strings.Join(tc.objects, ",") || !strings.Contains(v.Message, tc.message) || v.Time.IsZero() {
				t.Fatalf("violation %s; want objects %v and %q", v, tc.objects, tc.message)
			}
		})
	}
}

// CAPI deletes a Machine whose drain a budget blocks once its
// nodeDrainTimeout passed, as it documents: the budget and the drain
// rules excuse it and say so.
func TestNodeDrainTimeoutExcusesAndIsReported(t *testing.T) {
	h := threeNodes(func(h *history) {
		m := machine("v1.35.3", "u-a", "a", true, "True")
		m[vocab.FieldNode], m[vocab.FieldDeleting] = "a", "true"
		m[vocab.FieldDrainTimeout] = "10"
		m[vocab.FieldDrainStarted] = h.t.Add(-20 * time.Second).UTC().Format(time.RFC3339)
		h.set(vocab.KindMachine, "a", m)
		h.set(vocab.KindWorkloadEvent, "b", map[string]string{vocab.FieldReason: vocab.EventEvictionDenied})
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": "apps/web-a"})
		h.set(vocab.KindPod, "web-a", pod("a", "app=web", false, false))
		h.set(vocab.KindPod, "web-b", pod("b", "app=web", false, true)) // b was not excused
	})
	drained := result(h, threeInPlace, "drained-before-disruption")
	if drained.Status != Pass || !strings.Contains(drained.Note, "nodeDrainTimeout having passed: a") {
		t.Fatalf("drained-before-disruption %s %v, note %q", drained.Status, drained.Violations, drained.Note)
	}
	pdb := result(h, threeInPlace, "pdb-respected")
	if pdb.Status != Fail || !strings.Contains(pdb.Violations[0].Message, "1 healthy pods") {
		t.Fatalf("a budget short because of a pod the timeout does not cover must fail: %s %v", pdb.Status, pdb.Violations)
	}
	if !strings.Contains(pdb.Note, "0 evictions granted, 1 refused") {
		t.Fatalf("pdb-respected note %q", pdb.Note)
	}
}

// The recorder writes a change only: an API up before the upgrade and
// through it is one entry, before the upgrade step.
func TestAnAPIUpThroughTheUpgradePasses(t *testing.T) {
	if r := result(threeNodes(func(*history) {}), threeInPlace, "api-availability"); r.Status != Pass {
		t.Fatalf("api-availability: %+v", r)
	}
}

func TestAnAPINeverPolledIsNoPass(t *testing.T) {
	h := newHistory()
	h.step(StepUpgrade)
	h.step(StepDone)
	if r := result(h, threeInPlace, "api-availability"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "never polled") {
		t.Fatalf("api-availability with no poll: %+v", r)
	}
}

// A fault's expected damage is reported as such; a fault that did no
// damage, or a rule that does not exist, fails the run.
func TestBrokenRulesTheScenarioExpects(t *testing.T) {
	outage := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventAPIUnavailable,
			vocab.FieldMessage: "the VIP refuses connections: the API server on a stopped and no other runs"})
		h.set(vocab.KindWorkloadAPI, "api", apiDown)
		h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventAPIAvailable,
			vocab.FieldMessage: "the VIP answers: kube-vip on b holds the VIP"})
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
	})
	p := threeInPlace
	p.Expect.BrokenRules = []string{"api-availability"}
	r := result(outage, p, "api-availability")
	if r.Status != ExpectedFail || !strings.Contains(r.Violations[0].Message, "(the VIP refuses connections: the API server on a stopped") {
		t.Fatalf("an outage the scenario expects: %s %v", r.Status, r.Violations)
	}
	for _, v := range Failed(Run(outage.entries, p)) {
		if v.Rule == "api-availability" {
			t.Fatalf("an expected failure counted as a failure: %v", v)
		}
	}
	if r := result(threeNodes(func(*history) {}), p, "api-availability"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "the fault did not do what the scenario says") {
		t.Fatalf("an expected break that did not happen: %s %v", r.Status, r.Violations)
	}
	// A rule the fault may break: an expected failure if it did, a pass
	// if it held.
	p.Expect.BrokenRules, p.Expect.MayBreak = nil, []string{"api-availability"}
	if r := result(outage, p, "api-availability"); r.Status != ExpectedFail {
		t.Fatalf("a rule that may break, broken: %s", r.Status)
	}
	if r := result(threeNodes(func(*history) {}), p, "api-availability"); r.Status != Pass {
		t.Fatalf("a rule that may break, held: %s", r.Status)
	}
	p.Expect.MayBreak = nil
	p.Expect.BrokenRules = []string{"etcd-quorm"}
	if r := result(outage, p, "etcd-quorm"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "which is no rule") {
		t.Fatalf("a misspelt rule: %+v", r)
	}
}

// A stalled upgrade is judged by what the fault broke, not by an end it
// was never to reach.
func TestAStalledUpgradeHasNoEnd(t *testing.T) {
	p := inPlace
	p.Expect.Outcome = scenario.Stalled
	st := statuses(Run(threeNodes(func(*history) {}).entries, p))
	for _, rule := range []string{"end-machines-up-to-date", "end-control-plane", "end-nodes-ready", "end-rolled-back", "capi-agrees", "same-hosts"} {
		if st[rule] != NotApplicable {
			t.Errorf("%s: %s on a stalled upgrade, want n/a", rule, st[rule])
		}
	}
}

// A budget that forbids every eviction, a drain CAPI gives up on after
// nodeDrainTimeout: the pod that goes with its node is excused, and said.
func TestABudgetLostToNodeDrainTimeoutIsExcused(t *testing.T) {
	h := newHistory()
	h.set(vocab.KindWorkloadAPI, "api", apiUp)
	h.set(vocab.KindBudget, "web", budget("app=web", 3))
	for _, n := range []string{"a", "b", "c"} {
		m := machine("v1.35.3", "u-"+n, n, false, "True")
		m[vocab.FieldNode] = n
		h.set(vocab.KindMachine, n, m)
		h.set(vocab.KindPod, "web-"+n, pod(n, "app=web", true, false))
	}
	h.step(StepUpgrade)
	m := machine("v1.35.3", "u-a", "a", false, "True")
	m[vocab.FieldNode], m[vocab.FieldDeleting], m[vocab.FieldDrainTimeout] = "a", "true", "10"
	m[vocab.FieldDrainStarted] = h.t.UTC().Format(time.RFC3339)
	h.set(vocab.KindMachine, "a", m)
	h.set(vocab.KindWorkloadEvent, "b", map[string]string{vocab.FieldReason: vocab.EventEvictionDenied})
	h.t = h.t.Add(11 * time.Second) // the timeout passes
	h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": "apps/web-a"})
	h.set(vocab.KindPod, "web-a", nil) // gone with its node
	h.set(vocab.KindPod, "web-d", pod("", "app=web", false, false))
	h.set(vocab.KindPod, "web-d", pod("b", "app=web", true, false))
	h.step(StepDone)
	p := threeInPlace
	r := result(h, p, "pdb-respected")
	if r.Status != Pass || !strings.Contains(r.Note, "below budget after CAPI's nodeDrainTimeout passed (excused): web (web-a)") {
		t.Fatalf("pdb-respected %s %v, note %q", r.Status, r.Violations, r.Note)
	}
	d := result(h, p, "drained-before-disruption")
	if d.Status != Pass || !strings.Contains(d.Note, "nodeDrainTimeout having passed: a") {
		t.Fatalf("drained-before-disruption %s %v, note %q", d.Status, d.Violations, d.Note)
	}
	// The same drop without the timeout is a breach.
	h2 := newHistory()
	for _, e := range h.entries {
		if e.Kind == vocab.KindMachine && e.New[vocab.FieldDrainTimeout] != "" {
			continue
		}
		h2.entries = append(h2.entries, e)
	}
	if r := result(h2, p, "pdb-respected"); r.Status != Fail {
		t.Fatalf("a budget lost without the timeout: %s", r.Status)
	}
}

// The poller lists pods every 100 ms; the workload's NodeStopped event is
// exact. A pod evicted (the budget allowed it) and gone just before its
// node stopped, which the last poll still listed, left by the eviction,
// not with the node: no breach. One the event names was lost with it.
func TestAPodGoneBeforeItsNodeStoppedIsNotLostWithIt(t *testing.T) {
	build := func(left string) *history {
		h := newHistory()
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
		h.set(vocab.KindBudget, "web", budget("app=web", 2))
		h.set(vocab.KindPod, "web-a", pod("a", "app=web", true, false))
		h.set(vocab.KindPod, "web-b", pod("b", "app=web", true, false))
		h.step(StepUpgrade)
		// web-c, the replacement of a pod evicted before, is Ready in the
		// workload cluster (so the budget lets web-a go) but the last
		// poll saw it still starting.
		h.set(vocab.KindPod, "web-c", pod("c", "app=web", false, false))
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventEvicted, "pod": "apps/web-a"})
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": left})
		h.set(vocab.KindPod, "web-a", nil)
		h.sameMoment(vocab.KindPod, "web-c", pod("c", "app=web", true, false))
		h.step(StepDone)
		return h
	}
	if r := result(build(""), threeInPlace, "pdb-respected"); r.Status != Pass {
		t.Fatalf("a pod evicted before its node stopped: %s %v", r.Status, r.Violations)
	}
	if r := result(build("apps/web-a"), threeInPlace, "pdb-respected"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "lost web-a") {
		t.Fatalf("a pod its node still ran as it stopped: %s %v; want a breach naming web-a", r.Status, r.Violations)
	}
}

// An outage is told in lab time, with the timeline's wall time beside
// it: at scale 0.01, 100 ms of refused reads are 10 s of the world's,
// and the 50 ms allowed are 5 lab seconds.
func TestAnOutageIsToldInLabTime(t *testing.T) {
	outage := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadAPI, "api", apiDown)
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
	})
	p := threeInPlace
	p.MaxAPIOutage, p.Scale = 50*time.Millisecond, 0.01
	r := result(outage, p, "api-availability")
	if r.Status != Fail || !strings.Contains(r.Violations[0].Message, "unavailable for 10s lab (100ms wall)") || !strings.Contains(r.Violations[0].Message, "allows 5s lab (50ms wall)") {
		t.Fatalf("an outage at scale 0.01: %s %v; want it in lab time with wall time beside", r.Status, r.Violations)
	}
	p.Scale = 0
	if r := result(outage, p, "api-availability"); !strings.Contains(r.Violations[0].Message, "unavailable for 100ms (") {
		t.Fatalf("an outage without a scale: %v; want wall time alone", r.Violations)
	}
}

// A Deployment's own rollout takes pods away through its ReplicaSets,
// bounded by its maxUnavailable, not by the budget (which governs
// evictions): pdb-respected does not count those pods, but one deleted
// otherwise is a breach.
func TestARolloutIsNotABudgetBreach(t *testing.T) {
	build := func(byReplicaSet bool) *history {
		h := newHistory()
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
		h.set(vocab.KindBudget, "web", budget("app=web", 2))
		h.set(vocab.KindPod, "web-a", pod("a", "app=web", true, false))
		h.set(vocab.KindPod, "web-b", pod("b", "app=web", true, false))
		h.step(StepUpgrade)
		h.set(vocab.KindPod, "web-c", pod("c", "app=web", false, false))
		if byReplicaSet {
			h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventPodScaledDown, "pod": "apps/web-a"})
		}
		h.set(vocab.KindPod, "web-a", nil)
		h.set(vocab.KindPod, "web-c", pod("c", "app=web", true, false))
		h.step(StepDone)
		return h
	}
	r := result(build(true), threeInPlace, "pdb-respected")
	if r.Status != Pass || !strings.Contains(r.Note, "1 budgeted pod(s) deleted by their ReplicaSet") {
		t.Fatalf("a pod its ReplicaSet scaled down: %s %v (note %q); want a pass that says so", r.Status, r.Violations, r.Note)
	}
	if r := result(build(false), threeInPlace, "pdb-respected"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "lost web-a") {
		t.Fatalf("a pod deleted by no controller: %s %v; want a breach naming web-a", r.Status, r.Violations)
	}
}
