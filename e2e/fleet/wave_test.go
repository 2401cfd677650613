package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// arrive starts a goroutine per cluster that arrives and reports when it
// was let go.
func arrive(w *wave, names ...string) <-chan string {
	out := make(chan string, len(names))
	for _, n := range names {
		go func() {
			if err := w.Start(context.Background(), n); err == nil {
				out <- n
			}
		}()
	}
	return out
}

func expectNone(t *testing.T, ch <-chan string, why string) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("%s went: %s", n, why)
	case <-time.After(50 * time.Millisecond):
	}
}

func expect(t *testing.T, ch <-chan string, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for range n {
		select {
		case c := <-ch:
			got[c] = true
		case <-time.After(2 * time.Second):
			t.Fatalf("only %v went, want %d", got, n)
		}
	}
	return got
}

func TestWaveWaitsForTheWholeFleetThenGoesInBatches(t *testing.T) {
	w := newWave(5, 2)
	went := arrive(w, "a", "b", "c", "d")
	expectNone(t, went, "four of five arrived; no upgrade may start before the fleet is provisioned")
	w.End("e") // stopped before it arrived
	first := expect(t, went, 2)
	expectNone(t, went, "a batch of two runs")
	var one string
	for c := range first {
		one = c
	}
	w.End(one)
	expectNone(t, went, "the batch is not over while one of it runs")
	for c := range first {
		w.End(c) // the second End of one is ignored
	}
	second := expect(t, went, 2)
	for c := range second {
		if first[c] {
			t.Fatalf("%s went twice", c)
		}
	}
	began, starts, _ := w.times()
	if began.IsZero() || len(starts) != 4 {
		t.Fatalf("began %v, %d started", began, len(starts))
	}
}

func TestWaveAllAtOnce(t *testing.T) {
	w := newWave(20, 0)
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprint("c", i))
	}
	went := arrive(w, names...)
	expect(t, went, 20)
}

func TestWaveStartEndsWithItsContext(t *testing.T) {
	w := newWave(2, 0)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { err = w.Start(ctx, "a") })
	cancel()
	wg.Wait()
	if err == nil {
		t.Fatal("Start returned nil with its context cancelled and the fleet not there")
	}
}
