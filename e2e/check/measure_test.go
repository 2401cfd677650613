package check

import (
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Measure counts what the rules judge: each outage of the API during the
// upgrade with its length, the Eviction API's answers, the budgets taken
// below their minimum.
func TestMeasureCountsOutagesEvictionsAndBreaches(t *testing.T) {
	h := threeNodes(func(h *history) {
		h.set(vocab.KindWorkloadAPI, "api", apiDown) // 100 ms, the history's step
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventEvictionDenied})
		h.set(vocab.KindWorkloadEvent, "a", map[string]string{vocab.FieldReason: vocab.EventEvicted})
		h.set(vocab.KindPod, "web-a", nil)
		h.set(vocab.KindPod, "web-b", nil) // two of three gone: below minAvailable 2
		h.set(vocab.KindWorkloadAPI, "api", apiDown)
		h.set(vocab.KindWorkloadAPI, "api", apiDown)
		h.set(vocab.KindWorkloadAPI, "api", apiUp)
	})
	m := Measure(h.entries)
	if len(m.Outages) != 2 || m.Outages[0].To.Sub(m.Outages[0].From) != 100*time.Millisecond || m.Outages[1].To.Sub(m.Outages[1].From) != 200*time.Millisecond {
		t.Errorf("outages %+v, want one of 100 ms and one of 200 ms", m.Outages)
	}
	if m.EvictionsGranted != 1 || m.EvictionsRefused != 1 || m.BudgetBreaches != 1 {
		t.Errorf("Measure = %+v, want 1 eviction granted, 1 refused, 1 breach", m)
	}
	if r := result(h, threeInPlace, "pdb-respected"); r.Status != Fail {
		t.Errorf("pdb-respected %s: the breach Measure counts is one the rule breaks", r.Status)
	}
}
