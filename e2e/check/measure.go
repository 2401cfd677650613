package check

import (
	"time"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Measures are what an upgrade cost the workload cluster's users, as the
// rules count it: the API's outages api-availability judges, and the
// evictions and budget breaches pdb-respected judges. Durations are the
// timeline's (wall time); Params.Scale makes them lab time.
type Measures struct {
	APIDown    time.Duration `json:"apiDown"`
	APILongest time.Duration `json:"apiLongest"`
	APIOutages int           `json:"apiOutages"`
	// EvictionsGranted and EvictionsRefused are the Eviction API's
	// answers during the upgrade; a refusal is a budget holding a drain.
	EvictionsGranted int `json:"evictionsGranted"`
	EvictionsRefused int `json:"evictionsRefused"`
	// Outages are the API's outages themselves, in the timeline's time.
	Outages []Outage `json:"-"`
	// BudgetBreaches are the drops of a budget below its minimum (a poll
	// that lost more of its pods), excused ones (CAPI's nodeDrainTimeout
	// passed) among them.
	BudgetBreaches int `json:"budgetBreaches"`
}

// Measure replays the timeline, as Run does, for its Measures.
func Measure(entries []timeline.Entry) Measures {
	var m Measures
	sorted := replayOrder(entries)
	s := newState()
	for start := 0; start < len(sorted); {
		end := start
		for end < len(sorted) && sorted[end].Time.Equal(sorted[start].Time) {
			s.apply(sorted[end])
			end++
		}
		s.pollEntries = sorted[start:end]
		s.afterPoll()
		for _, t := range s.budgets {
			if t.breach != nil {
				m.BudgetBreaches++
			}
		}
		start = end
	}
	for _, o := range s.judgedOutages() {
		d := o.To.Sub(o.From)
		m.APIDown += d
		m.APILongest = max(m.APILongest, d)
		m.APIOutages++
		m.Outages = append(m.Outages, o)
	}
	for _, e := range s.workloadEvents {
		switch e {
		case vocab.EventEvicted:
			m.EvictionsGranted++
		case vocab.EventEvictionDenied:
			m.EvictionsRefused++
		}
	}
	m.BudgetBreaches += len(s.excusedBudgets)
	return m
}
