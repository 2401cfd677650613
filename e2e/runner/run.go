package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/ironic"
	"github.com/upgradelab/upgradelab/e2e/metal3src"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/proc"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Options are what every run of a suite shares.
type Options struct {
	// RepoRoot finds fixtures/.
	RepoRoot string
	// Dir is the run's artifacts folder (timeline, logs, results).
	Dir   string
	Scale timescale.Scale
	// Progress receives one line per step and per change of progress.
	Progress io.Writer
	// Binaries built once per suite (reference.Build).
	ProviderBinary, ExtensionBinary string
	// Provider is what the scenario runs against (fixtures/providers);
	// nil is the reference provider's config.
	Provider *provider.Config
	// RateLimitedReconciles runs CAPI's managers with their reconcile
	// rate limit, which the plane otherwise turns off (mgmt.Options).
	RateLimitedReconciles bool
	// Management is where the management plane runs (mgmt.Target; zero:
	// embedded), and KindNodeImage a kind target's node image.
	Management    mgmt.Target
	KindNodeImage string
	// Name is how progress lines name the run: "provider scenario/form"
	// by default; a suite that makes a run more than once adds the repeat.
	Name string
	// Shared, when set, is a plane and site the run shares with other
	// runs (a fleet, e2e/fleet) instead of starting its own.
	Shared *Shared
	// Planes, when set, keeps the run's plane for the process's next run
	// and gives it the plane the last run left, when the run can share
	// one (Planes says which can).
	Planes *Planes
	// Settle bounds the wait, once every Machine is done, for CAPI's
	// Cluster, counts and add-ons to catch up (default DefaultSettle).
	Settle time.Duration
	// ExtraTime is added to the scenario's timeout: a fleet gives what it
	// adds to the provisioning bound (and the settle), so a cluster that
	// used the longer provisioning still has the scenario's time for the
	// rest.
	ExtraTime time.Duration
}

// Shared is what a run on a shared plane and site is given: the Env (the
// run works in a namespace of its own there, Env.InNamespace, and never
// stops the Env), the lab hosts that are its own, and the wave that says
// when it may upgrade.
type Shared struct {
	Env *Env
	// Hosts are the lab hosts the run enrolls and records; every other
	// host of the lab belongs to another run.
	Hosts []string
	// Wave holds the upgrade until the wave lets the run start; nil
	// starts at once.
	Wave Wave
	// Cluster names the run's cluster among the others in its result
	// (result.Result.Cluster): a fleet's clusters are told apart by it.
	Cluster string
}

// Wave schedules the runs sharing a plane. Admit blocks until the run
// named cluster may enroll its hosts and provision; Start blocks until it
// may upgrade (and frees its place among those provisioning); End says
// the run's upgrade is over (or that the run stopped before it), so the
// wave can move on. The runner calls End exactly once for every run it
// gave a Wave.
type Wave interface {
	Admit(ctx context.Context, cluster string) error
	Start(ctx context.Context, cluster string) error
	End(cluster string)
}

// DefaultProvider is the reference provider's config, relative to the
// repository.
const DefaultProvider = "fixtures/providers/baremetal.yaml"

type run struct {
	provider *provider.Config
	scenario *scenario.Scenario
	lab      *lab.Definition
	form     scenario.Form
	opts     Options
	env      *Env
	tl       *timeline.Timeline
	prefix   string
	// atStep are the faults that act the moment a step is recorded (no
	// lab event, no delay), by step: each channel closes once its fault
	// acted, and the step's work waits for them (awaitFaultsAt), so such
	// a fault lands before the work, not somewhere in it.
	atStep map[string][]chan struct{}
	// faultErrs carries faults that could not be injected.
	faultErrs chan error

	workloadMu sync.Mutex
	workload   client.Client
	// watched reads the run's namespace from the recorder's cache: what
	// settle waits for there, the recorder's last poll sees.
	watched client.Reader
	profile result.Profile
	// apiServerCrashes are the management kube-apiserver's crashes the
	// run saw (recordAPIServerCrash).
	crashMu          sync.Mutex
	apiServerCrashes []string
	// waveStarted ends the run's part of a Shared wave (once; nil when
	// there is none or it ended).
	waveStarted func()
	// keptFrom is where the run began on a kept plane (Planes): what its
	// processes had used and its logs held; nil on a plane of its own.
	keptFrom *keptMarks
}

// workloadClient is the workload cluster's client, built once CAPI wrote
// its kubeconfig and shared by the recorder and the wait loop.
func (r *run) workloadClient(ctx context.Context) (client.Client, error) {
	r.workloadMu.Lock()
	defer r.workloadMu.Unlock()
	if r.workload == nil {
		c, err := r.env.Workload(ctx, r.watched, clusterName)
		if err != nil {
			return nil, err
		}
		r.workload = c
	}
	return r.workload, nil
}

// managementName is how a result names where the plane ran.
func managementName(t mgmt.Target) string {
	if t.Kind == "" {
		t.Kind = mgmt.Embedded
	}
	return t.String()
}

// Run runs one scenario in one form and judges its timeline. The result
// is also written to Dir/result.json.
func Run(ctx context.Context, s *scenario.Scenario, def *lab.Definition, form scenario.Form, o Options) result.Result {
	r := &run{provider: o.Provider, scenario: s, lab: def, form: form, opts: o}
	res := result.Result{Scenario: s.Name, Form: form, Strategy: string(s.Strategy), Started: time.Now(), Timeline: filepath.Join(o.Dir, result.TimelineFile),
		CAPIRateLimiting: o.RateLimitedReconciles, Management: managementName(o.Management)}
	err := r.loadProvider()
	if r.provider != nil {
		res.Provider = r.provider.Name
		if r.provider.Lab {
			res.HostOS = def.HostOS()
			if def.Backend() != lab.BackendTest {
				res.Backend = def.Backend()
			}
		}
		r.prefix = fmt.Sprintf("[%s %s/%s]", r.provider.Name, s.Name, form)
		if o.Shared != nil {
			res.Cluster = o.Shared.Cluster
		}
		if o.Name != "" {
			r.prefix = "[" + o.Name + "]"
		}
		r.slowToScenario()
		r.fitBudget()
		r.slowToIronic()
	}
	res.TimeScale = float64(r.opts.Scale)
	r.scenario = s.AtScale(r.opts.Scale)
	cpuBefore := processCPU()
	if err == nil {
		err = r.execute(ctx)
	}
	if r.waveStarted != nil {
		r.waveStarted() // a run that stopped before its upgrade
	}
	if o.Shared == nil { // a shared harness's CPU is every run's: the fleet reports it
		r.profile.CPU = append(r.profile.CPU, result.ProcessCPU{Name: harnessCPU, CPU: processCPU() - cpuBefore})
	}
	res.Duration = time.Since(res.Started)
	res.Metal3 = r.metal3Versions()
	r.crashMu.Lock()
	res.APIServerCrashes = r.apiServerCrashes
	r.crashMu.Unlock()
	if err != nil {
		res.Error = err.Error()
		r.say("stopped: %v", err)
	}
	if r.tl != nil {
		entries := r.tl.Entries()
		p := Params(r.scenario, def, r.provider, entries)
		p.Scale = r.opts.Scale
		if err != nil {
			p.Stopped = err.Error()
		}
		if b, err := json.MarshalIndent(p, "", "  "); err == nil {
			_ = os.WriteFile(filepath.Join(o.Dir, result.ParamsFile), b, 0o644)
		}
		judged := time.Now()
		res.Checks = check.Run(entries, p)
		r.profile.Phases = append(r.profile.Phases, result.PhaseTime{Name: result.PhaseJudge, Took: time.Since(judged)})
		r.tl.Close()
		var from time.Time
		for _, e := range entries {
			switch {
			case e.Kind == timeline.KindStep && e.Name == check.StepUpgrade:
				from = e.Time
			case e.Kind == timeline.KindStep && e.Name == check.StepDone && !from.IsZero():
				res.Upgrade = e.Time.Sub(from)
			}
		}
	}
	failed := check.Failed(res.Checks)
	res.Profile = r.profile
	writeProfile(o.Dir, r.profile)
	for _, line := range strings.Split(r.profile.String(), "\n") {
		r.say("profile %s", line)
	}
	r.say("done in %s: %d rule(s) broken", res.Duration.Round(time.Second), len(failed))
	writeResult(o.Dir, res)
	return res
}

// writeResult keeps the run's result in its folder.
func writeResult(dir string, res result.Result) {
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644)
	}
}

// loadProvider is the run's provider config (the default one when none
// was given), and whether the run can start: at scale 0 every lab-time
// duration would be zero (no stall watched, no API outage allowed).
func (r *run) loadProvider() error {
	var err error
	if r.provider == nil {
		r.provider, err = provider.Load(filepath.Join(r.opts.RepoRoot, DefaultProvider))
	}
	if err == nil && r.opts.Scale <= 0 {
		err = fmt.Errorf("time scale %g: a run needs one above 0 (0.01 runs a lab minute in 0.6 s)", float64(r.opts.Scale))
	}
	return err
}

// Params are what the rules are told of a run of s on def against prov,
// whose timeline is entries.
func Params(s *scenario.Scenario, def *lab.Definition, prov *provider.Config, entries []timeline.Entry) check.Params {
	p := check.ParamsFor(s)
	p.HostsVisible, p.HostData = prov.Lab, prov.Lab
	p.SparesVisible = prov.Lab && prov.Hosts.SpareLabel != ""
	p.RBACEnforced = true // the runner's planes always enforce it
	// Only the lab's workload clusters run pods and model etcd on the
	// hosts; another provider's (CAPI's in-memory one) do neither.
	p.Apps, p.AddonPods, p.EtcdOnHosts = prov.Lab, prov.Lab, prov.Lab
	p.OSTreeHosts = prov.Lab && def.HostOSMode() != vocab.HostOSAB
	p.ToCoreDNS = coreDNSAsked(entries)
	if to, err := def.Catalog.Get(s.EndRelease().Image); err == nil && prov.Lab { // CAPI's in-memory etcd members carry no image
		p.ToEtcd = to.Etcd
	}
	return p
}

// recordForbidden puts what the API server refused each manager (read
// from their logs) on the timeline, for rbac-sufficient.
func (r *run) recordForbidden() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var since mgmt.RefusalMark // a kept plane's earlier runs' refusals are theirs
	if r.keptFrom != nil {
		since = r.keptFrom.refusals
	}
	forbidden, transient := r.env.Plane.ForbiddenSince(ctx, since)
	for _, name := range slices.Sorted(maps.Keys(transient)) {
		r.say("manager %s was refused %d request(s) that its RBAC allows now: transient, as while a restarted API server's authorizer syncs", name, transient[name])
	}
	for _, name := range slices.Sorted(maps.Keys(forbidden)) {
		lines := forbidden[name]
		r.say("manager %s was refused %d request(s) for want of RBAC, first: %s", name, len(lines), lines[0])
		r.tl.Add(timeline.Entry{Kind: check.KindForbidden, Name: name,
			New: map[string]string{check.FieldCount: strconv.Itoa(len(lines)), check.FieldFirst: lines[0]}})
	}
}

// planeProgress passes the plane's progress lines on, as the run's own,
// when the plane is on kind (the cluster and Pods take tens of seconds);
// an embedded plane's are left out.
func (r *run) planeProgress() io.Writer {
	if r.opts.Management.Kind != mgmt.KindCluster {
		return nil
	}
	return lineWriter(func(line string) { r.say("%s", line) })
}

// lineWriter calls its function with each line written to it.
type lineWriter func(string)

func (w lineWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			w(line)
		}
	}
	return len(p), nil
}

// recordAPIServerCrash puts a crash of the embedded management
// kube-apiserver, which the plane restarted, on the timeline at the time
// it happened (a crash during the plane's start too) and on the result.
func (r *run) recordAPIServerCrash(c mgmt.APIServerCrash) {
	if r.keptFrom != nil && c.Time.Before(r.keptFrom.at) {
		return // an earlier run's, on the plane kept from it
	}
	r.say("management %s", c)
	r.tl.Add(timeline.Entry{Time: c.Time, Kind: timeline.KindStep, Name: result.StepAPIServerCrashed, New: map[string]string{"detail": c.String()}})
	r.crashMu.Lock()
	r.apiServerCrashes = append(r.apiServerCrashes, c.String())
	r.crashMu.Unlock()
}

func (r *run) say(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "%s %s %s\n", time.Now().Format("15:04:05"), r.prefix, fmt.Sprintf(format, args...))
	}
}

// execute runs the six steps; each phase function is one step.
func (r *run) execute(parent context.Context) (err error) {
	if err := r.prepare(parent); err != nil {
		return err
	}
	// The scenario's timeout bounds the run's own work: while a shared
	// run waits for its turn in a wave, the clock stops.
	ctx, limit := newPausableTimeout(parent, r.scenario.Timeout.Duration+r.opts.ExtraTime)
	defer limit.stop()
	defer func() {
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, context.DeadlineExceeded) && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
	}()
	if r.tl, err = timeline.Create(filepath.Join(r.opts.Dir, result.TimelineFile)); err != nil {
		return err
	}
	release, err := r.holdFixedPorts(ctx)
	if err != nil {
		return err
	}
	defer release() // after the deferred stop below: deferred calls run last-in first-out
	if err := r.timed(ctx, result.PhaseStart, r.start); err != nil {
		return err
	}
	defer r.env.Plane.OnAPIServerCrash(r.recordAPIServerCrash)()
	defer r.stopEnv(ctx)
	faultCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	r.faultErrs = make(chan error, len(r.scenario.Faults))
	r.injectFaults(faultCtx, r.faultErrs)
	r.tl.Step("env", "plane and lab up")
	if err := r.awaitFaultsAt(ctx, "env"); err != nil {
		return err
	}
	if err := r.waitForWave(ctx, limit, "let this cluster provision", Wave.Admit); err != nil {
		return err
	}
	recCtx, stopRecording := context.WithCancel(context.Background())
	defer stopRecording()
	rec, err := r.startRecording(recCtx)
	if err != nil {
		return err
	}
	for _, phase := range []struct {
		name string
		run  func(context.Context) error
	}{{result.PhaseEnroll, r.enrollHosts}, {result.PhaseProvision, r.provision}, {result.PhaseWriteData, r.writeDataStep}} {
		if err := r.timed(ctx, phase.name, phase.run); err != nil {
			return err
		}
	}
	rec.Poll(ctx)
	if err := r.waitForWave(ctx, limit, "start this cluster's upgrade", Wave.Start); err != nil {
		return err
	}
	if err := r.timed(ctx, result.PhaseUpgrade, r.upgradeAndWait); err != nil {
		return err // Run ends the run's part of the wave
	}
	return r.afterUpgrade(ctx, rec)
}

// prepare is what comes before the run's clock starts: its folder, the
// provider's yes to the scenario, and what the run starts, built (a cold
// build takes minutes, and a verdict must not depend on it). A shared
// run ends its part of the wave however it returns, so the others never
// wait for it (Run calls waveStarted at the end).
func (r *run) prepare(ctx context.Context) error {
	if w := r.shared().Wave; w != nil {
		var once sync.Once
		r.waveStarted = func() { once.Do(func() { w.End(r.clusterID()) }) }
	}
	if err := os.MkdirAll(r.opts.Dir, 0o755); err != nil {
		return err
	}
	if ok, why := r.provider.Runs(r.scenario); !ok {
		return errors.New(why)
	}
	return r.build(ctx)
}

// holdFixedPorts holds the ports the provider's managers bind whatever
// they are told, waiting while another run holds them; release lets
// them go. A run on a shared plane holds none: who started the plane
// holds them (Together).
func (r *run) holdFixedPorts(ctx context.Context) (release func(), err error) {
	ports := r.provider.FixedPorts()
	if len(ports) == 0 || r.opts.Shared != nil {
		return func() {}, nil
	}
	r.say("holding ports %v, which %s's managers bind whatever they are told (waits while another run holds them)", ports, r.provider.Name)
	return loopback.Hold(ctx, ports...)
}

// stopEnv reads what the plane's managers were refused and, on a plane
// of the run's own, what each process used, then stops plane and lab.
// A shared plane is read for every run on it (a refusal breaks
// rbac-sufficient on each); the fleet reports its processes and stops it.
func (r *run) stopEnv(ctx context.Context) {
	if r.opts.Shared != nil {
		r.recordForbidden()
		return
	}
	if r.keptFrom != nil {
		r.stopKept(ctx)
		return
	}
	r.profile.CPU = append(r.profile.CPU, planeCPU(r.env)...)
	if r.env.Ironic != nil {
		for _, p := range r.env.Ironic.Processes() {
			if u, ok := proc.ReadUsage(p.PID()); ok {
				r.profile.CPU = append(r.profile.CPU, result.ProcessCPU{Name: p.Name, CPU: u.CPU, PeakRSS: u.PeakRSS})
			}
		}
	}
	r.recordForbidden()
	_ = r.timed(ctx, result.PhaseStop, func(context.Context) error { r.env.Stop(); return nil })
}

// startRecording starts the recorder on the management objects and, on
// the lab, the recorders of its events and of the workload cluster's.
func (r *run) startRecording(ctx context.Context) (*monitor.Recorder, error) {
	var err error
	if r.shared().Env != nil {
		r.watched, err = r.env.Watched()
	} else {
		r.watched, err = monitor.WatchedReader(ctx, r.env.Plane.RESTConfig, reference.Scheme(), r.env.Namespace)
	}
	if err != nil {
		return nil, err
	}
	rec := &monitor.Recorder{Management: r.watched, Namespace: r.env.Namespace, Timeline: r.tl,
		Workload: r.workloadClient, Hosts: r.provider.Lab, SpareLabel: r.provider.Hosts.SpareLabel}
	go rec.Run(ctx)
	if r.provider.Lab {
		go monitor.RecordLab(ctx, r.env.Site.Lab, r.tl, r.ownHost, rec.Wake)
		go monitor.RecordWorkload(ctx, r.env.Site.Workloads, r.env.Namespace+"/"+clusterName, r.tl, rec.Wake)
	}
	if r.env.Ironic != nil {
		go monitor.RecordIronic(ctx, ironic.NewClient(r.env.Ironic.URL), r.tl, r.ownHost)
	}
	return rec, nil
}

// afterUpgrade marks the upgrade done, lets the wave move on, and waits
// for CAPI's conditions to settle before reading the data back.
func (r *run) afterUpgrade(ctx context.Context, rec *monitor.Recorder) error {
	rec.Poll(ctx)
	r.tl.Step(check.StepDone, r.doneDetail())
	if r.waveStarted != nil {
		r.waveStarted()
	}
	if err := r.faultsFired(); err != nil {
		return err
	}
	r.say("step 6/6: waiting for CAPI's Cluster conditions to settle, reading the data back")
	_ = r.timed(ctx, result.PhaseSettle, func(ctx context.Context) error {
		if r.scenario.Expect.Outcome != scenario.Stalled {
			r.settle(ctx, cmp.Or(r.opts.Settle, DefaultSettle), r.scenario.Expect.Outcome)
		}
		rec.Poll(ctx)
		return nil
	})
	return r.timed(ctx, result.PhaseReadData, func(ctx context.Context) error { r.readData(ctx); return nil })
}

// shared is the run's Shared, or an empty one.
func (r *run) shared() Shared {
	if r.opts.Shared == nil {
		return Shared{}
	}
	return *r.opts.Shared
}

// clusterID names the run's cluster to its wave: its namespace and name
// once the run has a namespace, its progress prefix before.
func (r *run) clusterID() string {
	if r.opts.Name != "" {
		return r.opts.Name
	}
	return r.prefix
}

// ownHost says whether a lab host is the run's: every host, unless the
// run shares the lab (Shared.Hosts).
func (r *run) ownHost(name string) bool {
	if r.opts.Shared == nil {
		return true
	}
	return slices.Contains(r.opts.Shared.Hosts, name)
}

// waitForWave holds a shared run until its wave lets it go on (wait is
// Wave.Admit or Wave.Start), with the run's timeout paused meanwhile.
func (r *run) waitForWave(ctx context.Context, limit *pausableTimeout, what string, wait func(Wave, context.Context, string) error) error {
	w := r.shared().Wave
	if w == nil {
		return nil
	}
	r.say("waiting for the wave to %s", what)
	limit.pause()
	defer limit.resume()
	if err := wait(w, ctx, r.clusterID()); err != nil {
		return fmt.Errorf("the wave did not %s: %w", what, err)
	}
	return nil
}

// start is step 1: the site (lab providers), the plane and the managers.
func (r *run) start(ctx context.Context) (err error) {
	if sh := r.opts.Shared; sh != nil {
		if r.provider.Lab {
			r.say("step 1/6: a namespace of the shared plane, %d host(s) of the lab", len(sh.Hosts))
		} else {
			r.say("step 1/6: a namespace of the plane the batch shares")
		}
		r.env, err = sh.Env.InNamespace(ctx, r.scenario.Strategy)
		return err
	}
	switch {
	case r.sharesPlane():
		r.say("step 1/6: starting the lab %s and the provider, on the plane this process keeps for its runs", r.lab.Spec.Name)
		if r.env, r.keptFrom, err = r.opts.Planes.env(ctx, r.envOptions()); !errors.Is(err, errPlaneBusy) {
			return err
		}
		r.say("%v: starting a plane of its own", err)
	case r.provider.Lab:
		r.opts.Planes.StopIdle() // no idle plane beside this run's own
		r.say("step 1/6: starting the lab %s, CAPI's managers and the provider", r.lab.Spec.Name)
	default:
		r.opts.Planes.StopIdle()
		r.say("step 1/6: starting CAPI's managers and the provider")
	}
	r.env, err = StartEnv(ctx, r.envOptions())
	return err
}

// metal3Versions names the Metal3 components of a run on Metal3's
// inventory (nil on any other).
func (r *run) metal3Versions() *result.Metal3 {
	if r.env == nil || r.env.Ironic == nil {
		return nil
	}
	v := &result.Metal3{BMO: metal3src.BMO.Built(), Ironic: r.env.Ironic.Version, IronicAPI: r.env.Ironic.APIVersion}
	if slices.ContainsFunc(r.provider.Managers, func(m provider.Manager) bool { return m.Reference == "capm3" }) {
		v.CAPM3 = metal3src.CAPM3.Built()
	}
	return v
}

// slowToScenario raises the run's time scale to the scenario's
// minTimeScale, before the budget is fitted to it: the scenario's race
// is not there at a faster one.
func (r *run) slowToScenario() {
	if floor := timescale.Scale(r.scenario.MinTimeScale); r.opts.Scale < floor && r.opts.Shared != nil {
		r.say("time scale %g kept, the fleet's lab's, below the scenario's minTimeScale %g: its race may not show", float64(r.opts.Scale), float64(floor))
	} else if r.opts.Scale < floor {
		r.say("time scale %g raised to the scenario's minTimeScale %g", float64(r.opts.Scale), float64(floor))
		r.opts.Scale = floor
	}
}

// slowToIronic fits the run to Ironic when Metal3's inventory keeps the
// hosts: the lab's time scale rises to Ironic's floor for the lab (see
// ironic.MinScaleFor). Ironic acts in wall time (its polls, and ipmitool
// commands five seconds apart per BMC), so the lab must not outrun it.
func (r *run) slowToIronic() {
	if !r.provider.Metal3Inventory() {
		return
	}
	if floor := ironic.MinScaleFor(r.lab); r.opts.Scale < floor {
		r.say("time scale %g raised to %g: the lab runs no faster under Ironic, which acts in wall time", float64(r.opts.Scale), float64(floor))
		r.opts.Scale = floor
	}
}

// fitBudget raises the run's wall-time budget to Limit at the scale the
// run was asked for (before slowToIronic, whose pace the provider's
// intervals declare), and the provider's intervals, sized for the
// suite's scale too, in the same proportion: on a copy, as a fleet's
// runs share one config.
func (r *run) fitBudget() {
	if limit, raised := r.scenario.Timeout.Duration+r.opts.ExtraTime, Limit(r.scenario, r.provider, r.opts.ExtraTime, r.opts.Scale); raised > limit {
		r.say("timeout %s raised to %s, for the time scale %g (and on Metal3's inventory the provider's intervals, Ironic acting in wall time)", limit, raised, float64(r.opts.Scale))
		r.opts.ExtraTime += raised - limit
	}
	if f := slower(r.opts.Scale); f > 1 {
		p := *r.provider
		p.Intervals.Provision.Duration = time.Duration(float64(p.Intervals.Provision.Duration) * f)
		p.Intervals.Upgrade.Duration = time.Duration(float64(p.Intervals.Upgrade.Duration) * f)
		r.provider = &p
	}
}

// slower is how many times slower than the suite's a scale runs the
// lab, at least 1.
func slower(scale timescale.Scale) float64 { return max(1, float64(scale/timescale.Suite)) }

// Limit is how long a run of s against prov asked for scale may work
// once its builds are done: the scenario's timeout, a budget sized for
// the suite's time scale (timescale.Suite) and grown in proportion at a
// slower one (the scenario's minTimeScale at least), plus extra (a fleet's wait); on Metal3's inventory at
// least the provider's provisioning and upgrade intervals together, the
// pace it declares on Ironic's wall time (its scale floor is not counted
// twice). A test framework's own timeout for the run must allow it.
func Limit(s *scenario.Scenario, prov *provider.Config, extra time.Duration, scale timescale.Scale) time.Duration {
	scale = max(scale, timescale.Scale(s.MinTimeScale))
	limit := time.Duration(float64(s.Timeout.Duration) * slower(scale))
	if prov != nil && prov.Metal3Inventory() {
		limit = max(limit, prov.Intervals.Provision.Duration+prov.Intervals.Upgrade.Duration)
	}
	return limit + extra
}

// envOptions are the run's own environment's (not Shared).
func (r *run) envOptions() EnvOptions {
	o := EnvOptions{Provider: r.provider, Strategy: r.scenario.Strategy, RepoRoot: r.opts.RepoRoot,
		Lab: r.lab, Dir: r.opts.Dir, Scale: r.opts.Scale,
		ProviderBinary: r.opts.ProviderBinary, ExtensionBinary: r.opts.ExtensionBinary,
		RateLimitedReconciles: r.opts.RateLimitedReconciles, Management: r.opts.Management, KindNodeImage: r.opts.KindNodeImage,
		PlaneProgress: r.planeProgress()}
	if r.sharesPlane() { // a kept plane runs every strategy's managers
		o.Strategies = r.provider.Strategies
	}
	return o
}

// build makes what the run's own environment starts (EnvOptions.Build)
// and keeps the reference binaries for its start; a Shared run's
// environment was built and started by its fleet.
func (r *run) build(ctx context.Context) error {
	if r.opts.Shared != nil {
		return nil
	}
	o := r.envOptions()
	if err := o.Build(ctx, lineWriter(func(line string) { r.say("%s", line) })); err != nil {
		return err
	}
	r.opts.ProviderBinary, r.opts.ExtensionBinary = o.ProviderBinary, o.ExtensionBinary
	return nil
}

// enrollHosts is step 2.
func (r *run) enrollHosts(ctx context.Context) error {
	if !r.provider.Lab {
		r.say("step 2/6: no hosts to enroll (provider %s brings its own machines)", r.provider.Name)
		return nil
	}
	r.say("step 2/6: enrolling the hosts")
	return r.enroll(ctx)
}

// provision is step 3: the cluster at the from-release, rolled out.
func (r *run) provision(ctx context.Context) error {
	r.say("step 3/6: creating the %s cluster at %s", r.form, r.scenario.From.Version)
	if err := r.createCluster(ctx); err != nil {
		return err
	}
	return r.waitRolledOut(ctx, r.scenario.From.Version, "provisioning", r.provider.Intervals.Provision.Duration)
}

// writeDataStep is step 4.
func (r *run) writeDataStep(ctx context.Context) error {
	if r.provider.Lab {
		r.say("step 4/6: writing data: a ConfigMap in the workload cluster, markers on the persistent partitions; deploying the application")
	} else {
		r.say("step 4/6: writing data: a ConfigMap in the workload cluster")
	}
	return r.writeData(ctx)
}

// upgradeAndWait is step 5: the upgrade as a user makes it, then the
// wait for the scenario's outcome.
func (r *run) upgradeAndWait(ctx context.Context) error {
	r.tl.Step(check.StepUpgrade, fmt.Sprintf("%s -> %s (%s)", r.scenario.From.Version, r.scenario.To.Version, r.scenario.Strategy))
	if err := r.awaitFaultsAt(ctx, check.StepUpgrade); err != nil {
		return err
	}
	r.say("step 5/6: upgrading to %s (%s)", r.scenario.To.Version, r.scenario.Strategy)
	if err := r.upgrade(ctx); err != nil {
		return err
	}
	if r.scenario.Workload.RollDuringUpgrade && r.provider.Lab {
		if err := r.rollApp(ctx); err != nil {
			return err
		}
	}
	switch r.scenario.Expect.Outcome {
	case scenario.RolledBack:
		return r.waitRolledBack(ctx, r.provider.Intervals.Upgrade.Duration)
	case scenario.Reverted:
		if err := r.waitRolledBack(ctx, r.provider.Intervals.Upgrade.Duration); err != nil {
			return err
		}
		r.tl.Step(check.StepRevert, fmt.Sprintf("%s -> %s: the update failed, the user goes back", r.scenario.To.Version, r.scenario.From.Version))
		r.say("step 5/6: the update failed; reverting the cluster to %s", r.scenario.From.Version)
		if err := r.revert(ctx); err != nil {
			return err
		}
		return r.waitRolledOut(ctx, r.scenario.From.Version, "revert", r.provider.Intervals.Upgrade.Duration)
	case scenario.Stalled:
		return r.waitStalled(ctx, r.scenario.Expect.StallFor.Duration)
	}
	return r.waitRolledOut(ctx, r.scenario.To.Version, "upgrade", r.provider.Intervals.Upgrade.Duration)
}

func (r *run) doneDetail() string {
	switch r.scenario.Expect.Outcome {
	case scenario.RolledBack:
		return "the update failed and every Node is back at " + r.scenario.From.Version
	case scenario.Reverted:
		return "the update failed, the spec went back, and every Machine is up to date at " + r.scenario.From.Version
	case scenario.Stalled:
		return "the upgrade stalled, as the scenario's fault makes it"
	}
	return "every Machine up to date"
}

// coreDNSAsked is the CoreDNS tag the KCP's spec names last in the
// timeline: what KCP must have moved CoreDNS to ("" when the templates
// leave CoreDNS to the cluster).
func coreDNSAsked(entries []timeline.Entry) string {
	tag := ""
	for _, e := range entries {
		if e.Kind == vocab.KindControlPlane && e.New != nil {
			tag = e.New[vocab.FieldCoreDNS]
		}
	}
	return tag
}

// DefaultSettle bounds how long CAPI's Cluster conditions, KCP's and the
// MachineDeployments' counts and KCP's add-on moves may lag behind the
// Machines once the upgrade is done (each catches up on its controller's
// next reconcile). It is stricter than CAPI's own e2e, which gives the
// add-ons its wait-machine-upgrade interval (20 minutes in its Docker
// config): a lone run on a quiet plane catches up within seconds, and a
// broken one is told at once. A loaded plane can take longer
// (docs/FLEET.md), and a fleet passes its own bound (Options.Settle).
const DefaultSettle = time.Minute

// settle waits until CAPI's Cluster says what the runner saw (available,
// and machines up to date and not rolling out, or for a rollback not up
// to date) and, after an upgrade, KCP has moved kube-proxy and CoreDNS
// (its last steps, once every Machine is up to date) and KCP's and the
// MachineDeployments' counts have caught up with their Machines, and the
// recorder has seen nothing change for settleQuiet, or for at most d; the
// capi-agrees and end-* rules judge what is there then.
func (r *run) settle(ctx context.Context, d time.Duration, outcome scenario.Outcome) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c := &clusterv1.Cluster{}
		if err := r.watched.Get(ctx, client.ObjectKey{Namespace: r.env.Namespace, Name: clusterName}, c); err == nil {
			if check.CAPISays(monitor.ClusterSummary(c), outcome) && (outcome == scenario.RolledBack || r.addonsMoved(ctx) && r.countsCaughtUp(ctx, c)) &&
				quietFor(r.tl, settleQuiet(r.opts.RateLimitedReconciles)) {
				return
			}
		}
		time.Sleep(pollEvery)
	}
}

// settleQuiet is how long the recorded world must be still before the
// end is judged: a count read equal to its replicas may be the one a
// controller wrote before the last change, about to be rewritten (KCP's
// availableReplicas from before an in-place update, rewritten once its
// next reconcile has run). Without CAPI's rate limit a reconcile runs
// within a second of a change. With it (CAPI's default) each object is
// reconciled at most once per rateLimitInterval, so a change passed on
// by two controllers (a MachineSet's to its MachineDeployment's status,
// then to the Cluster's conditions) can take two intervals more: a
// ClusterClass run's Cluster went Available Unknown 3.2 s after the last
// change, when its old MachineSet's deletion reached it.
func settleQuiet(rateLimited bool) time.Duration {
	const quiet = 1500 * time.Millisecond
	if rateLimited {
		return quiet + 2*rateLimitInterval
	}
	return quiet
}

// rateLimitInterval is CAPI's per-object reconcile interval under its
// ReconcilerRateLimiting gate (util/controller, v1.14): real time, as
// CAPI's managers do not run on the lab's clock.
const rateLimitInterval = time.Second

// quietFor says whether the timeline has had no entry but steps for d.
func quietFor(tl *timeline.Timeline, d time.Duration) bool {
	entries := tl.Entries()
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Kind != timeline.KindStep {
			return time.Since(entries[i].Time) >= d
		}
	}
	return true
}

// countsCaughtUp says whether KCP and every MachineDeployment count all
// their replicas up to date and available, and whether the rollouts are
// over as CAPI sees them (rolloutsOver). Each summarises its Machines on
// its own next reconcile, after the Machines and the Cluster: a Machine
// back from an in-place update is Available a moment before KCP's
// availableReplicas says so.
func (r *run) countsCaughtUp(ctx context.Context, cluster *clusterv1.Cluster) bool {
	kcps := &controlplanev1.KubeadmControlPlaneList{}
	mds := &clusterv1.MachineDeploymentList{}
	if r.watched.List(ctx, kcps, client.InNamespace(r.env.Namespace)) != nil ||
		r.watched.List(ctx, mds, client.InNamespace(r.env.Namespace)) != nil {
		return false
	}
	all := func(replicas, upToDate, available *int32) bool {
		want := ptr.Deref(replicas, 0)
		return ptr.Deref(upToDate, -1) == want && ptr.Deref(available, -1) == want
	}
	for _, k := range kcps.Items {
		if !all(k.Spec.Replicas, k.Status.UpToDateReplicas, k.Status.AvailableReplicas) {
			return false
		}
	}
	for _, d := range mds.Items {
		if !all(d.Spec.Replicas, d.Status.UpToDateReplicas, d.Status.AvailableReplicas) {
			return false
		}
	}
	machines := &clusterv1.MachineList{}
	return rolloutsOver(cluster, mds.Items) &&
		r.watched.List(ctx, machines, client.InNamespace(r.env.Namespace)) == nil && machinesCaughtUp(machines.Items)
}

// rolloutsOver says whether CAPI has finished what the upgrade set in
// motion beyond the Machines: a ClusterClass Cluster's topology
// reconciled (TopologyReconciled True), every MachineDeployment at the
// topology's version, and every MachineDeployment's status written for
// its latest spec, Available and not rolling out. A topology with no
// worker replicas moves its MachineDeployments' version only after the
// control plane, when every Machine is already done; the MachineSet
// that move creates and the one it deletes then reach the Cluster's
// conditions a few reconciles later.
func rolloutsOver(cluster *clusterv1.Cluster, mds []clusterv1.MachineDeployment) bool {
	if cluster.Spec.Topology.IsDefined() && !meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition) {
		return false
	}
	for _, d := range mds {
		if cluster.Spec.Topology.IsDefined() && d.Spec.Template.Spec.Version != cluster.Spec.Topology.Version {
			return false
		}
		if d.Status.ObservedGeneration != d.Generation ||
			!meta.IsStatusConditionTrue(d.Status.Conditions, clusterv1.MachineDeploymentAvailableCondition) ||
			meta.IsStatusConditionTrue(d.Status.Conditions, clusterv1.MachineDeploymentRollingOutCondition) {
			return false
		}
	}
	return true
}

// machinesCaughtUp says whether every Machine is UpToDate as its owner
// last judged it and its Node reports the kubelet of its version. KCP
// (v1.14, reconcileMachineUpToDateCondition) holds a Machine whose
// status.nodeInfo still names the old kubelet not up to date ("Updating"),
// and an in-place update ends before the Machine controller has copied
// the Node's new kubelet version: on a loaded plane KCP turned such
// Machines UpToDate False seconds after the runner had seen them done
// and quiet.
func machinesCaughtUp(machines []clusterv1.Machine) bool {
	for _, m := range machines {
		if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineUpToDateCondition) {
			return false
		}
		if m.Status.NodeInfo != nil && m.Status.NodeInfo.KubeletVersion != "" && m.Status.NodeInfo.KubeletVersion != m.Spec.Version {
			return false
		}
	}
	return true
}

// addonsMoved says whether the workload cluster's kube-proxy runs the
// end version's image and CoreDNS the tag KCP is asked for, in their
// templates and (on the lab, whose controllers roll them) in every pod:
// what end-kube-proxy and end-coredns will judge (check.AddonOff).
func (r *run) addonsMoved(ctx context.Context) bool {
	wl, err := r.workloadClient(ctx)
	if err != nil {
		return false
	}
	ds, dns, pods := &appsv1.DaemonSet{}, &appsv1.Deployment{}, &corev1.PodList{}
	if wl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, ds) != nil ||
		wl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, dns) != nil ||
		wl.List(ctx, pods, client.InNamespace("kube-system")) != nil {
		return false
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if r.watched.Get(ctx, client.ObjectKey{Namespace: r.env.Namespace, Name: clusterName + "-cp"}, kcp) != nil {
		return false
	}
	proxy, err := monitor.AddonSummary(ds.Spec.Template.Spec.Containers, ds.Spec.Selector, pods.Items)
	if err != nil || check.AddonOff(proxy, "kube-proxy DaemonSet", r.scenario.EndRelease().Version, "", r.provider.Lab) != "" {
		return false
	}
	tag := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag
	if tag == "" {
		return true
	}
	coreDNS, err := monitor.AddonSummary(dns.Spec.Template.Spec.Containers, dns.Spec.Selector, pods.Items)
	return err == nil && check.AddonOff(coreDNS, "CoreDNS Deployment", tag, "", r.provider.Lab) == ""
}

// enroll makes the lab's hosts known to the provider: through their BMCs,
// or (strategy reset) by booting them so they register themselves into
// a pool, as Elemental's seed image does.
//
// Under Ironic, enrolling a host also inspects it, and a Metal3 user
// waits for the hosts to show available before creating a cluster:
// CAPM3 looks again for an unclaimed host only every 30 s
// (baremetal/metal3machine_manager.go's requeueAfter), and BMO's
// inventory events do not wake it, so a cluster made earlier waits out
// that period on the first Machine.
func (r *run) enroll(ctx context.Context) error {
	if r.scenario.Strategy != scenario.Reset {
		hosts, err := reference.Enroll(ctx, r.env.Client, r.env.Site, r.env.Namespace, func(h lab.HostInfo) bool { return r.ownHost(h.Name) })
		if err != nil || r.env.Ironic == nil {
			return err
		}
		names := map[string]bool{}
		for _, h := range hosts {
			names[h.Name] = true
		}
		return r.waitAvailable(ctx, "enrolled and inspected", len(hosts), func(h *metal3.BareMetalHost) bool { return names[h.Name] })
	}
	url := reference.RegistrationURL(r.env.Callback, r.env.Namespace, resetPool)
	var hosts []*lab.Host
	for _, h := range r.env.Site.Lab.Hosts() {
		if r.ownHost(h.Name()) {
			hosts = append(hosts, h)
		}
	}
	for _, h := range hosts {
		if err := r.env.Site.JoinRegistrationPool(h.Name(), url); err != nil {
			return err
		}
		if err := h.PowerOn(); err != nil {
			return err
		}
	}
	return r.waitAvailable(ctx, "registered", len(hosts), func(h *metal3.BareMetalHost) bool { return h.Labels[r.provider.Hosts.PoolLabel] == resetPool })
}

// waitAvailable waits until want of the run's BareMetalHosts that
// match are available, saying how many are whenever that changes.
func (r *run) waitAvailable(ctx context.Context, what string, want int, match func(*metal3.BareMetalHost) bool) error {
	said := -1
	for {
		list := &metal3.BareMetalHostList{}
		if err := r.env.Client.List(ctx, list, client.InNamespace(r.env.Namespace)); err != nil {
			return err
		}
		n := 0
		for i := range list.Items {
			if match(&list.Items[i]) && list.Items[i].Status.Provisioning.State == metal3.StateAvailable {
				n++
			}
		}
		if n == want {
			return nil
		}
		if n != said {
			r.say("hosts: %d/%d %s and available", n, want, what)
			said = n
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the hosts: %d of %d %s and available", n, want, what)
		case <-time.After(pollEvery):
		}
	}
}

// resetPool is the registration pool of a reset scenario.
const resetPool = "pool"

// labHost is the lab host behind a BareMetalHost: the hostname a
// registered host reported (the provider config's
// hosts.hostnameAnnotation), or the same name.
func (r *run) labHost(h *metal3.BareMetalHost) string {
	if a := r.provider.Hosts.HostnameAnnotation; a != "" && h.Annotations[a] != "" {
		return h.Annotations[a]
	}
	return h.Name
}
