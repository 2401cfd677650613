package fleet

import (
	"math"
	"runtime/metrics"
	"slices"
	"time"
)

// schedMetric is how long the harness's goroutines waited, runnable, for
// a CPU. On a saturated machine the lab's modelled steps run that much
// late, and a wait of W of wall time is W/scale of lab time in every
// bound a rule holds in lab time (api-availability's allowed outage):
// the report gives it so a verdict can be read against it.
const schedMetric = "/sched/latencies:seconds"

// schedLatencies reads schedMetric as a cumulative histogram.
func schedLatencies() histogram {
	s := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return histogram{}
	}
	return cumulative(s[0].Value.Float64Histogram())
}

// cumulative is a runtime/metrics histogram (Buckets are len(Counts)+1
// boundaries) as the upper bound to count form the API server's take.
func cumulative(h *metrics.Float64Histogram) histogram {
	out := histogram{}
	var n uint64
	for i, c := range h.Counts {
		n += c
		out[h.Buckets[i+1]] = n
	}
	if _, ok := out[math.Inf(1)]; !ok {
		out[math.Inf(1)] = n
	}
	return out
}

// longest is the upper bound of the highest bucket holding an
// observation (its lower bound when that is the unbounded one); 0
// without observations.
func (h histogram) longest() time.Duration {
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	longest, below, lower := 0.0, uint64(0), 0.0
	for _, le := range bounds {
		if h[le] > below {
			longest = le
			if math.IsInf(le, 1) {
				longest = lower
			}
		}
		below, lower = h[le], le
	}
	return time.Duration(longest * float64(time.Second))
}

// waits are the p99 and the longest of a histogram of seconds.
func (h histogram) waits() (p99, longest time.Duration) {
	if q := h.quantile(0.99); !math.IsNaN(q) {
		p99 = time.Duration(q * float64(time.Second))
	}
	return p99, h.longest()
}
