package lab

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/queue"
)

// EventKind groups what happened to a host.
type EventKind string

const (
	EventPower EventKind = "power"
	EventBoot  EventKind = "boot"
	EventDisk  EventKind = "disk"
	EventNIC   EventKind = "nic"
	EventMedia EventKind = "media"
	EventAgent EventKind = "agent"
	// EventBMC is what a BMC itself did (reset, refused a login).
	EventBMC EventKind = "bmc"
)

// Event is one thing that happened in the lab, as the timeline records it.
type Event struct {
	Time    time.Time         `json:"time"`
	Host    string            `json:"host"`
	Kind    EventKind         `json:"kind"`
	Reason  string            `json:"reason"`
	Message string            `json:"message,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
}

// eventLog appends every event to events.jsonl in the state folder and
// fans it out to subscribers. A slow subscriber never blocks the lab: each
// has its own unbounded queue.
type eventLog struct {
	mu   sync.Mutex
	file *os.File
	subs queue.Fanout[Event]
	// byHost fans each host's events to that host's subscribers alone
	// (its BMCs), so a lab of N hosts does not hand every event to N
	// filters.
	byHost map[string]*queue.Fanout[Event]
}

func openEventLog(path string) (*eventLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &eventLog{file: f, byHost: map[string]*queue.Fanout[Event]{}}, nil
}

func (l *eventLog) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	line, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Write(append(line, '\n'))
	}
	l.subs.Emit(e)
	if h := l.byHost[e.Host]; h != nil {
		h.Emit(e)
	}
}

// subscribe returns every event emitted from now on, until cancel.
func (l *eventLog) subscribe() (<-chan Event, func()) { return l.subs.Subscribe() }

// subscribeHost returns host's events from now on, until cancel.
func (l *eventLog) subscribeHost(host string) (<-chan Event, func()) {
	l.mu.Lock()
	f := l.byHost[host]
	if f == nil {
		f = &queue.Fanout[Event]{}
		l.byHost[host] = f
	}
	l.mu.Unlock()
	return f.Subscribe()
}

func (l *eventLog) close() {
	l.subs.Close()
	l.mu.Lock()
	for _, f := range l.byHost {
		f.Close()
	}
	l.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
}
