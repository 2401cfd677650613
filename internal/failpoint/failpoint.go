// Package failpoint ends a process at a named point of its work, as a
// crash there would: how a robustness test puts a crash between two
// writes that no timing could reliably land in (etcd's tests do the same
// with gofail).
//
// Points are armed by the environment variable Env, a comma-separated
// list of names, read once at start. A process started without it pays a
// map lookup per point and never stops at one. Only the e2e harness sets
// it, on a manager it starts (scenario faults, crashAt).
package failpoint

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Env names the points armed in this process.
const Env = "UPGRADELAB_FAILPOINTS"

// ExitCode is the status a process ends with at a failpoint, so whoever
// started it can tell that end from any other.
const ExitCode = 86

var armed = sync.OnceValue(func() map[string]bool {
	return parse(os.Getenv(Env))
})

func parse(v string) map[string]bool {
	out := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out[name] = true
		}
	}
	return out
}

// Armed says whether the point name is armed in this process.
func Armed(name string) bool { return armed()[name] }

// Crash ends the process at once with ExitCode when name is armed: no
// deferred function runs and nothing is flushed, as in a crash.
func Crash(name string) {
	if Armed(name) {
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		os.Exit(ExitCode)
	}
}
