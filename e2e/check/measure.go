package check

import (
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Measures are what an upgrade cost the workload cluster's users, as the
// rules count it: the API's outages api-availability judges, and the
// evictions and budget breaches pdb-respected judges. Times are the
// timeline's (wall time); Params.Scale makes them lab time.
type Measures struct {
	// Outages are the API's outages during the upgrade.
	Outages []Outage `json:"outages"`
	// EvictionsGranted and EvictionsRefused are the Eviction API's
	// answers during the upgrade; a refusal is a budget holding a drain.
	EvictionsGranted int `json:"evictionsGranted"`
	EvictionsRefused int `json:"evictionsRefused"`
	// BudgetBreaches are the drops of a budget below its minimum (a poll
	// that lost more of its pods), excused ones (CAPI's nodeDrainTimeout
	// passed) among them.
	BudgetBreaches int `json:"budgetBreaches"`
}

// Measure replays the timeline, as Run does, for its Measures.
func Measure(entries []timeline.Entry) Measures {
	var m Measures
	s := replay(replayOrder(entries), func(s *State, _ []timeline.Entry) {
		for _, t := range s.budgets {
			if t.breach != nil {
				m.BudgetBreaches++
			}
		}
	})
	m.Outages = s.judgedOutages()
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
