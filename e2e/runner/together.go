package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Spec is one run of a batch (Together): its scenario, lab and form, the
// folder it writes and the name its progress lines carry.
type Spec struct {
	Scenario *scenario.Scenario
	Lab      *lab.Definition
	Form     scenario.Form
	Dir      string
	Name     string
}

// PlaneFolder is the folder of a batch's folder that holds its plane's
// logs: the runs share them.
const PlaneFolder = "plane"

// Together runs specs at once on one plane, each in a namespace of its
// own, as a fleet runs its clusters (Shared): what lets a provider whose
// managers bind fixed ports (CAPD's in-memory backend, provider.Config's
// FixedPorts) run more than one scenario at a time on one machine, where
// two planes of its would fight over those ports. Every run is judged by
// the same rules as on a plane of its own; the plane's RBAC refusals
// break rbac-sufficient in each.
//
// o is every run's options: its Provider (one without the lab: a batch
// shares no hosts), time scale and binaries. A run JoinsBatch refuses
// stops the batch before its plane starts.
// Dir holds the plane's logs (PlaneFolder). done is called with each
// run's index and result as it ends; the last run to end is reported
// once the plane has stopped, and Together returns after it. The
// plane's processes' CPU and this process's over the batch are counted
// once, in that last run's profile (Profile.Batch says so), so a suite's
// sum of its runs' CPU stays whole. A run that panics is reported
// stopped, with the panic.
//
// atOnce bounds how many of the runs go at a time (0: all), in specs'
// order: each run is load on the machine beside whatever else runs on
// it, and a batch that starts all its runs at once can take more than
// its share of the cores.
func Together(ctx context.Context, specs []Spec, o Options, atOnce int, done func(int, result.Result)) {
	if len(specs) == 0 {
		return
	}
	cpuBefore := processCPU()
	env, release, err := startBatch(ctx, specs, o)
	if err != nil {
		for i, s := range specs {
			done(i, stoppedBefore(s, o, fmt.Errorf("the batch's shared plane: %w", err)))
		}
		return
	}
	last, lastResult := runBatch(ctx, specs, atOnce, func(s Spec) result.Result { return runShared(ctx, env, s, o) }, done)
	lastResult.Profile.CPU = append(lastResult.Profile.CPU, planeCPU(env)...)
	env.Stop()
	release()
	lastResult.Profile.CPU = append(lastResult.Profile.CPU, result.ProcessCPU{Name: harnessCPU, CPU: processCPU() - cpuBefore})
	lastResult.Profile.Batch = len(specs)
	writeProfile(specs[last].Dir, lastResult.Profile)
	writeResult(specs[last].Dir, lastResult)
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s [%s] the batch's plane and harness, counted in this run's profile: %s\n", time.Now().Format("15:04:05"), specs[last].Name,
			strings.ReplaceAll(lastResult.Profile.String(), "\n", "; "))
	}
	done(last, lastResult)
}

// runBatch runs specs with run, atOnce at a time (0: all), in their
// order, and reports each run but the last to end, which it returns.
// Once ctx ends, the runs not started yet start at once (each sees ctx
// ended and stops).
func runBatch(ctx context.Context, specs []Spec, atOnce int, run func(Spec) result.Result, done func(int, result.Result)) (last int, lastResult result.Result) {
	if atOnce <= 0 || atOnce > len(specs) {
		atOnce = len(specs)
	}
	var (
		mu    sync.Mutex
		left  = len(specs)
		wg    sync.WaitGroup
		slots = make(chan struct{}, atOnce)
	)
	for i, s := range specs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		wg.Go(func() {
			res := run(s)
			select {
			case <-slots:
			default:
			}
			mu.Lock()
			left--
			if left == 0 { // reported by Together, with the plane's CPU
				last, lastResult = i, res
				mu.Unlock()
				return
			}
			mu.Unlock()
			done(i, res)
		})
	}
	wg.Wait()
	return last, lastResult
}

// runShared is one run of a batch; a panic stops it, not the process.
func runShared(ctx context.Context, env *Env, s Spec, o Options) (res result.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = stoppedBefore(s, o, fmt.Errorf("the run panicked: %v", p))
		}
	}()
	o.Dir, o.Name, o.Shared, o.Planes = s.Dir, s.Name, &Shared{Env: env}, nil
	return Run(ctx, s.Scenario, s.Lab, s.Form, o)
}

// JoinsBatch says why a run of s needs a plane of its own instead of a
// batch's (nil: it may join one). Its faults may act on the plane or a
// manager, so on every run of the batch; a minTimeScale asks for a time
// scale of its own, and the plane has one.
func JoinsBatch(s *scenario.Scenario) error {
	switch {
	case len(s.Faults) > 0:
		return errors.New("injects faults, which may act on the plane or a manager, so on every run of the batch: it needs a plane of its own")
	case s.MinTimeScale > 0:
		return fmt.Errorf("needs time scale %g or slower, and a batch's plane has one time scale: it needs a plane of its own", s.MinTimeScale)
	}
	return nil
}

// startBatch starts the plane of a batch, with the managers of every
// strategy its runs use, holding the provider's fixed ports machine-wide
// while it runs (release lets them go once the plane has stopped).
func startBatch(ctx context.Context, specs []Spec, o Options) (_ *Env, release func(), err error) {
	switch {
	case o.Provider == nil:
		return nil, nil, errors.New("a batch names its provider")
	case o.Provider.Lab:
		return nil, nil, fmt.Errorf("provider %s drives the lab: a batch shares no hosts", o.Provider.Name)
	case o.Scale <= 0:
		return nil, nil, fmt.Errorf("time scale %g: a run needs one above 0", float64(o.Scale))
	}
	for _, s := range specs {
		if err := JoinsBatch(s.Scenario); err != nil {
			return nil, nil, fmt.Errorf("run %s %w", s.Name, err)
		}
	}
	release = func() {}
	if ports := o.Provider.FixedPorts(); len(ports) > 0 {
		if release, err = loopback.Hold(ctx, ports...); err != nil {
			return nil, nil, err
		}
	}
	var strategies []scenario.Strategy
	for _, s := range specs {
		if !slices.Contains(strategies, s.Scenario.Strategy) {
			strategies = append(strategies, s.Scenario.Strategy)
		}
	}
	env, err := StartEnv(ctx, EnvOptions{Provider: o.Provider, Strategies: strategies, RepoRoot: o.RepoRoot,
		Dir: filepath.Join(o.Dir, PlaneFolder), Scale: o.Scale, RateLimitedReconciles: o.RateLimitedReconciles,
		ProviderBinary: o.ProviderBinary, ExtensionBinary: o.ExtensionBinary,
		Management: o.Management, KindNodeImage: o.KindNodeImage})
	if err != nil {
		release()
		return nil, nil, err
	}
	return env, release, nil
}

// stoppedBefore is the result of a run that never started.
func stoppedBefore(s Spec, o Options, err error) result.Result {
	return result.Result{Scenario: s.Scenario.Name, Form: s.Form, Strategy: string(s.Scenario.Strategy), Provider: providerName(o),
		Started: time.Now(), Error: err.Error(), TimeScale: float64(o.Scale), CAPIRateLimiting: o.RateLimitedReconciles,
		Management: managementName(o.Management)}
}

func providerName(o Options) string {
	if o.Provider == nil {
		return ""
	}
	return o.Provider.Name
}
