package timeline

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Kinds of entries besides the watched object kinds (Machine, Node, ...).
const (
	// KindStep is a runner step ("upgrade" starts the upgrade); its name
	// is the step.
	KindStep = "Step"
	// KindLab is a lab event (power, boot, disk, NIC) of the host Name.
	KindLab = "LabEvent"
)

// Entry is one change: Old is nil (null) when the object appeared, New
// is nil when it went away; an empty summary is {}, never null. Summaries are flat fields (phase, version, ...)
// chosen by the monitor of the kind.
type Entry struct {
	Time time.Time         `json:"time"`
	Kind string            `json:"kind"`
	Name string            `json:"name"`
	Old  map[string]string `json:"old"`
	New  map[string]string `json:"new"`
}

// Object names the entry's object as "Kind/name".
func (e Entry) Object() string { return e.Kind + "/" + e.Name }

// Timeline collects entries from concurrent monitors and writes each to
// its file as it comes.
type Timeline struct {
	mu      sync.Mutex
	entries []Entry
	out     io.WriteCloser
	enc     *json.Encoder
	notify  []func(Entry)
}

// Create starts a timeline written to path (JSON lines).
func Create(path string) (*Timeline, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Timeline{out: f, enc: json.NewEncoder(f)}, nil
}

// New is a timeline kept in memory only (tests of the checks).
func New() *Timeline { return &Timeline{} }

// OnEntry calls fn with every entry added from now on, under the
// timeline's lock (fn must not add entries).
func (t *Timeline) OnEntry(fn func(Entry)) {
	t.mu.Lock()
	t.notify = append(t.notify, fn)
	t.mu.Unlock()
}

// Add records one change.
func (t *Timeline) Add(e Entry) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, e)
	if t.enc != nil {
		_ = t.enc.Encode(e)
	}
	for _, fn := range t.notify {
		fn(e)
	}
}

// Step records a runner step.
func (t *Timeline) Step(name, detail string) {
	t.Add(Entry{Kind: KindStep, Name: name, New: map[string]string{"detail": detail}})
}

// Entries is a copy of the history so far, in time order.
func (t *Timeline) Entries() []Entry {
	t.mu.Lock()
	out := append([]Entry(nil), t.entries...)
	t.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// Close flushes and closes the file.
func (t *Timeline) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out == nil {
		return nil
	}
	err := t.out.Close()
	t.out, t.enc = nil, nil
	return err
}

// Read loads a timeline file.
func Read(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	dec := json.NewDecoder(f)
	for line := 1; ; line++ {
		var e Entry
		if err := dec.Decode(&e); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", path, line, err)
		}
		out = append(out, e)
	}
}
