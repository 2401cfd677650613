package queue

import "sync"

// Unbounded delivers pushed values on Out to one reader.
type Unbounded[T any] struct {
	mu      sync.Mutex
	pending []T
	wake    chan struct{}
	done    chan struct{}
	out     chan T
	once    sync.Once
}

// New starts an empty queue.
func New[T any]() *Unbounded[T] {
	q := &Unbounded[T]{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan T)}
	go q.run()
	return q
}

// Push adds v; it never blocks.
func (q *Unbounded[T]) Push(v T) {
	q.mu.Lock()
	q.pending = append(q.pending, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Out delivers the values in order; it is closed by Close.
func (q *Unbounded[T]) Out() <-chan T { return q.out }

func (q *Unbounded[T]) run() {
	defer close(q.out)
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		for _, v := range batch {
			select {
			case q.out <- v:
			case <-q.done:
				return
			}
		}
		select {
		case <-q.wake:
		case <-q.done:
			return
		}
	}
}

// Close stops delivery; values not yet read are dropped.
func (q *Unbounded[T]) Close() { q.once.Do(func() { close(q.done) }) }

// Fanout gives every value emitted to each subscriber, each through its
// own Unbounded queue.
type Fanout[T any] struct {
	mu     sync.Mutex
	subs   map[int]*Unbounded[T]
	next   int
	closed bool
}

// Emit hands v to every subscriber; it never blocks.
func (f *Fanout[T]) Emit(v T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.subs {
		q.Push(v)
	}
}

// Subscribe returns every value emitted from now on, until cancel is
// called or the fanout closes (the channel is then closed).
func (f *Fanout[T]) Subscribe() (<-chan T, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := New[T]()
	if f.closed {
		q.Close()
		return q.Out(), func() {}
	}
	if f.subs == nil {
		f.subs = map[int]*Unbounded[T]{}
	}
	id := f.next
	f.next++
	f.subs[id] = q
	return q.Out(), func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
		q.Close()
	}
}

// Close ends every subscription.
func (f *Fanout[T]) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for id, q := range f.subs {
		q.Close()
		delete(f.subs, id)
	}
}
