package fleet

import (
	"cmp"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// HarnessProfile names the harness's CPU profile in the fleet's folder
// (`go tool pprof harness.cpu.pprof`).
const HarnessProfile = "harness.cpu.pprof"

// module is this project's import path: a CPU sample is charged to the
// innermost of its packages on the stack.
const module = "github.com/upgradelab/upgradelab/"

// startProfile starts the harness's CPU profile into path; stop ends it
// (once: later calls return the first's error). A process has one CPU
// profile at a time (`go test -cpuprofile` holds it), so a failure to
// start is an error the report names, not fatal.
func startProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return sync.OnceValue(func() error { pprof.StopCPUProfile(); return f.Close() }), nil
}

// Component is one part of the harness and the CPU its code used.
type Component struct {
	// Package is upgradelab's innermost package on the samples' stacks
	// (sim/workload: the workload API servers and the lab's app
	// controllers; e2e/monitor: the recorders), or, for stacks with none
	// of it, the package their goroutine started in, or "runtime" (the
	// garbage collector and scheduler).
	Package string        `json:"package"`
	CPU     time.Duration `json:"cpu"`
	Share   float64       `json:"share"`
}

// components reads the harness's CPU profile and charges each sample to
// its component (componentOf), the costliest first; top keeps that many
// (the rest are added up as "other").
func components(path string, top int) ([]Component, error) {
	return charge(path, top, componentOf)
}

// charge reads a CPU profile and charges each sample to what classify
// names, the costliest first; top keeps that many (the rest are added up
// as "other").
func charge(path string, top int, classify func(*profile.Sample) string) ([]Component, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	value := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			value = i
		}
	}
	if value < 0 {
		return nil, fmt.Errorf("%s: not a CPU profile (sample types %v)", path, p.SampleType)
	}
	byPkg := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[value]
		byPkg[classify(s)] += v
		total += v
	}
	out := make([]Component, 0, len(byPkg))
	for pkg, v := range byPkg {
		out = append(out, Component{Package: pkg, CPU: time.Duration(v)})
	}
	slices.SortFunc(out, func(a, b Component) int {
		return cmp.Or(cmp.Compare(b.CPU, a.CPU), strings.Compare(a.Package, b.Package))
	})
	// What classify calls "other" goes with the rest beyond the top, in
	// one "other" row, last.
	var rest Component
	if i := slices.IndexFunc(out, func(c Component) bool { return c.Package == "other" }); i >= 0 {
		rest = out[i]
		out = slices.Delete(out, i, i+1)
	}
	if len(out) > top {
		for _, c := range out[top:] {
			rest.CPU += c.CPU
		}
		out = out[:top]
	}
	if rest.CPU > 0 {
		rest.Package = "other"
		out = append(out, rest)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].CPU) / float64(total)
		}
	}
	return out, nil
}

// componentOf is the package a sample is charged to (Component.Package).
func componentOf(s *profile.Sample) string {
	outer := ""
	for _, loc := range s.Location { // innermost first
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			pkg := packageOf(line.Function.Name)
			if rest, ok := strings.CutPrefix(pkg, module); ok {
				return rest
			}
			if pkg != "runtime" && !strings.HasPrefix(pkg, "runtime/") {
				outer = pkg
			}
		}
	}
	if outer == "" {
		return "runtime"
	}
	return outer
}

// packageOf is a function's package: "a/b/c.(*T).M" is "a/b/c".
func packageOf(fn string) string {
	// A generic's type arguments may hold dots and slashes of their own:
	// "a/b.(*T[go.shape.struct { x a/c.T }]).M" is "a/b".
	if i := strings.Index(fn, "["); i >= 0 {
		fn = fn[:i]
	}
	slash := strings.LastIndex(fn, "/")
	if dot := strings.Index(fn[slash+1:], "."); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// The API server's work, as its CPU profile shows it: a sample is charged
// to the request handler on its stack (a PATCH's merge, admission,
// validation and write to etcd are all the PATCH's), to the watch
// machinery that decodes etcd's events and fans them out to watchers, or
// to the runtime (the garbage collector) when nothing else is there.
// The first entry whose frame is on a stack wins.
var apiServerWork = []struct{ frame, work string }{
	{"endpoints/handlers.PatchResource", "PATCH (and server-side apply)"},
	{"endpoints/handlers.(*patcher)", "PATCH (and server-side apply)"},
	{"endpoints/handlers.UpdateResource", "PUT"},
	{"endpoints/handlers.createHandler", "POST"},
	{"endpoints/handlers.CreateResource", "POST"},
	{"endpoints/handlers.DeleteResource", "DELETE"},
	{"endpoints/handlers.DeleteCollection", "DELETE"},
	{"endpoints/handlers.serveWatch", "WATCH (serving watchers)"},
	{"endpoints/handlers.(*WatchServer)", "WATCH (serving watchers)"},
	{"endpoints/handlers.ListResource", "LIST"},
	{"endpoints/handlers.GetResource", "GET"},
	{"storage/cacher.", "watch cache (etcd events to watchers)"},
	{"storage/etcd3.(*watchChan)", "watch cache (etcd events to watchers)"},
	{"endpoints/filters.", "authentication, audit and other filters"},
	{"server/filters.", "authentication, audit and other filters"},
	{"flowcontrol", "priority and fairness"},
}

// APIServerProfiles name the API server's CPU profiles in the fleet's
// folder, one while the clusters provision and one in the wave.
const (
	APIServerProfileProvisioning = "apiserver-provisioning.cpu.pprof"
	APIServerProfileWave         = "apiserver-wave.cpu.pprof"
)

// apiServerWorkOf is the work a sample of kube-apiserver is charged to.
func apiServerWorkOf(s *profile.Sample) string {
	var frames []string
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil {
				frames = append(frames, line.Function.Name)
			}
		}
	}
	for _, w := range apiServerWork {
		for _, f := range frames {
			if strings.Contains(f, w.frame) {
				return w.work
			}
		}
	}
	for _, f := range frames {
		if pkg := packageOf(f); pkg != "runtime" && !strings.HasPrefix(pkg, "runtime/") {
			return "other"
		}
	}
	return "runtime"
}
