package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// Profile is where one run's time went: the wall time of each phase, in
// order, and the CPU time of each process that served the run. It is
// printed at the end of the run and kept as profile.txt in its folder,
// so a slow run says which phase and which process made it slow.
type Profile struct {
	Phases []PhaseTime `json:"phases"`
	// CPU: the plane's processes (kube-apiserver, etcd, CAPI's and the
	// provider's managers), then the harness process itself.
	CPU []mgmt.ProcessCPU `json:"cpu"`
}

// PhaseTime is the wall time of one phase of a run.
type PhaseTime struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took"`
}

// The phases of a run, in order.
const (
	PhaseStart     = "start"     // the site, the plane, the managers
	PhaseEnroll    = "enroll"    // hosts known to the provider
	PhaseProvision = "provision" // the cluster created and rolled out
	PhaseWriteData = "write data"
	PhaseUpgrade   = "upgrade" // the upgrade made and its outcome waited for
	PhaseSettle    = "settle"  // CAPI's conditions and counts caught up
	PhaseReadData  = "read data"
	PhaseStop      = "stop" // managers, plane and site stopped
	PhaseJudge     = "judge"
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
	r.profile.Phases = append(r.profile.Phases, PhaseTime{Name: name, Took: time.Since(begin)})
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

// String is the profile as the run prints it: one line of phases, one of
// CPU.
func (p Profile) String() string {
	var phases, cpu []string
	for _, ph := range p.Phases {
		phases = append(phases, fmt.Sprintf("%s %s", ph.Name, ph.Took.Round(100*time.Millisecond)))
	}
	var total time.Duration
	for _, c := range p.CPU {
		cpu = append(cpu, fmt.Sprintf("%s %s", c.Name, c.CPU.Round(100*time.Millisecond)))
		total += c.CPU
	}
	return fmt.Sprintf("wall: %s\ncpu (%s in all): %s", strings.Join(phases, ", "), total.Round(100*time.Millisecond), strings.Join(cpu, ", "))
}

// writeProfile keeps the profile in the run's folder.
func writeProfile(dir string, p Profile) {
	_ = os.WriteFile(filepath.Join(dir, "profile.txt"), []byte(p.String()+"\n"), 0o644)
}
