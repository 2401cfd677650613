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
	w := newWave(5, 2, 0)
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

// The batches go in the fleet's order, whatever order the clusters
// arrived in.
func TestWaveBatchesGoInTheFleetsOrder(t *testing.T) {
	w := newWave(4, 2, 0)
	w.orderBy([]string{"a", "b", "c", "d"})
	went := arrive(w, "d", "c", "b", "a")
	first := expect(t, went, 2)
	if !first["a"] || !first["b"] {
		t.Fatalf("first batch %v, want a and b, the fleet's first two", first)
	}
}

func TestWaveAllAtOnce(t *testing.T) {
	w := newWave(20, 0, 0)
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprint("c", i))
	}
	went := arrive(w, names...)
	expect(t, went, 20)
}

func TestWaveStartEndsWithItsContext(t *testing.T) {
	w := newWave(2, 0, 0)
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

// admit starts a goroutine per cluster that asks to provision and reports
// when it was let in.
func admit(ctx context.Context, w *wave, names ...string) <-chan string {
	out := make(chan string, len(names))
	for _, n := range names {
		go func() {
			if err := w.Admit(ctx, n); err == nil {
				out <- n
			}
		}()
	}
	return out
}

func TestWaveAdmitsAtMostConcurrentClustersToProvision(t *testing.T) {
	w := newWave(4, 0, 2)
	in := admit(context.Background(), w, "a", "b", "c", "d")
	first := expect(t, in, 2)
	expectNone(t, in, "two provision at once")
	var one, other string
	for c := range first {
		if one == "" {
			one = c
		} else {
			other = c
		}
	}
	// one arrives (provisioned): its place goes to the next; it then
	// waits for the wave, which needs all four.
	went := arrive(w, one)
	expect(t, in, 1)
	expectNone(t, in, "a place is freed only by an arrival or an end")
	w.End(other) // stopped while provisioning
	expect(t, in, 1)
	expectNone(t, went, "two of four arrived or ended")
}

func TestWaveAdmitGivesUpWithItsContext(t *testing.T) {
	w := newWave(3, 0, 1)
	in := admit(context.Background(), w, "a")
	expect(t, in, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { errs <- w.Admit(ctx, "b") }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errs; err == nil {
		t.Fatal("b was admitted with a's place taken and its context cancelled")
	}
	later := admit(context.Background(), w, "c")
	w.End("a")
	if got := expect(t, later, 1); !got["c"] {
		t.Fatalf("c, the one still waiting, should have had a's place: %v", got)
	}
}

func TestWaveWithoutAProvisioningBoundAdmitsEveryone(t *testing.T) {
	w := newWave(30, 0, 0)
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprint("c", i))
	}
	expect(t, admit(context.Background(), w, names...), 30)
}
