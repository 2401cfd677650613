package fleet

import (
	"math"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// The runtime's scheduling latencies read as the API server's
// histograms do: cumulative counts by upper bound, the p99 inside its
// bucket, the longest wait the top bound of the highest bucket observed.
func TestTheHarnessWaitForACPUIsReadFromTheRuntime(t *testing.T) {
	h := cumulative(&metrics.Float64Histogram{
		Buckets: []float64{0, 0.001, 0.01, 0.1, 1, math.Inf(1)},
		Counts:  []uint64{90, 8, 1, 1, 0},
	})
	if h.count() != 100 || h[0.01] != 98 || h[1] != 100 {
		t.Fatalf("cumulative histogram %s", h)
	}
	if got := h.quantile(0.99); got != 0.1 {
		t.Errorf("p99 %g, want 0.1", got)
	}
	if got := h.longest(); got != time.Second {
		t.Errorf("longest wait %s, want 1s (the top of the highest bucket with a wait)", got)
	}
	late := cumulative(&metrics.Float64Histogram{Buckets: []float64{0, 1, math.Inf(1)}, Counts: []uint64{1, 1}})
	if got := late.longest(); got != time.Second {
		t.Errorf("a wait in the unbounded bucket: longest %s, want its lower bound 1s", got)
	}
	if got := (histogram{}).longest(); got != 0 {
		t.Errorf("no waits: longest %s", got)
	}
	// What a wait is in the lab's time, on the report's line.
	r := &Report{TimeScale: 0.01, HarnessWaitMax: 1200 * time.Millisecond, HarnessWaitP99: 30 * time.Millisecond}
	if s := r.String(); !strings.Contains(s, "goroutines waited for a CPU up to 1.2s (p99 30ms): at time scale 0.01, 2m0s of lab time") {
		t.Errorf("the report says:\n%s", s)
	}
	// This process has waited for a CPU at least once.
	if live := schedLatencies(); live.count() == 0 {
		t.Errorf("no scheduling latencies read from the runtime: %s", live)
	}
}
