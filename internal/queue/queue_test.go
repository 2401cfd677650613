package queue

import (
	"testing"
	"time"
)

// A producer pushing far more than anyone reads never blocks, and the
// reader gets every value in order.
func TestUnboundedNeverBlocksAndKeepsOrder(t *testing.T) {
	q := New[int]()
	defer q.Close()
	done := make(chan struct{})
	go func() {
		for i := range 10000 {
			q.Push(i)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Push blocked without a reader")
	}
	for want := range 10000 {
		if got := <-q.Out(); got != want {
			t.Fatalf("got %d, want %d", got, want)
		}
	}
}

func TestFanoutSubscribersCancelAndClose(t *testing.T) {
	var f Fanout[string]
	a, cancelA := f.Subscribe()
	b, _ := f.Subscribe()
	f.Emit("one")
	if <-a != "one" || <-b != "one" {
		t.Fatal("a subscriber missed an emitted value")
	}
	cancelA()
	f.Emit("two")
	if <-b != "two" {
		t.Fatal("b missed a value after a was cancelled")
	}
	if _, open := <-a; open {
		t.Fatal("a cancelled subscription is still open")
	}
	f.Close()
	if _, open := <-b; open {
		t.Fatal("a subscription is open after Close")
	}
	late, _ := f.Subscribe()
	if _, open := <-late; open {
		t.Fatal("subscribing to a closed fanout gave an open channel")
	}
}
