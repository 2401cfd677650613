package runner

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPausableTimeoutStopsWhilePaused(t *testing.T) {
	ctx, limit := newPausableTimeout(context.Background(), 150*time.Millisecond)
	defer limit.stop()
	time.Sleep(100 * time.Millisecond)
	limit.pause()
	time.Sleep(200 * time.Millisecond) // longer than what is left
	if ctx.Err() != nil {
		t.Fatalf("the limit ran out while paused: %v", context.Cause(ctx))
	}
	limit.resume()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the limit did not run out after it resumed")
	}
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("cause %v, want a deadline exceeded", context.Cause(ctx))
	}
}

func TestPausableTimeoutRunsOutUnpaused(t *testing.T) {
	ctx, limit := newPausableTimeout(context.Background(), 50*time.Millisecond)
	defer limit.stop()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the limit did not run out")
	}
}
