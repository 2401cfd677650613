package runner

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// pausableTimeout is a run's time limit that can stop while the run waits
// for something that is not its own work (its turn in a fleet's wave):
// the time before the pause and after it add up to the limit. When it
// runs out, the context ends with errTimedOut as its cause.
type pausableTimeout struct {
	cancel context.CancelCauseFunc
	limit  time.Duration

	mu      sync.Mutex
	used    time.Duration // before the current stretch
	started time.Time     // of the current stretch (zero while paused)
	timer   *time.Timer
}

// newPausableTimeout is ctx ending once limit of running time has passed.
func newPausableTimeout(ctx context.Context, limit time.Duration) (context.Context, *pausableTimeout) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := &pausableTimeout{cancel: cancel, limit: limit}
	t.resume()
	return ctx, t
}

func (t *pausableTimeout) expire() {
	t.cancel(fmt.Errorf("the scenario's timeout of %s ran out: %w", t.limit, context.DeadlineExceeded))
}

// pause stops the clock.
func (t *pausableTimeout) pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started.IsZero() {
		return
	}
	t.timer.Stop()
	t.used += time.Since(t.started)
	t.started = time.Time{}
}

// resume starts it again with what is left.
func (t *pausableTimeout) resume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started.IsZero() {
		return
	}
	t.started = time.Now()
	t.timer = time.AfterFunc(max(t.limit-t.used, 0), t.expire)
}

// stop ends the timer and the context.
func (t *pausableTimeout) stop() {
	t.mu.Lock()
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
	t.cancel(context.Canceled)
}
