package check

import (
	"time"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// labAPI follows the workload API as the lab declares it: down while its
// VIP answers nothing (vocab.EventAPIUnavailable until
// vocab.EventAPIAvailable) or while etcd serves nothing (an
// vocab.EventEtcdHealth other than quorum, or an election:
// vocab.EventEtcdElection until vocab.EventEtcdLeader). The lab stamps each event
// with the moment it acted, so an outage measured here is the lab's own
// span, the same in lab time at every time scale; the recorder's polls
// see one only to within a poll (at scale 0.01 a 100 ms poll is 10 lab
// seconds, longer than a VIP failover).
type labAPI struct {
	// seen: the lab said anything (a provider with no lab says nothing,
	// and its polls alone judge).
	seen          bool
	vipDown, etcd string // why each is down ("": up)
	election      string // why etcd has no leader ("": it has one)
	downSince     time.Time
	why           string
	outages       []Outage
}

func (l *labAPI) down() bool { return l.vipDown != "" || l.etcd != "" || l.election != "" }

// follow applies one workload event; upgrading says the upgrade is under
// way, when outages count.
func (l *labAPI) follow(e timeline.Entry, upgrading bool) {
	switch e.New[vocab.FieldReason] {
	case vocab.EventAPIUnavailable:
		l.vipDown = e.New[vocab.FieldMessage]
	case vocab.EventAPIAvailable:
		l.vipDown = ""
	case vocab.EventEtcdElection:
		l.election = "etcd has no leader: " + e.New[vocab.FieldMessage]
	case vocab.EventEtcdLeader:
		l.election = ""
	case vocab.EventEtcdHealth:
		switch h := e.New["health"]; h {
		case vocab.EtcdHealthQuorum, vocab.EtcdHealthNoMembers:
			l.etcd = ""
		default:
			l.etcd = "etcd " + h
		}
	default:
		return
	}
	l.seen = true
	if upgrading {
		l.change(e.Time)
	}
}

// change opens or closes the outage at t.
func (l *labAPI) change(t time.Time) {
	switch {
	case l.down() && l.downSince.IsZero():
		l.downSince, l.why = t, l.vipDown
		for _, why := range []string{l.etcd, l.election} {
			if l.why == "" {
				l.why = why
			}
		}
	case !l.down() && !l.downSince.IsZero():
		l.outages = append(l.outages, Outage{From: l.downSince, To: t, Why: l.why})
		l.downSince = time.Time{}
	}
}

// begin is the upgrade's start: an API down then is down from then.
func (l *labAPI) begin(t time.Time) { l.change(t) }

// end is the upgrade's end: an outage still open ends with it.
func (l *labAPI) end(t time.Time) {
	if !l.downSince.IsZero() {
		l.outages = append(l.outages, Outage{From: l.downSince, To: t, Why: "still unavailable when the upgrade ended: " + l.why})
		l.downSince = time.Time{}
	}
}

// judgedOutages are the outages api-availability judges: the polls'
// alone where the lab says nothing; otherwise the lab's, and the polls'
// that no outage of the lab explains (a failure the lab did not model,
// judged to a poll's precision).
func (s *State) judgedOutages() []Outage {
	if !s.lab.seen {
		return s.APIOutages
	}
	out := append([]Outage(nil), s.lab.outages...)
	for _, o := range s.APIOutages {
		if !s.lab.explains(o) {
			out = append(out, o)
		}
	}
	return out
}

// explains says whether a poll's outage is one of the lab's: its first
// failing read began before the lab's outage ended, and its poll was
// stamped after the lab's began. A read in flight when the VIP dropped
// its connection fails only when its client gives up, after the lab's
// outage may have ended (1.2 s was seen); judged by when it began, no
// allowance in either clock is needed.
func (l *labAPI) explains(o Outage) bool {
	began := o.ReadFrom
	if began.IsZero() {
		began = o.From
	}
	for _, lo := range l.outages {
		if !began.After(lo.To) && !o.From.Before(lo.From) {
			return true
		}
	}
	return false
}
