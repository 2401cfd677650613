package check

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

func vipEvent(reason, msg string) map[string]string {
	return map[string]string{vocab.FieldReason: reason, vocab.FieldMessage: msg}
}

// A VIP failover of 50 ms (5 lab seconds at 0.01) that the polls saw as
// 300 ms is judged as the lab's 50 ms: within a 10 s bound, as it would
// be at any scale. Without the lab's word the polls' 300 ms fail it.
func TestTheLabsOutageIsJudgedInItsOwnTime(t *testing.T) {
	build := func(lab bool) *history {
		return threeNodes(func(h *history) {
			if lab {
				h.set(vocab.KindWorkloadEvent, "wl", vipEvent(vocab.EventAPIUnavailable, "the VIP refuses connections: the API server on a, the VIP's holder, stopped"))
				h.t = h.t.Add(-50 * time.Millisecond)
				h.set(vocab.KindWorkloadEvent, "wl", vipEvent(vocab.EventAPIAvailable, "the VIP answers: kube-vip on b took the VIP"))
				h.t = h.t.Add(-90 * time.Millisecond)
			}
			// The failed poll's read began within the lab's outage, and
			// the poll was stamped just after it.
			down := maps.Clone(apiDown)
			down[vocab.FieldAPIReadFrom] = h.t.Add(70 * time.Millisecond).Format(time.RFC3339Nano)
			h.set(vocab.KindWorkloadAPI, "api", down)
			h.t = h.t.Add(200 * time.Millisecond)
			h.set(vocab.KindWorkloadAPI, "api", apiUp)
		})
	}
	p := threeInPlace
	p.MaxAPIOutage, p.Scale = 100*time.Millisecond, 0.01
	r := result(build(true), p, "api-availability")
	if r.Status != Pass || !strings.Contains(r.Note, "the longest 5s lab (50ms wall)") || !strings.Contains(r.Note, "as the lab's VIP and etcd said") {
		t.Errorf("a 5 s lab failover with the lab's word: %s %v %q", r.Status, r.Violations, r.Note)
	}
	r = result(build(false), p, "api-availability")
	if r.Status != Fail || !strings.Contains(r.Note, "as the recorder's polls saw it") {
		t.Errorf("the same seen by polls alone: %s %q; want the polls' 30 s lab to fail", r.Status, r.Note)
	}
}

// Polls that fail while the lab says the API answers are judged as the
// polls saw them: a failure the lab does not model is not hidden.
func TestAnOutageTheLabDidNotDeclareStillCounts(t *testing.T) {
	h := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadEvent, "wl", vipEvent(vocab.EventAPIUnavailable, "the VIP refuses connections: the API server on a, the VIP's holder, stopped"))
		h.set(vocab.KindWorkloadEvent, "wl", vipEvent(vocab.EventAPIAvailable, "the VIP answers: kube-vip on b took the VIP"))
		h.t = h.t.Add(10 * time.Second) // the failing read began after the lab's outage
		h.set(vocab.KindWorkloadAPI, "api", apiDown)
		h.t = h.t.Add(200 * time.Millisecond)
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
	})
	p := threeInPlace
	p.MaxAPIOutage = 150 * time.Millisecond
	if r := result(h, p, "api-availability"); r.Status != Fail || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Message, "connection refused") {
		t.Errorf("an outage only the polls saw: %s %v", r.Status, r.Violations)
	}
}

// A read hung on the connection the VIP dropped fails seconds after the
// lab's outage ended; it began within it, so it is the lab's outage, at
// any scale. The same failure stamped without when its read began is not.
func TestAReadHungThroughTheLabsOutageIsExplained(t *testing.T) {
	build := func(withReadFrom bool) *history {
		return threeNodes(func(h *history) {
			h.set(vocab.KindWorkloadEvent, "wl", vipEvent(vocab.EventAPIUnavailable, "the VIP drops connections: the host of a, the VIP's holder, is gone"))
			began := h.t
			h.set(vocab.KindWorkloadEvent, "wl", vipEvent(vocab.EventAPIAvailable, "the VIP answers: kube-vip on b took the VIP"))
			h.t = h.t.Add(1200 * time.Millisecond) // the client gave up on its hung read
			down := map[string]string{vocab.FieldAPIAvailable: "false", vocab.FieldAPIError: "timeout"}
			if withReadFrom {
				down[vocab.FieldAPIReadFrom] = began.Add(10 * time.Millisecond).Format(time.RFC3339Nano)
			}
			h.set(vocab.KindWorkloadAPI, "api", down)
			h.t = h.t.Add(200 * time.Millisecond)
			h.set(vocab.KindWorkloadAPI, "api", apiUp)
		})
	}
	p := threeInPlace
	p.MaxAPIOutage = 150 * time.Millisecond
	if r := result(build(true), p, "api-availability"); r.Status != Pass {
		t.Errorf("a read hung through the lab's 100 ms failover: %s %v", r.Status, r.Violations)
	}
	if r := result(build(false), p, "api-availability"); r.Status != Fail {
		t.Errorf("the same failure with no read start: %s; want it judged as the polls saw it", r.Status)
	}
}

// etcd without quorum is an outage the lab declares, whatever the VIP.
func TestALostQuorumIsALabOutage(t *testing.T) {
	h := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventEtcdHealth, "health": vocab.EtcdHealthNoQuorum})
		h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventEtcdHealth, "health": vocab.EtcdHealthQuorum})
	})
	p := threeInPlace
	p.MaxAPIOutage = 50 * time.Millisecond
	if r := result(h, p, "api-availability"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "unavailable for 100ms (etcd no-quorum)") {
		t.Errorf("quorum lost for 100 ms: %s %v", r.Status, r.Violations)
	}
}

// An etcd election is an outage: no leader, no reads or writes.
func TestAnEtcdElectionIsALabOutage(t *testing.T) {
	h := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventEtcdElection, vocab.FieldMessage: "etcd member a, the leader, is not running"})
		h.set(vocab.KindWorkloadEvent, "wl", map[string]string{vocab.FieldReason: vocab.EventEtcdLeader, vocab.FieldMessage: "etcd member b became the leader"})
	})
	p := threeInPlace
	p.MaxAPIOutage = 50 * time.Millisecond
	if r := result(h, p, "api-availability"); r.Status != Fail || !strings.Contains(r.Violations[0].Message, "unavailable for 100ms (etcd has no leader: etcd member a, the leader, is not running)") {
		t.Errorf("an election of 100 ms: %s %v", r.Status, r.Violations)
	}
}
