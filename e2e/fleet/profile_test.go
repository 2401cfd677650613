package fleet

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// A sample is charged to upgradelab's innermost package on its stack;
// a stack without one to the package its goroutine started in; one of
// the runtime alone to "runtime".
func TestTheHarnessProfileIsChargedByComponent(t *testing.T) {
	var p profileBuilder
	loc := p.frame
	json := loc("encoding/json.(*encodeState).marshal")
	list := loc("sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/cache.(*cache).List")
	read := loc(module + "sim/workload.(*Clusters).read")
	run := loc(module + "e2e/runner.(*run).execute")
	poll := loc(module + "e2e/monitor.(*Recorder).Poll")
	serve := loc("net/http.(*conn).serve")
	gc := loc("runtime.gcBgMarkWorker")
	path := filepath.Join(t.TempDir(), HarnessProfile)
	p.write(t, path,
		onStack(3*time.Second, json, list, read, run),
		onStack(2*time.Second, json, poll),
		onStack(time.Second, json, serve),
		onStack(time.Second, gc),
		onStack(time.Second, list, read),
	)
	got, err := components(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Component{{"sim/workload", 4 * time.Second, 0.5}, {"e2e/monitor", 2 * time.Second, 0.25}, {"net/http", time.Second, 0.125}, {"other", time.Second, 0.125}}
	if len(got) != len(want) {
		t.Fatalf("components = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("components[%d] = %+v; want %+v (all: %+v)", i, got[i], want[i], got)
		}
	}
	if _, err := components(filepath.Join(t.TempDir(), "none"), 3); err == nil {
		t.Fatal("a missing profile read as one")
	}
}

// The API server's samples are charged to the request handler on their
// stack: a PATCH's merge, admission and write are the PATCH's even where
// the filters (on every request's stack) and the runtime are below it;
// etcd's watch events decoded for the watch cache are the watch cache's;
// the garbage collector alone is the runtime; anything else is other.
func TestTheAPIServerProfileIsChargedByRequest(t *testing.T) {
	var p profileBuilder
	loc := p.frame
	const apiserver = "k8s.io/apiserver/pkg/"
	malloc := loc("runtime.mallocgc")
	update := loc(apiserver + "storage/etcd3.(*store).GuaranteedUpdate")
	patcher := loc(apiserver + "endpoints/handlers.(*patcher).patchResource.func2")
	patch := loc(apiserver + "endpoints/handlers.PatchResource.func1")
	put := loc(apiserver + "endpoints/handlers.UpdateResource.func1")
	filters := loc(apiserver + "endpoints/filters.WithAuthentication.func1")
	watchChan := loc(apiserver + "storage/etcd3.(*watchChan).transform")
	list := loc(apiserver + "endpoints/handlers.ListResource.func1")
	gc := loc("runtime.gcBgMarkWorker")
	tls := loc("crypto/tls.(*Conn).Read")
	path := filepath.Join(t.TempDir(), APIServerProfileWave)
	p.write(t, path,
		onStack(4*time.Second, malloc, update, patcher, patch, filters),
		onStack(time.Second, update, put, filters),
		onStack(time.Second, malloc, watchChan),
		onStack(500*time.Millisecond, list, filters),
		onStack(time.Second, gc),
		onStack(1500*time.Millisecond, malloc, tls),
	)
	got, err := charge(path, 4, apiServerWorkOf)
	if err != nil {
		t.Fatal(err)
	}
	// 9 s in all; the TLS read is "other" and goes last, with the LIST
	// beyond the top 4.
	want := []Component{
		{"PATCH (and server-side apply)", 4 * time.Second, 4.0 / 9},
		{"PUT", time.Second, 1.0 / 9},
		{"runtime", time.Second, 1.0 / 9},
		{"watch cache (etcd events to watchers)", time.Second, 1.0 / 9},
		{"other", 2 * time.Second, 2.0 / 9},
	}
	if len(got) != len(want) {
		t.Fatalf("charged %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("charged[%d] = %+v; want %+v (all: %+v)", i, got[i], want[i], got)
		}
	}
	// With room for the LIST, "other" is the TLS read alone, one row,
	// last, though it cost more than the LIST.
	got, err = charge(path, 5, apiServerWorkOf)
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, c := range got {
		if c.Package == "other" {
			others++
		}
	}
	if last := got[len(got)-1]; others != 1 || last.Package != "other" || last.CPU != 1500*time.Millisecond || got[4].Package != "LIST" {
		t.Fatalf("charged with top 5: %+v; want PATCH, PUT, runtime, watch cache, LIST, then one other of 1.5s", got)
	}
}

func TestPackageOf(t *testing.T) {
	for fn, want := range map[string]string{
		"a/b/c.(*T).M":     "a/b/c",
		"a/b/c.F.func1":    "a/b/c",
		"runtime.mallocgc": "runtime",
		module + `internal/queue.(*Unbounded[go.shape.struct { Time time.Time "json:\"time\""; Kind ` + module + `sim/lab.EventKind }]).Push`: module + "internal/queue",
	} {
		if got := packageOf(fn); got != want {
			t.Errorf("packageOf(%q) = %q; want %q", fn, got, want)
		}
	}
}

// profileBuilder makes small CPU profiles: frame adds a function (one
// location each), write keeps the samples as a pprof file.
type profileBuilder struct{ locs []*profile.Location }

func (b *profileBuilder) frame(fn string) *profile.Location {
	id := uint64(len(b.locs) + 1)
	l := &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: fn}}}}
	b.locs = append(b.locs, l)
	return l
}

// onStack is cpu spent on a stack, innermost frame first.
func onStack(cpu time.Duration, stack ...*profile.Location) *profile.Sample {
	return &profile.Sample{Location: stack, Value: []int64{1, int64(cpu)}}
}

func (b *profileBuilder) write(t *testing.T, path string, samples ...*profile.Sample) {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Location:   b.locs,
		Sample:     samples,
	}
	for _, l := range b.locs {
		p.Function = append(p.Function, l.Line[0].Function)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
}
