package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"

	"github.com/upgradelab/upgradelab/internal/specfile"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Strategy is how the upgrade replaces or keeps machines.
type Strategy string

const (
	// InPlace keeps every Machine: the in-place extension rewrites each
	// host's inactive slot (KCP maxSurge 0, or the single-node controller
	// for one replica; MachineDeployment maxSurge 0).
	InPlace Strategy = "in-place"
	// ScaleIn deletes a control-plane Machine before creating its
	// replacement (KCP maxSurge 0) on the host it freed (node reuse).
	ScaleIn Strategy = "scale-in"
	// Rolling creates each replacement first, on a spare host (KCP and
	// MachineDeployment maxSurge 1, maxUnavailable 0).
	Rolling Strategy = "rolling"
	// Reset is ScaleIn over a registration pool: a freed host resets into
	// its recovery OS, wipes itself and registers again under a new
	// identity before it is used again (Elemental's flow).
	Reset Strategy = "reset"
)

// Strategies are every strategy, in the order docs list them.
var Strategies = []Strategy{InPlace, ScaleIn, Rolling, Reset}

// Form is how the cluster is described to CAPI.
type Form string

const (
	Plain        Form = "plain"        // KubeadmControlPlane + MachineDeployment
	ClusterClass Form = "clusterclass" // a Cluster with a topology
)

var forms = []Form{Plain, ClusterClass}

// Scenario is one scenarios/*.yaml file.
type Scenario struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Lab is a fixtures/labs file, relative to the scenario file.
	Lab string `yaml:"lab"`
	// NeedsLab: the scenario is about the lab's hardware (IPMI-only
	// BMCs, say), so a provider that does not use the lab does not run it
	// (it would repeat another scenario's run).
	NeedsLab bool `yaml:"needsLab"`
	// Forms the scenario runs in (default both).
	Forms []Form `yaml:"forms"`
	// HostOS are the ways the lab's hosts keep their OS that the scenario
	// runs on, each a run of its own per form: ab (A/B slots), ostree
	// (OSTree deployments), mixed (the two in turn, host by host). Default:
	// as the lab file says, once.
	HostOS   []string `yaml:"hostOS"`
	Strategy Strategy `yaml:"strategy"`
	Cluster  Cluster  `yaml:"cluster"`
	From     Release  `yaml:"from"`
	To       Release  `yaml:"to"`
	Expect   Expect   `yaml:"expect"`
	// Workload is the application the workload cluster runs through the
	// upgrade (on a lab provider, whose clusters run pods); absent fields
	// take Application's defaults.
	Workload Application `yaml:"workload"`
	// Faults are injected while the scenario runs; the expectations still
	// hold (the upgrade recovers).
	Faults []Fault `yaml:"faults"`
	// Timeout bounds the whole run (provisioning and upgrade) in wall
	// time, the harness's budget at the suite's time scale (default 10m);
	// a run at a slower scale grows it in proportion (runner.Limit).
	Timeout Duration `yaml:"timeout"`
	// MinTimeScale is the fastest time scale the scenario means what it
	// says at (0: any): a race between the lab and a wall-clock wait of
	// CAPI's that cannot be scaled (docs/ARCHITECTURE.md, "Time") is
	// only run where the lab's side outlasts it. A run asked
	// for a faster scale runs at this one and says so.
	MinTimeScale float64 `yaml:"minTimeScale"`

	path string
}

// Cluster is the shape of the workload cluster.
type Cluster struct {
	ControlPlane ControlPlane `yaml:"controlPlane"`
	Workers      Workers      `yaml:"workers"`
	// HealthCheck adds CAPI MachineHealthChecks for the control plane
	// and the workers (nil: none).
	HealthCheck *HealthCheck `yaml:"healthCheck"`
}

// HealthCheck is a MachineHealthCheck: a Machine whose Node is Ready
// Unknown or False for UnhealthyAfter (lab time, as every scenario
// duration: see AtScale) is remediated by its owner (KCP, or the
// MachineSet).
type HealthCheck struct {
	UnhealthyAfter Duration `yaml:"unhealthyAfter"`
}

// ControlPlane is the KubeadmControlPlane.
type ControlPlane struct {
	Replicas int `yaml:"replicas"`
	MaxSurge int `yaml:"maxSurge"`
	// APIServerExtraArgs are the KCP's
	// clusterConfiguration.apiServer.extraArgs, flag name (no "--") to
	// value, as a site carries them from release to release: a flag or
	// feature gate the to-release removed makes the new API servers
	// crash-loop. Plain form only.
	APIServerExtraArgs map[string]string `yaml:"apiServerExtraArgs"`
}

// Workers is the one MachineDeployment.
type Workers struct {
	Replicas       int `yaml:"replicas"`
	MaxSurge       int `yaml:"maxSurge"`
	MaxUnavailable int `yaml:"maxUnavailable"`
}

// Application stands for what operators run on a cluster: a Deployment
// of Replicas pods under a PodDisruptionBudget, a DaemonSet on every
// node, and a bare pod with emptyDir (local) data. Its pods go on the
// workers, or on the control-plane nodes of a cluster without workers.
type Application struct {
	// Replicas of the Deployment; 0 means the default: the workers (at
	// least 2), or on a cluster without workers the control-plane
	// replicas (one replica on one node: a budget there can only be met
	// by a replica it lets go).
	Replicas int `yaml:"replicas"`
	// Budget is the Deployment's PodDisruptionBudget (default
	// maxUnavailable: 1).
	Budget Budget `yaml:"budget"`
	// Nodes is where the application's pods go: "workers" or
	// "control-plane"; default the workers, or the control plane of a
	// cluster without workers.
	Nodes string `yaml:"nodes"`
	// RollDuringUpgrade moves the Deployment and the DaemonSet to a new
	// image as the upgrade starts, as a release shipped beside it (a
	// GitOps change landing with the version bump) does: their rollouts
	// run beside the drains, and the budget sees both. Like the whole
	// application, lab providers only.
	RollDuringUpgrade bool `yaml:"rollDuringUpgrade"`
	// NodeDrainTimeout is CAPI's Machine deletion.nodeDrainTimeoutSeconds
	// for every Machine (0: CAPI's default, drain until done); after it
	// CAPI deletes a Machine whose drain a budget still blocks.
	NodeDrainTimeout Duration `yaml:"nodeDrainTimeout"`
}

// Budget is a PodDisruptionBudget: one of minAvailable and
// maxUnavailable, each a count ("2") or a percentage ("50%"), or none.
type Budget struct {
	MinAvailable   string `yaml:"minAvailable"`
	MaxUnavailable string `yaml:"maxUnavailable"`
	None           bool   `yaml:"none"`
}

// Application placements (Application.Nodes).
const (
	OnWorkers      = "workers"
	OnControlPlane = "control-plane"
)

// NodesFor is where the application's pods go on cluster c.
func (a Application) NodesFor(c Cluster) string {
	switch {
	case a.Nodes != "":
		return a.Nodes
	case c.Workers.Replicas > 0:
		return OnWorkers
	default:
		return OnControlPlane
	}
}

// Replicas is the Deployment's replica count for cluster c.
func (a Application) ReplicasFor(c Cluster) int {
	switch {
	case a.Replicas > 0:
		return a.Replicas
	case c.Workers.Replicas > 0:
		return max(2, c.Workers.Replicas)
	default:
		return c.ControlPlane.Replicas
	}
}

// Limit is the budget's one bound: minAvailable or maxUnavailable and its
// value ("" when the budget is none).
func (b Budget) Limit() (field, value string) {
	switch {
	case b.None:
		return "", ""
	case b.MinAvailable != "":
		return "minAvailable", b.MinAvailable
	case b.MaxUnavailable != "":
		return "maxUnavailable", b.MaxUnavailable
	default:
		return "maxUnavailable", "1"
	}
}

// Release is a Kubernetes version with the OS image that carries it, and
// optionally the NIC firmware its hosts should run.
type Release struct {
	Version     string `yaml:"version"`
	Image       string `yaml:"image"`
	NICFirmware string `yaml:"nicFirmware"`
}

// Expect is what must hold after the upgrade besides CAPI's own end state
// (every Machine up to date, Nodes Ready at the new version), which every
// scenario checks.
type Expect struct {
	// Outcome is "upgraded" (the default: every Machine up to date at the
	// to-version) or "rolled-back": the in-place update fails (an image
	// that fails its health check, a NIC change no order makes safe) and
	// every host is back on, or never left, the from-release with nothing
	// lost, its Machine kept and CAPI reporting the failed update.
	Outcome Outcome `yaml:"outcome"`
	// SameMachines: no Machine is created or deleted (in place).
	SameMachines bool `yaml:"sameMachines"`
	// SameHosts: the cluster ends on the hosts it started on.
	SameHosts bool `yaml:"sameHosts"`
	// PersistentData is "kept" (markers written before are still there)
	// or "wiped" (a host that changed hands has none) or "" (not checked).
	PersistentData string `yaml:"persistentData"`
	// SparesLeft is how many hosts labelled spare are unclaimed at the end
	// (-1 or absent: not checked).
	SparesLeft *int `yaml:"sparesLeft"`
	// BrokenRules are the rules the scenario's faults must break (a fault
	// that takes two of three control-plane hosts breaks etcd-quorum):
	// each must fail, and is reported as an expected failure; a listed
	// rule that passes fails the run (the fault did not do what it says).
	BrokenRules []string `yaml:"brokenRules"`
	// MayBreak are rules the faults may or may not break, as chance has
	// it (where the scheduler put a pod the fault then takes down): broken,
	// they are reported as expected failures; held, as passes.
	MayBreak []string `yaml:"mayBreak"`
	// StallFor is, for outcome stalled, how long the runner watches the
	// stalled upgrade after the faults fired before it judges (at least
	// a minute of wall time, which CAPI's own waits need).
	StallFor Duration `yaml:"stallFor"`
	// MaxAPIOutage is the longest the workload cluster's API may refuse
	// or fail reads during the upgrade, in lab time. Default:
	// DefaultHAOutage for a control plane of three or more (a VIP
	// failover); DefaultSingleNodeOutage for one replica, whose reboot
	// takes the API with it.
	MaxAPIOutage *Duration `yaml:"maxAPIOutage"`
}

// DefaultSingleNodeOutage bounds a one-replica control plane's API
// outage by default, in lab time: its reboot takes the API with it, from
// the graceful shutdown through POST and boot to the API server's start,
// minutes on a rack server; ten is twice a slow one's.
const DefaultSingleNodeOutage = 10 * time.Minute

// DefaultHAOutage bounds the API outage of a control plane of three or
// more by default, in lab time: the VIP's failover when the node that
// holds it goes (kube-vip's 5 s lease in its shipped manifests), with
// room for the lease's retry period, but not for a second failover in a
// row or for a lost quorum.
const DefaultHAOutage = 10 * time.Second

// APIOutageBound is the longest API outage the scenario allows.
func (s *Scenario) APIOutageBound() time.Duration {
	if s.Expect.MaxAPIOutage != nil {
		return s.Expect.MaxAPIOutage.Duration
	}
	if s.Cluster.ControlPlane.Replicas == 1 {
		return DefaultSingleNodeOutage
	}
	return DefaultHAOutage
}

// CutsPower says whether a fault cuts a host's power.
func (s *Scenario) CutsPower() bool {
	for _, f := range s.Faults {
		if f.PowerLoss != nil {
			return true
		}
	}
	return false
}

// EndRelease is the release the cluster is to end at: the to-release, or
// (reverted) the from-release the user went back to.
func (s *Scenario) EndRelease() Release {
	if s.Expect.Outcome == Reverted {
		return s.From
	}
	return s.To
}

// Outcome is how an upgrade ends.
type Outcome string

const (
	Upgraded   Outcome = "upgraded"
	RolledBack Outcome = "rolled-back"
	// Reverted: the in-place update fails (the host falls back), the
	// user then reverts the cluster's spec to the from-release, and the
	// cluster ends whole at it: every Machine up to date, none replaced.
	Reverted Outcome = "reverted"
	// Stalled: a fault the cluster cannot survive (its only
	// control-plane host dead), or a change CAPI can only roll out where
	// no host is free, stops the upgrade; the end rules do not apply,
	// the rules the stall breaks are named in brokenRules.
	Stalled Outcome = "stalled"
)

// Fault is one injected failure: when, and what. Exactly one action.
type Fault struct {
	Name string    `yaml:"name"`
	When FaultWhen `yaml:"when"`
	// Restart kills a process of the management plane (SIGKILL, as a
	// crash) and starts it again: apiserver (the management
	// kube-apiserver; etcd and every object stay), capi, kcp, cabpk, or a
	// manager of the provider config (the reference's are baremetal and
	// inplace).
	Restart string `yaml:"restart"`
	// DownFor, with restart, keeps the manager down that long before it
	// starts again, as one whose only Pod was evicted is: the fault acts
	// at the kill, and the run goes on meanwhile.
	DownFor Duration `yaml:"downFor"`
	// Failpoint, with restart, starts the manager again with that
	// failpoint armed (internal/failpoint): it crashes when its work
	// reaches the point, and is started again unarmed. The fault fires
	// at the crash; a run whose manager never reaches the point fails.
	Failpoint string `yaml:"failpoint"`
	// Replicas, with restart, replaces the manager by that many replicas
	// electing a leader (--leader-elect) behind one address that hands
	// each connection to the next, as a Deployment's Pods behind their
	// Service: calls a replica never saw the start of come to it.
	Replicas int `yaml:"replicas"`
	// BMC makes every BMC slow and flaky from then on, or takes the BMC of
	// the lab event's host offline for a while.
	BMC *BMCFault `yaml:"bmc"`
	// PowerLoss cuts the power of the lab event's host at once (a write or
	// flash under way is lost) and restores it after RestoreAfter.
	PowerLoss *PowerLossFault `yaml:"powerLoss"`
	// AgentCrash kills the host agent of the lab event's host (its API
	// drops every connection; the OS, kubelet and disk stay) and its
	// service manager starts it again after RestartAfter.
	AgentCrash *AgentCrashFault `yaml:"agentCrash"`
	// Hang freezes the OS of the lab event's host (a kernel hang: the
	// power stays on, nothing on the host answers, graceful resets are
	// ignored); only a power cycle through its BMC brings it back.
	Hang *HangFault `yaml:"hang"`
	// SlowShutdown makes graceful shutdowns slow from then on: of the lab
	// event's host, or of every host without one.
	SlowShutdown *SlowShutdownFault `yaml:"slowShutdown"`
	// PauseCluster pauses the run's Cluster (spec.paused, as clusterctl
	// move does while it moves it) and lifts the pause For later.
	PauseCluster *PauseClusterFault `yaml:"pauseCluster"`
}

// PauseClusterFault is a Cluster paused for a while.
type PauseClusterFault struct {
	For Duration `yaml:"for"`
}

// SlowShutdownFault is an OS whose graceful shutdown takes Takes, lab
// time, as one does whose kubelet holds it for its pods (graceful node
// shutdown's shutdownGracePeriod) or whose services are slow to stop.
// The lab's model takes it as lab time and scales it itself.
type SlowShutdownFault struct {
	Takes Duration `yaml:"takes"`
}

// HangFault is an OS that freezes (lab.Host.Hang). It has no settings:
// it lasts until someone power-cycles the host.
type HangFault struct{}

// AgentCrashFault is the host agent process dying.
type AgentCrashFault struct {
	RestartAfter Duration `yaml:"restartAfter"`
}

// FaultWhen is the moment: after a runner step (env or upgrade, the
// default), at the first lab event with LabEvent as its reason after it
// (e.g. WriteStarted: an image is being written), then Delay later.
type FaultWhen struct {
	AfterStep string   `yaml:"afterStep"`
	LabEvent  string   `yaml:"labEvent"`
	Delay     Duration `yaml:"delay"`
}

// BMCFault is injected on every BMC (sim/bmc.Faults), or with Offline
// on the lab event's host's BMC only (it stops answering, as a BMC
// rebooting does, and comes back on the same address).
type BMCFault struct {
	// Latency delays every answer, Redfish and IPMI.
	Latency Duration `yaml:"latency"`
	// ErrorRate is the share of Redfish requests answered 503 and of IPMI
	// datagrams lost (UDP has no error to answer with).
	ErrorRate float64 `yaml:"errorRate"`
	// Offline takes the event's host's BMC down for that long (a BMC
	// reset): no Redfish, no IPMI, IPMI sessions lost.
	Offline Duration `yaml:"offline"`
}

// PowerLossFault is a power cut (a PDU outlet, a tripped breaker).
type PowerLossFault struct {
	RestoreAfter Duration `yaml:"restoreAfter"`
	// StayOff: the power never comes back: the host's power supply is
	// dead (lab.Host.FailPowerSupply), so no one can power it on again,
	// not even its BMC, which keeps answering.
	StayOff bool `yaml:"stayOff"`
	// ControlPlanes cuts that many control-plane hosts at once (a shared
	// PDU or rack): the event's host if it serves the control plane, then
	// others that do, in name order. 0 is the event's host alone.
	ControlPlanes int `yaml:"controlPlanes"`
}

// Duration is a time.Duration written as "90s" or "5m".
type Duration struct{ time.Duration }

// MarshalText writes it as UnmarshalText reads it ("1m30s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// UnmarshalText reads a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. 90s, 5m)", b)
	}
	d.Duration = v
	return nil
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidName says whether name is lower-case letters, digits and dashes,
// starting and ending with a letter or digit: what the suite uses as
// labels and folder names (scenarios, providers, managers).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Parse reads and validates a scenario file's content; name is used in
// errors.
func Parse(name string, data []byte) (*Scenario, error) {
	s := &Scenario{}
	if err := specfile.Decode(name, data, s); err != nil {
		return nil, err
	}
	if len(s.Forms) == 0 {
		s.Forms = forms
	}
	if s.Expect.Outcome == "" {
		s.Expect.Outcome = Upgraded
	}
	if s.Timeout.Duration == 0 {
		s.Timeout.Duration = 10 * time.Minute
	}
	if errs := s.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	return s, nil
}

// validate lists everything wrong with s, field by field, in the order
// of the file.
func (s *Scenario) validate() []string {
	var p specfile.Problems
	s.validateNames(&p)
	s.validateCluster(&p)
	s.validateReleases(&p)
	s.validateExpect(&p)
	for i, f := range s.Faults {
		s.validateFault(&p, fmt.Sprintf("faults[%d]", i), f)
	}
	if s.MinTimeScale < 0 || s.MinTimeScale > 1 {
		p.Add("minTimeScale", "%g: between 0 (any scale) and 1 (real time)", s.MinTimeScale)
	}
	if s.Timeout.Duration < 0 {
		p.Add("timeout", "%s is negative", s.Timeout.Duration)
	}
	if o := s.Expect.MaxAPIOutage; o != nil && o.Duration < 0 {
		p.Add("expect.maxAPIOutage", "%s is negative", o.Duration)
	}
	return append(p, s.Workload.validate(s.Cluster)...)
}

// validateNames checks the name, the lab, the forms, the host OS modes
// and the strategy.
func (s *Scenario) validateNames(p *specfile.Problems) {
	if !namePattern.MatchString(s.Name) || len(s.Name) > 40 {
		p.Add("name", "%q must be lower-case letters, digits and dashes (at most 40)", s.Name)
	}
	if s.Lab == "" {
		p.Add("lab", "required (a fixtures/labs file)")
	}
	for i, f := range s.Forms {
		if !slices.Contains(forms, f) {
			p.Add(fmt.Sprintf("forms[%d]", i), "%q is not one of %v", f, forms)
		}
	}
	for i, m := range s.HostOS {
		if !slices.Contains(vocab.HostOSModes, m) {
			p.Add(fmt.Sprintf("hostOS[%d]", i), "%q is not one of %v", m, vocab.HostOSModes)
		} else if slices.Index(s.HostOS, m) != i {
			p.Add(fmt.Sprintf("hostOS[%d]", i), "%q is listed twice", m)
		}
	}
	if !slices.Contains(Strategies, s.Strategy) {
		p.Add("strategy", "%q is not one of %v", s.Strategy, Strategies)
	}
}

// validateCluster checks the cluster's shape against what KCP and a
// MachineDeployment accept and against the strategy.
func (s *Scenario) validateCluster(p *specfile.Problems) {
	cp, w := s.Cluster.ControlPlane, s.Cluster.Workers
	if cp.Replicas < 1 || cp.Replicas%2 == 0 {
		p.Add("cluster.controlPlane.replicas", "%d: KCP with stacked etcd needs an odd count, at least 1", cp.Replicas)
	}
	if cp.MaxSurge < 0 || cp.MaxSurge > 1 {
		p.Add("cluster.controlPlane.maxSurge", "%d: KCP allows 0 or 1", cp.MaxSurge)
	}
	if cp.MaxSurge == 0 && cp.Replicas < 3 {
		p.Add("cluster.controlPlane.maxSurge", "0 needs at least 3 replicas (KCP refuses it below; one replica is updated in place by the single-node controller)")
	}
	if (s.Strategy == ScaleIn || s.Strategy == Reset) && cp.MaxSurge != 0 {
		p.Add("cluster.controlPlane.maxSurge", "%d: strategy %s scales in (maxSurge 0)", cp.MaxSurge, s.Strategy)
	}
	for name := range cp.APIServerExtraArgs {
		if !namePattern.MatchString(name) {
			p.Add("cluster.controlPlane.apiServerExtraArgs", "%q is not a flag name like feature-gates (no leading --)", name)
		}
	}
	if len(cp.APIServerExtraArgs) > 0 && slices.Contains(s.Forms, ClusterClass) {
		p.Add("cluster.controlPlane.apiServerExtraArgs", "needs forms [plain]: the ClusterClass form takes the control plane from its class")
	}
	if hc := s.Cluster.HealthCheck; hc != nil && hc.UnhealthyAfter.Duration < time.Second {
		p.Add("cluster.healthCheck.unhealthyAfter", "%s: at least 1s of lab time (a Node reports its status every few seconds)", hc.UnhealthyAfter.Duration)
	}
	if w.Replicas < 0 || w.MaxSurge < 0 || w.MaxUnavailable < 0 {
		p.Add("cluster.workers", "replicas, maxSurge and maxUnavailable must not be negative")
	}
	if w.Replicas > 0 && w.MaxSurge == 0 && w.MaxUnavailable == 0 {
		p.Add("cluster.workers", "maxSurge and maxUnavailable cannot both be 0 (the MachineDeployment could never roll)")
	}
}

// validateReleases checks both releases: Kubernetes versions, images,
// an upgrade that goes up, NIC firmware only where it can change.
func (s *Scenario) validateReleases(p *specfile.Problems) {
	for _, r := range []struct {
		field string
		rel   Release
	}{{"from", s.From}, {"to", s.To}} {
		if !semver.IsValid(r.rel.Version) || semver.Prerelease(r.rel.Version) != "" || strings.Count(r.rel.Version, ".") != 2 {
			p.Add(r.field+".version", "%q is not a Kubernetes version like v1.36.3", r.rel.Version)
		}
		if r.rel.Image == "" {
			p.Add(r.field+".image", "required (an image of the lab's catalog)")
		}
	}
	if semver.IsValid(s.From.Version) && semver.IsValid(s.To.Version) && semver.Compare(s.From.Version, s.To.Version) >= 0 {
		p.Add("to.version", "%s is not newer than from.version %s", s.To.Version, s.From.Version)
	}
	if s.From.NICFirmware != "" {
		p.Add("from.nicFirmware", "the lab's NICs start on the NVM the lab file gives; name the wanted one in to.nicFirmware")
	}
}

// validateExpect checks the expectations against the strategy, the
// forms and each other.
func (s *Scenario) validateExpect(p *specfile.Problems) {
	if s.Expect.SameMachines && s.Strategy != InPlace {
		p.Add("expect.sameMachines", "only an in-place upgrade keeps every Machine (strategy %s replaces them)", s.Strategy)
	}
	if s.To.NICFirmware != "" && s.Strategy != InPlace {
		p.Add("to.nicFirmware", "only in-place updates flash NIC firmware")
	}
	switch s.Expect.Outcome {
	case Upgraded:
	case RolledBack, Reverted:
		if s.Strategy != InPlace {
			p.Add("expect.outcome", "%s needs strategy in-place (only an in-place update falls back to the slot it left)", s.Expect.Outcome)
		}
		if s.Expect.Outcome == Reverted && slices.Contains(s.Forms, ClusterClass) {
			p.Add("forms", "reverted needs forms [plain]: CAPI's Cluster webhook refuses to decrease spec.topology.version, so a ClusterClass cluster cannot be reverted")
		}
		if s.Expect.Outcome == Reverted && s.Cluster.Workers.Replicas > 0 {
			p.Add("cluster.workers.replicas", "reverted needs 0 workers: a MachineDeployment's Machine whose in-place update failed is not pointed back at a revert (CAPI moves no updating Machine between MachineSets); it stays failed until it is deleted and replaced")
		}
	case Stalled:
		if len(s.Faults) == 0 && len(s.Expect.BrokenRules) == 0 {
			p.Add("expect.outcome", "stalled needs a fault that stalls the upgrade, or the rules the stall breaks (expect.brokenRules)")
		}
		if s.Expect.StallFor.Duration <= 0 {
			p.Add("expect.stallFor", "stalled needs how long to watch the stalled upgrade, in lab time (e.g. 25m)")
		}
	default:
		p.Add("expect.outcome", "%q is not upgraded, rolled-back, reverted or stalled", s.Expect.Outcome)
	}
	if s.Expect.StallFor.Duration != 0 && s.Expect.Outcome != Stalled {
		p.Add("expect.stallFor", "only for outcome stalled")
	}
	for field, rules := range map[string][]string{"expect.brokenRules": s.Expect.BrokenRules, "expect.mayBreak": s.Expect.MayBreak} {
		for i, r := range rules {
			if !namePattern.MatchString(r) {
				p.Add(fmt.Sprintf("%s[%d]", field, i), "%q is not a rule's name (docs/CONFORMANCE.md lists them)", r)
			}
		}
	}
	switch s.Expect.PersistentData {
	case "", "kept", "wiped":
	default:
		p.Add("expect.persistentData", "%q is not kept or wiped", s.Expect.PersistentData)
	}
}

// validateFault checks one fault: one action, the lab event the action
// needs, its settings within range.
func (s *Scenario) validateFault(p *specfile.Problems, field string, f Fault) {
	if f.Name == "" {
		p.Add(field+".name", "required")
	}
	actions := 0
	for _, set := range []bool{f.Restart != "", f.BMC != nil, f.PowerLoss != nil, f.AgentCrash != nil, f.Hang != nil, f.SlowShutdown != nil, f.PauseCluster != nil} {
		if set {
			actions++
		}
	}
	if actions != 1 {
		p.Add(field, "give exactly one of restart, bmc, powerLoss, agentCrash, hang, slowShutdown and pauseCluster")
	}
	if f.PauseCluster != nil && f.PauseCluster.For.Duration <= 0 {
		p.Add(field+".pauseCluster.for", "%s: say how long the Cluster stays paused (e.g. 3m)", f.PauseCluster.For.Duration)
	}
	if f.SlowShutdown != nil && f.SlowShutdown.Takes.Duration <= 0 {
		p.Add(field+".slowShutdown.takes", "%s: a graceful shutdown takes some time (e.g. 3m)", f.SlowShutdown.Takes.Duration)
	}
	if f.PowerLoss != nil && f.When.LabEvent == "" {
		p.Add(field+".when.labEvent", "powerLoss needs a lab event (it cuts the power of that event's host)")
	}
	if f.PowerLoss != nil && (f.PowerLoss.ControlPlanes < 0 || f.PowerLoss.ControlPlanes > s.Cluster.ControlPlane.Replicas) {
		p.Add(field+".powerLoss.controlPlanes", "%d: between 0 and the %d control-plane replicas", f.PowerLoss.ControlPlanes, s.Cluster.ControlPlane.Replicas)
	}
	if f.PowerLoss != nil && f.PowerLoss.StayOff && f.PowerLoss.RestoreAfter.Duration != 0 {
		p.Add(field+".powerLoss", "stayOff and restoreAfter exclude each other")
	}
	if f.Hang != nil && f.When.LabEvent == "" {
		p.Add(field+".when.labEvent", "hang needs a lab event (it freezes that event's host's OS)")
	}
	if f.AgentCrash != nil && f.When.LabEvent == "" {
		p.Add(field+".when.labEvent", "agentCrash needs a lab event (it crashes that event's host's agent)")
	}
	if f.BMC != nil && f.BMC.Offline.Duration != 0 && f.When.LabEvent == "" {
		p.Add(field+".when.labEvent", "bmc.offline needs a lab event (it takes that event's host's BMC offline)")
	}
	if f.BMC != nil && f.BMC.Offline.Duration < 0 || f.PowerLoss != nil && f.PowerLoss.RestoreAfter.Duration < 0 ||
		f.AgentCrash != nil && f.AgentCrash.RestartAfter.Duration < 0 {
		p.Add(field, "durations must not be negative")
	}
	if f.Restart != "" && !namePattern.MatchString(f.Restart) {
		p.Add(field+".restart", "%q is not a manager's name (capi, kcp, cabpk or one of the provider config's)", f.Restart)
	}
	if f.Restart == "inplace" && s.Strategy != InPlace {
		p.Add(field+".restart", "the in-place extension runs only for strategy in-place")
	}
	s.validateRestart(p, field, f)
	if f.BMC != nil && (f.BMC.ErrorRate < 0 || f.BMC.ErrorRate > 0.9 || f.BMC.Latency.Duration < 0) {
		p.Add(field+".bmc", "errorRate must be within 0..0.9 and latency not negative")
	}
	if w := f.When.AfterStep; w != "" && w != "env" && w != "upgrade" {
		p.Add(field+".when.afterStep", "%q is not env or upgrade", w)
	}
	if f.When.Delay.Duration < 0 {
		p.Add(field+".when.delay", "%s is negative", f.When.Delay.Duration)
	}
}

// validateRestart checks what may go with restart: downFor, a failpoint
// or replicas, for a manager (not the API server).
func (s *Scenario) validateRestart(p *specfile.Problems, field string, f Fault) {
	set := 0
	for _, v := range []bool{f.DownFor.Duration != 0, f.Failpoint != "", f.Replicas != 0} {
		if v {
			set++
		}
	}
	switch {
	case set == 0:
	case f.Restart == "" || f.Restart == "apiserver":
		p.Add(field, "downFor, failpoint and replicas go with restart of a manager")
	case set > 1:
		p.Add(field, "downFor, failpoint and replicas exclude each other")
	case f.Replicas != 0 && (f.Replicas < 2 || f.Replicas > 5):
		p.Add(field+".replicas", "%d: between 2 and 5", f.Replicas)
	case f.DownFor.Duration < 0:
		p.Add(field+".downFor", "%s is negative", f.DownFor.Duration)
	case f.Failpoint != "" && !namePattern.MatchString(f.Failpoint):
		p.Add(field+".failpoint", "%q is not a failpoint's name (lower-case letters, digits and dashes)", f.Failpoint)
	}
}

func (a Application) validate(c Cluster) []string {
	var p specfile.Problems
	if a.Replicas < 0 {
		p.Add("workload.replicas", "%d is negative", a.Replicas)
	}
	replicas := a.ReplicasFor(c)
	b := a.Budget
	set := 0
	for _, v := range []string{b.MinAvailable, b.MaxUnavailable} {
		if v != "" {
			set++
		}
	}
	if b.None && set > 0 || set > 1 {
		p.Add("workload.budget", "give one of minAvailable, maxUnavailable and none")
	}
	for _, f := range []struct{ name, value string }{{"minAvailable", b.MinAvailable}, {"maxUnavailable", b.MaxUnavailable}} {
		if f.value == "" {
			continue
		}
		n, pct, ok := parseBound(f.value)
		switch {
		case !ok:
			p.Add("workload.budget."+f.name, "%q is not a count (2) or a percentage (50%%)", f.value)
		case pct && n > 100:
			p.Add("workload.budget."+f.name, "%s is above 100%%", f.value)
		case f.name == "minAvailable" && !pct && n > replicas:
			p.Add("workload.budget.minAvailable", "%d is above the %d replicas: the budget could never be met, so no pod could ever be evicted and a drain would wait forever (use %d to forbid every eviction)", n, replicas, replicas)
		}
	}
	if a.NodeDrainTimeout.Duration < 0 {
		p.Add("workload.nodeDrainTimeout", "%s is negative", a.NodeDrainTimeout.Duration)
	}
	switch a.Nodes {
	case "", OnControlPlane:
	case OnWorkers:
		if c.Workers.Replicas == 0 {
			p.Add("workload.nodes", "workers, but the cluster has none (cluster.workers.replicas is 0)")
		}
	default:
		p.Add("workload.nodes", "%q is not workers or control-plane", a.Nodes)
	}
	return p
}

// parseBound reads "2" or "50%".
func parseBound(v string) (n int, percent bool, ok bool) {
	s, percent := strings.CutSuffix(v, "%")
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != s {
		return 0, false, false
	}
	return n, percent, true
}

// Read reads and parses a scenario file (Parse); its LabPath and Path
// are then resolved against the file's folder.
func Read(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	s.path = path
	return s, nil
}

// Path is the file s was read from ("" when parsed from bytes).
func (s *Scenario) Path() string { return s.path }

// WithCluster is a copy of s with another cluster shape, checked as the
// scenario file would be: the shape against the strategy, the
// application against the shape. The error names the fields of s's file
// ("cluster.controlPlane.replicas: ...").
func (s *Scenario) WithCluster(c Cluster) (*Scenario, error) {
	out := *s
	out.Cluster = c
	if errs := out.validate(); len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return &out, nil
}

// LabPath is the lab file, resolved against the scenario's folder.
func (s *Scenario) LabPath() string {
	if filepath.IsAbs(s.Lab) || s.path == "" {
		return s.Lab
	}
	return filepath.Join(filepath.Dir(s.path), s.Lab)
}

// HostsNeeded is how many hosts the upgrade needs to make progress: every
// replica, plus one surge machine at a time (a second surge machine
// waits for a freed host); none in place.
func (s *Scenario) HostsNeeded() int {
	cp, w := s.Cluster.ControlPlane, s.Cluster.Workers
	n := cp.Replicas + w.Replicas
	if s.Strategy == InPlace {
		return n
	}
	if w.Replicas == 0 {
		return n + cp.MaxSurge
	}
	return n + max(cp.MaxSurge, w.MaxSurge)
}
