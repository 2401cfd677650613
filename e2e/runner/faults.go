package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/bmc"
)

// injectFaults arms the scenario's faults: each waits on the timeline
// for its moment (a step, then a lab event), then acts, and records what
// it did as a step "fault:NAME" so the report and the checks see when.
// An action that cannot be carried out is sent on errs.
func (r *run) injectFaults(ctx context.Context, errs chan<- error) {
	for _, f := range r.scenario.Faults {
		entries := make(chan timeline.Entry, 1024)
		r.tl.OnEntry(func(e timeline.Entry) {
			select {
			case entries <- e:
			default: // a fault waits for one moment; missing later entries is harmless
			}
		})
		go func(f scenario.Fault) {
			if err := r.fire(ctx, f, entries); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("fault %s: %w", f.Name, err)
			}
		}(f)
	}
}

func (r *run) fire(ctx context.Context, f scenario.Fault, entries <-chan timeline.Entry) error {
	step := f.When.AfterStep
	if step == "" {
		step = check.StepUpgrade
	}
	stepSeen, host := false, ""
	for !stepSeen || (f.When.LabEvent != "" && host == "") {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-entries:
			switch {
			case e.Kind == timeline.KindStep && e.Name == step:
				stepSeen = true
			case stepSeen && e.Kind == timeline.KindLab && e.New["reason"] == f.When.LabEvent:
				host = e.Name
			}
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.When.Delay.Duration):
	}
	switch {
	case f.Restart == "apiserver":
		r.say("fault %s: killing the management kube-apiserver", f.Name)
		r.tl.Step("fault:"+f.Name, "kill and restart the management kube-apiserver")
		return r.env.Plane.RestartAPIServer(ctx)
	case f.Restart != "":
		r.say("fault %s: killing %s (host %s)", f.Name, f.Restart, or(host, "-"))
		r.tl.Step("fault:"+f.Name, "kill and restart "+f.Restart)
		return r.env.Plane.KillAndRestart(ctx, f.Restart)
	case f.PowerLoss != nil:
		return r.powerLoss(ctx, f, host)
	case f.AgentCrash != nil:
		r.say("fault %s: the agent of %s crashes, back in %s", f.Name, host, f.AgentCrash.RestartAfter.Duration)
		r.tl.Step("fault:"+f.Name, fmt.Sprintf("agent of %s crashed for %s", host, f.AgentCrash.RestartAfter.Duration))
		return r.env.Site.CrashAgent(host, f.AgentCrash.RestartAfter.Duration)
	case f.BMC != nil && f.BMC.Offline.Duration > 0:
		b, ok := r.env.Site.BMCs.BMCs[host]
		if !ok {
			return fmt.Errorf("host %s has no BMC", host)
		}
		r.say("fault %s: the BMC of %s goes offline for %s", f.Name, host, f.BMC.Offline.Duration)
		r.tl.Step("fault:"+f.Name, fmt.Sprintf("BMC of %s offline for %s", host, f.BMC.Offline.Duration))
		b.Unreachable(f.BMC.Offline.Duration)
	case f.BMC != nil:
		r.say("fault %s: every BMC answers after %s, %.0f%% with 503", f.Name, f.BMC.Latency.Duration, f.BMC.ErrorRate*100)
		r.tl.Step("fault:"+f.Name, fmt.Sprintf("BMC latency %s, error rate %.2f", f.BMC.Latency.Duration, f.BMC.ErrorRate))
		for _, b := range r.env.Site.BMCs.BMCs {
			b.SetFaults(bmc.Faults{Latency: f.BMC.Latency.Duration, ErrorRate: f.BMC.ErrorRate})
		}
	}
	return nil
}

// powerLoss cuts the host's power at once and restores it later, as a
// PDU outlet switched off and on would.
func (r *run) powerLoss(ctx context.Context, f scenario.Fault, host string) error {
	h, err := r.env.Site.Lab.Host(host)
	if err != nil {
		return err
	}
	r.say("fault %s: power cut on %s, back in %s", f.Name, host, f.PowerLoss.RestoreAfter.Duration)
	r.tl.Step("fault:"+f.Name, fmt.Sprintf("power cut on %s for %s", host, f.PowerLoss.RestoreAfter.Duration))
	if err := h.PowerOff(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.PowerLoss.RestoreAfter.Duration):
	}
	return h.PowerOn()
}

// faultsFired says which faults never found their moment: a variant whose
// fault did not happen proves nothing, so its run fails.
func (r *run) faultsFired() error {
	fired := map[string]bool{}
	for _, e := range r.tl.Entries() {
		if e.Kind == timeline.KindStep {
			fired[e.Name] = true
		}
	}
	for _, f := range r.scenario.Faults {
		if !fired["fault:"+f.Name] {
			return fmt.Errorf("fault %s never fired (when: %+v): the run proves nothing about it", f.Name, f.When)
		}
	}
	return nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
