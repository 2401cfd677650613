package result

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/scenario"
)

// File is the name of the results file in an artifacts folder.
const File = "results.json"

// Files of one run's folder: its timeline, and what the rules were told
// of the run (check.Params), so its timeline can be judged again
// (`upgradelab check`).
const (
	TimelineFile = "timeline.jsonl"
	ParamsFile   = "params.json"
)

// StepAPIServerCrashed is the timeline step of a crash of the embedded
// management kube-apiserver and its restart.
const StepAPIServerCrashed = "mgmt:kube-apiserver-crashed"

// Result is one run's outcome.
type Result struct {
	Provider string        `json:"provider"`
	Scenario string        `json:"scenario"`
	Form     scenario.Form `json:"form"`
	// HostOS is how the lab's hosts kept their OS: ab, ostree, or mixed
	// with each host's kind; "" when the provider does not use the lab.
	HostOS string `json:"hostOS,omitempty"`
	// Backend is "qemu" when the lab's hosts were real VMs ("" on the
	// modelled hardware).
	Backend string `json:"backend,omitempty"`
	// Cluster names the run's cluster in a fleet (e2e/fleet), where many
	// runs of one scenario share a plane; "" for a run of its own.
	Cluster  string        `json:"cluster,omitempty"`
	Strategy string        `json:"strategy"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	// Upgrade is the time from the "upgrade" step to "done".
	Upgrade time.Duration  `json:"upgrade"`
	Checks  []check.Result `json:"checks"`
	// Error is why the run stopped early ("" when it ran to the end).
	Error string `json:"error,omitempty"`
	// Timeline is the run's timeline file.
	Timeline string `json:"timeline"`
	// CAPIRateLimiting: CAPI's managers ran with their reconcile rate
	// limit.
	CAPIRateLimiting bool `json:"capiRateLimiting"`
	// TimeScale is the lab's real time per modelled time in the run.
	TimeScale float64 `json:"timeScale,omitempty"`
	// Management is where the management cluster ran (mgmt.Target's
	// text: embedded, kubeconfig=PATH, kind); empty in results written
	// before it was recorded.
	Management string `json:"management,omitempty"`
	// APIServerCrashes are the embedded management kube-apiserver's
	// crashes during the run, each restarted by the plane as the kubelet
	// restarts a static Pod (mgmt.APIServerCrash); the timeline has each
	// as a step (StepAPIServerCrashed). Not a rule: the run's verdict
	// stands, and the report says what the managers rode through.
	APIServerCrashes []string `json:"apiServerCrashes,omitempty"`
	// Metal3 names the Metal3 components that kept the hosts, when they
	// were Metal3's own (a provider with the metal3 inventory).
	Metal3 *Metal3 `json:"metal3,omitempty"`
	// Profile is where the run's wall time and CPU went.
	Profile Profile `json:"profile"`
}

// Metal3 are the versions of the Metal3 components of a run.
type Metal3 struct {
	// BMO and CAPM3 are each a release or "checkout DIR"; CAPM3 is
	// empty when the provider under test was not CAPM3.
	BMO    string `json:"bmo"`
	CAPM3  string `json:"capm3,omitempty"`
	Ironic string `json:"ironic"`
	// IronicAPI is the highest API microversion the Ironic offered.
	IronicAPI string `json:"ironicAPI"`
}

// Failed says whether the run broke a rule or stopped early.
func (r Result) Failed() bool { return r.Error != "" || len(check.Failed(r.Checks)) > 0 }

// Profile is where one run's time went: the wall time of each phase, in
// order, and the CPU time of each process that served the run. It is
// printed at the end of the run and kept as profile.txt in its folder,
// so a slow run says which phase and which process made it slow.
type Profile struct {
	Phases []PhaseTime `json:"phases"`
	// CPU: the plane's processes (kube-apiserver, etcd, CAPI's and the
	// provider's managers), then the harness process itself.
	CPU []ProcessCPU `json:"cpu"`
	// Batch, when above 1, says CPU is that of a plane and harness that
	// many runs shared at once (runner.Together counts it in one of
	// them): it is no one run's cost.
	Batch int `json:"batch,omitempty"`
}

// PhaseTime is the wall time of one phase of a run.
type PhaseTime struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took"`
}

// ProcessCPU is the CPU time one process spent serving a run, and its
// peak resident memory in bytes (0 when not read: the harness's own).
type ProcessCPU struct {
	Name    string        `json:"name"`
	CPU     time.Duration `json:"cpu"`
	PeakRSS int64         `json:"peakRSS,omitempty"`
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

// TotalCPU is the CPU time of every process that served the run.
func (p Profile) TotalCPU() time.Duration {
	var total time.Duration
	for _, c := range p.CPU {
		total += c.CPU
	}
	return total
}

// String is the profile as the run prints it: one line of phases, one of
// CPU.
func (p Profile) String() string {
	var phases, cpu []string
	for _, ph := range p.Phases {
		phases = append(phases, fmt.Sprintf("%s %s", ph.Name, ph.Took.Round(100*time.Millisecond)))
	}
	for _, c := range p.CPU {
		cpu = append(cpu, fmt.Sprintf("%s %s", c.Name, c.CPU.Round(100*time.Millisecond)))
	}
	out := "wall: " + strings.Join(phases, ", ")
	if len(cpu) == 0 { // a run on a shared plane: the plane's CPU is counted elsewhere
		return out
	}
	shared := ""
	if p.Batch > 1 {
		shared = fmt.Sprintf(", a plane and harness %d runs shared", p.Batch)
	}
	out += fmt.Sprintf("\ncpu (%s in all%s): %s", p.TotalCPU().Round(100*time.Millisecond), shared, strings.Join(cpu, ", "))
	var rss []string
	for _, c := range p.CPU {
		if c.PeakRSS > 0 {
			rss = append(rss, fmt.Sprintf("%s %d MiB", c.Name, c.PeakRSS>>20))
		}
	}
	if len(rss) > 0 {
		out += "\npeak rss: " + strings.Join(rss, ", ")
	}
	return out
}

// Write writes results to a results file (File in an artifacts folder),
// the form Read reads back.
func Write(path string, results []Result) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Read reads a results file (File in an artifacts folder). An unreadable
// or malformed file is an error naming it.
func Read(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []Result
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("%s: not a results file: %w", path, err)
	}
	return rs, nil
}
