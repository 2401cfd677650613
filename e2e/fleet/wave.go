package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// wave is the runner.Wave of a fleet: at most provisioning clusters are
// let in to provision at once (0: all of them), each slot freed when its
// cluster arrives or ends; no upgrade starts until every cluster has
// arrived (provisioned, its data written) or ended (a run that stopped
// early), so the wave's time is the fleet's upgrade alone; then the
// clusters go in batches of batch (0: all together) in the fleet's order
// (orderBy; without one, as they arrived), each batch once every cluster
// of the one before has ended.
type wave struct {
	total, batch int
	// provisioning bounds the clusters admitted and not yet arrived or
	// ended; admitted holds them, queue the ones waiting, in order.
	provisioning int
	admitted     map[string]bool
	queue        []admission

	mu      sync.Mutex
	arrived []string
	ended   map[string]bool
	// started[i] is closed when arrived[i] may go.
	started map[string]chan struct{}
	running int // started and not ended, in the current batch
	next    int // index into arrived of the next to start
	began   time.Time
	// begun is closed when the first upgrade starts.
	begun chan struct{}
	// starts and ends record when each cluster's upgrade started and ended.
	starts, ends map[string]time.Time
	// rank is each cluster's place in the fleet's order (orderBy).
	rank map[string]int
}

// orderBy makes the batches go in the order of clusters (the fleet
// file's) rather than as the clusters arrived: a plan's wave order.
func (w *wave) orderBy(clusters []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rank = map[string]int{}
	for i, c := range clusters {
		w.rank[c] = i
	}
}

// admission is a cluster waiting to provision; ready is closed when it may.
type admission struct {
	cluster string
	ready   chan struct{}
}

func newWave(total, batch, provisioning int) *wave {
	return &wave{total: total, batch: batch, provisioning: provisioning, admitted: map[string]bool{},
		ended: map[string]bool{}, started: map[string]chan struct{}{}, begun: make(chan struct{}),
		starts: map[string]time.Time{}, ends: map[string]time.Time{}}
}

// Admit blocks until the cluster may start provisioning: until fewer
// than provisioning clusters are admitted and not yet arrived or ended,
// first come first served.
func (w *wave) Admit(ctx context.Context, cluster string) error {
	w.mu.Lock()
	a := admission{cluster: cluster, ready: make(chan struct{})}
	w.queue = append(w.queue, a)
	w.admit()
	w.mu.Unlock()
	select {
	case <-a.ready:
		return nil
	case <-ctx.Done():
		// Admitted meanwhile, it holds a place this deletion does not
		// free: the runner's End for the run frees it.
		w.mu.Lock()
		w.queue = slices.DeleteFunc(w.queue, func(q admission) bool { return q.cluster == cluster })
		w.mu.Unlock()
		return fmt.Errorf("%s waited for its turn to provision: %w", cluster, ctx.Err())
	}
}

// admit lets waiting clusters in while there is room.
func (w *wave) admit() {
	for len(w.queue) > 0 && (w.provisioning == 0 || len(w.admitted) < w.provisioning) {
		a := w.queue[0]
		w.queue = w.queue[1:]
		w.admitted[a.cluster] = true
		close(a.ready)
	}
}

// leave frees the cluster's provisioning slot, if it holds one.
func (w *wave) leave(cluster string) {
	if w.admitted[cluster] {
		delete(w.admitted, cluster)
		w.admit()
	}
}

// Start blocks until the cluster's turn.
func (w *wave) Start(ctx context.Context, cluster string) error {
	w.mu.Lock()
	ch := make(chan struct{})
	w.started[cluster] = ch
	w.arrived = append(w.arrived, cluster)
	w.leave(cluster)
	w.advance()
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s waited for its turn: %w", cluster, ctx.Err())
	}
}

// End marks the cluster's upgrade over (or the run stopped before it).
func (w *wave) End(cluster string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended[cluster] {
		return
	}
	w.ended[cluster] = true
	w.leave(cluster)
	if _, ok := w.starts[cluster]; ok {
		w.ends[cluster] = time.Now()
		w.running--
	}
	w.advance()
}

// advance starts the next batch when the wave may move: every cluster
// has arrived or ended, and the current batch is over.
func (w *wave) advance() {
	if len(w.arrived)+w.endedUnarrived() < w.total || w.running > 0 {
		return
	}
	if w.began.IsZero() {
		w.began = time.Now()
		close(w.begun)
		if w.rank != nil {
			slices.SortStableFunc(w.arrived, func(a, b string) int { return w.rank[a] - w.rank[b] })
		}
	}
	size := w.batch
	if size == 0 {
		size = len(w.arrived)
	}
	for ; size > 0 && w.next < len(w.arrived); w.next++ {
		c := w.arrived[w.next]
		if w.ended[c] {
			continue
		}
		w.starts[c] = time.Now()
		w.running++
		size--
		close(w.started[c])
	}
}

// endedUnarrived counts clusters that ended without arriving.
func (w *wave) endedUnarrived() int {
	n := 0
	for c := range w.ended {
		if _, ok := w.started[c]; !ok {
			n++
		}
	}
	return n
}

// times are when the wave began and each cluster's upgrade started and
// ended.
func (w *wave) times() (began time.Time, starts, ends map[string]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, e := map[string]time.Time{}, map[string]time.Time{}
	for k, v := range w.starts {
		s[k] = v
	}
	for k, v := range w.ends {
		e[k] = v
	}
	return w.began, s, e
}
