package lab

import "sync"

// queue hands values from a producer that must never block (libvirt's
// event callback, the lab's state changes) to one reader, in order and
// without a bound: a 100-host lab powering on at once loses nothing.
type queue[T any] struct {
	mu      sync.Mutex
	pending []T
	wake    chan struct{}
	done    chan struct{}
	out     chan T
	once    sync.Once
}

func newQueue[T any]() *queue[T] {
	q := &queue[T]{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan T)}
	go q.run()
	return q
}

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.pending = append(q.pending, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue[T]) run() {
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

// close stops delivery; values not yet read are dropped.
func (q *queue[T]) close() { q.once.Do(func() { close(q.done) }) }
