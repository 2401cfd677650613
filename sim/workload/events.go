package workload

import "time"

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

// Subscribe returns every workload event from now on, until cancel is
// called or the clusters stop.
func (c *Clusters) Subscribe() (<-chan Event, func()) { return c.events.Subscribe() }

func (c *Clusters) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	c.events.Emit(e)
}
