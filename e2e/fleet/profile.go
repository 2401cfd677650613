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

// components reads a CPU profile and charges each sample to its
// component, the costliest first; top keeps that many (the rest are
// added up as "other").
func components(path string, top int) ([]Component, error) {
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
		byPkg[componentOf(s)] += v
		total += v
	}
	out := make([]Component, 0, len(byPkg))
	for pkg, v := range byPkg {
		out = append(out, Component{Package: pkg, CPU: time.Duration(v)})
	}
	slices.SortFunc(out, func(a, b Component) int {
		return cmp.Or(cmp.Compare(b.CPU, a.CPU), strings.Compare(a.Package, b.Package))
	})
	if len(out) > top {
		rest := Component{Package: "other"}
		for _, c := range out[top:] {
			rest.CPU += c.CPU
		}
		out = append(out[:top], rest)
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
	slash := strings.LastIndex(fn, "/")
	if dot := strings.Index(fn[slash+1:], "."); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}
