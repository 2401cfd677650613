package workload

import (
	"sync"
	"time"
)

// Event is something a workload cluster did that no API object shows:
// its VIP opening or closing, an etcd member changing state, its data
// going, an eviction granted or refused. The harness records them in
// the run's timeline beside the lab's hardware events.
type Event struct {
	Time    time.Time         `json:"time"`
	Cluster string            `json:"cluster"`
	Node    string            `json:"node,omitempty"`
	Reason  string            `json:"reason"`
	Message string            `json:"message,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
}

// Reasons of Events.
const (
	EventAPIAvailable   = "APIAvailable"
	EventAPIUnavailable = "APIUnavailable"
	EventEtcdMember     = "EtcdMember"
	EventEtcdHealth     = "EtcdHealth"
	EventDataLost       = "DataLost"
	EventEvicted        = "Evicted"
	EventEvictionDenied = "EvictionRefused"
	EventPodDeleted     = "PodDeleted"
	EventPodScheduled   = "PodScheduled"
	// EventNodeStopped is a node's host going off; Data["pods"] lists
	// the pods a drain would have moved that were still on it then.
	EventNodeStopped = "NodeStopped"
	// EventNodeStarted is a node's kubelet starting after its host
	// booted: its pods start again.
	EventNodeStarted = "NodeStarted"
)

// eventLog fans events out to subscribers; a slow subscriber never
// blocks the cluster: each has its own unbounded queue.
type eventLog struct {
	mu     sync.Mutex
	subs   map[int]*subscriber
	next   int
	closed bool
}

type subscriber struct {
	mu      sync.Mutex
	pending []Event
	wake    chan struct{}
	out     chan Event
	done    chan struct{}
	once    sync.Once
}

func (s *subscriber) stop() { s.once.Do(func() { close(s.done) }) }

func (l *eventLog) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.subs {
		s.mu.Lock()
		s.pending = append(s.pending, e)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (l *eventLog) subscribe() (<-chan Event, func()) {
	s := &subscriber{wake: make(chan struct{}, 1), out: make(chan Event), done: make(chan struct{})}
	l.mu.Lock()
	if l.subs == nil {
		l.subs = map[int]*subscriber{}
	}
	id := l.next
	l.next++
	closed := l.closed
	if !closed {
		l.subs[id] = s
	}
	l.mu.Unlock()
	go s.run()
	if closed {
		s.stop()
	}
	cancel := func() {
		l.mu.Lock()
		delete(l.subs, id)
		l.mu.Unlock()
		s.stop()
	}
	return s.out, cancel
}

func (s *subscriber) run() {
	defer close(s.out)
	for {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		s.mu.Unlock()
		for _, e := range batch {
			select {
			case s.out <- e:
			case <-s.done:
				return
			}
		}
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
	}
}

func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for id, s := range l.subs {
		delete(l.subs, id)
		s.stop()
	}
}

// Subscribe returns every workload event from now on, until cancel is
// called or the clusters stop.
func (c *Clusters) Subscribe() (<-chan Event, func()) { return c.events.subscribe() }

func (c *Clusters) emit(e Event) { c.events.emit(e) }
