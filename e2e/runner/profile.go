package runner

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/upgradelab/upgradelab/e2e/result"
)

// harnessCPU is the name the harness process's own CPU goes by: the
// lab, BMCs, host agents, workload API servers, the recorder and the
// checks run in it. Runs that share the process (the bench's four at
// once) share the figure.
const harnessCPU = "harness"

// timed runs one phase and adds its wall time to the profile.
func (r *run) timed(ctx context.Context, name string, phase func(context.Context) error) error {
	begin := time.Now()
	err := phase(ctx)
	r.profile.Phases = append(r.profile.Phases, result.PhaseTime{Name: name, Took: time.Since(begin)})
	return err
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeProfile keeps the profile in the run's folder.
func writeProfile(dir string, p result.Profile) {
	_ = os.WriteFile(filepath.Join(dir, "profile.txt"), []byte(p.String()+"\n"), 0o644)
}

// planeCPU is what each process of env's plane has used since it started.
func planeCPU(env *Env) []result.ProcessCPU {
	var out []result.ProcessCPU
	for _, c := range env.Plane.CPU() {
		out = append(out, result.ProcessCPU{Name: c.Name, CPU: c.CPU, PeakRSS: c.PeakRSS})
	}
	return out
}
