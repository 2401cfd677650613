package runner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/bmc"
	"github.com/upgradelab/upgradelab/sim/ipmi"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// injectFaults arms the scenario's faults: each waits on the timeline
// for its moment (a step, then a lab event), then acts, and records what
// it did as a step "fault:NAME" so the report and the checks see when.
// An action that cannot be carried out is sent on errs.
func (r *run) injectFaults(ctx context.Context, errs chan<- error) {
	r.atStep = map[string][]chan struct{}{}
	for _, f := range r.scenario.Faults {
		entries := make(chan timeline.Entry, 1024)
		r.tl.OnEntry(func(e timeline.Entry) {
			select {
			case entries <- e:
			default: // a fault waits for one moment; missing later entries is harmless
			}
		})
		acted := make(chan struct{})
		if f.When.LabEvent == "" && f.When.Delay.Duration == 0 {
			step := or(f.When.AfterStep, check.StepUpgrade)
			r.atStep[step] = append(r.atStep[step], acted)
		}
		go func(f scenario.Fault) {
			defer close(acted)
			if err := r.fire(ctx, f, entries); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("fault %s: %w", f.Name, err)
			}
		}(f)
	}
}

// awaitFaultsAt waits until the faults that act at step have (see
// run.atStep).
func (r *run) awaitFaultsAt(ctx context.Context, step string) error {
	for _, acted := range r.atStep[step] {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-acted:
		}
	}
	return nil
}

// fire waits for the fault's moment, then injects it.
func (r *run) fire(ctx context.Context, f scenario.Fault, entries <-chan timeline.Entry) error {
	host, err := waitForMoment(ctx, f, entries)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.When.Delay.Duration):
	}
	announce := func(what string) {
		r.say("fault %s: %s", f.Name, what)
		r.tl.Step("fault:"+f.Name, what)
	}
	switch {
	case f.Restart == "apiserver":
		announce("kill and restart the management kube-apiserver")
		return r.env.Plane.RestartAPIServer(ctx)
	case f.Restart != "" && f.DownFor.Duration > 0:
		announce(fmt.Sprintf("kill %s; it starts again in %s", f.Restart, f.DownFor.Duration))
		return r.env.Plane.KillFor(ctx, f.Restart, f.DownFor.Duration)
	case f.Restart != "" && f.Replicas > 0:
		announce(fmt.Sprintf("%s runs as %d replicas electing a leader", f.Restart, f.Replicas))
		return r.env.Plane.Replicate(ctx, f.Restart, f.Replicas)
	case f.Restart != "" && f.Failpoint != "":
		r.say("fault %s: %s armed to crash at %s", f.Name, f.Restart, f.Failpoint)
		return r.env.Plane.CrashAt(ctx, f.Restart, f.Failpoint, func(pid int) {
			announce(fmt.Sprintf("%s (pid %d) crashed at failpoint %s; started again", f.Restart, pid, f.Failpoint))
		})
	case f.Restart != "":
		announce(fmt.Sprintf("kill and restart %s (host %s)", f.Restart, or(host, "-")))
		return r.env.Plane.KillAndRestart(ctx, f.Restart)
	case f.PowerLoss != nil:
		return r.cutPower(ctx, *f.PowerLoss, host, announce)
	case f.Hang != nil:
		h, err := r.env.Site.Lab.Host(host)
		if err != nil {
			return err
		}
		announce(fmt.Sprintf("the OS of %s hangs; only a power cycle brings it back", host))
		return h.Hang()
	case f.PauseCluster != nil:
		return r.pauseCluster(ctx, f.Name, f.PauseCluster.For.Duration, announce)
	case f.SlowShutdown != nil:
		return r.slowShutdowns(host, f.SlowShutdown.Takes.Duration, announce)
	case f.AgentCrash != nil:
		announce(fmt.Sprintf("the agent of %s crashes, back in %s", host, f.AgentCrash.RestartAfter.Duration))
		return r.env.Site.CrashAgent(host, f.AgentCrash.RestartAfter.Duration)
	case f.BMC != nil && f.BMC.Offline.Duration > 0:
		return r.takeBMCOffline(host, f.BMC.Offline.Duration, announce)
	case f.BMC != nil:
		r.degradeBMCs(*f.BMC, announce)
	}
	return nil
}

// pauseCluster pauses the run's Cluster as clusterctl move does, and
// lifts the pause d later (a step "fault:NAME:lifted").
func (r *run) pauseCluster(ctx context.Context, name string, d time.Duration, announce func(string)) error {
	if err := r.patchCluster(ctx, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }); err != nil {
		return err
	}
	announce(fmt.Sprintf("the Cluster is paused (spec.paused) for %s", d))
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		if err := r.patchCluster(ctx, func(c *clusterv1.Cluster) { c.Spec.Paused = nil }); err != nil {
			r.say("fault %s: lifting the Cluster's pause: %v", name, err)
			return
		}
		r.say("fault %s: the Cluster's pause is lifted", name)
		r.tl.Step("fault:"+name+":lifted", "spec.paused removed")
	}()
	return nil
}

// slowShutdowns makes the graceful shutdowns of host (every host when
// "") take lab time d from now on.
func (r *run) slowShutdowns(host string, d time.Duration, announce func(string)) error {
	hosts := []string{host}
	if host == "" {
		hosts = nil
		for _, h := range r.env.Site.Lab.Definition().Spec.Hosts {
			hosts = append(hosts, h.Name)
		}
	}
	announce(fmt.Sprintf("graceful shutdowns of %s take %s of lab time from now on", strings.Join(hosts, ", "), d))
	for _, name := range hosts {
		h, err := r.env.Site.Lab.Host(name)
		if err != nil {
			return err
		}
		h.SetShutdownTime(d)
	}
	return nil
}

// waitForMoment reads timeline entries until the fault's moment: its
// step (the upgrade unless it names another), then its lab event when it
// names one, whose host it returns.
func waitForMoment(ctx context.Context, f scenario.Fault, entries <-chan timeline.Entry) (host string, err error) {
	step := f.When.AfterStep
	if step == "" {
		step = check.StepUpgrade
	}
	stepSeen := false
	for !stepSeen || (f.When.LabEvent != "" && host == "") {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case e := <-entries:
			switch {
			case e.Kind == timeline.KindStep && e.Name == step:
				stepSeen = true
			case stepSeen && e.Kind == timeline.KindLab && e.New["reason"] == f.When.LabEvent:
				host = e.Name
			}
		}
	}
	return host, nil
}

// cutPower cuts the power of host, or of n control-plane hosts starting
// with it, and restores it later unless the fault says it stays off.
func (r *run) cutPower(ctx context.Context, pl scenario.PowerLossFault, host string, announce func(string)) error {
	hosts := []string{host}
	if n := pl.ControlPlanes; n > 0 {
		var err error
		if hosts, err = r.controlPlaneHosts(ctx, host, n); err != nil {
			return err
		}
	}
	var cut []*lab.Host
	for _, name := range hosts {
		h, err := r.env.Site.Lab.Host(name)
		if err != nil {
			return err
		}
		cut = append(cut, h)
	}
	back := "back in " + pl.RestoreAfter.Duration.String()
	if pl.StayOff {
		back = "never back"
	}
	announce(fmt.Sprintf("power cut on %s, %s", strings.Join(hosts, ", "), back))
	return powerLoss(ctx, cut, pl.RestoreAfter.Duration, pl.StayOff)
}

// takeBMCOffline makes host's BMCs, Redfish and IPMI, unreachable for a
// while.
func (r *run) takeBMCOffline(host string, d time.Duration, announce func(string)) error {
	fleet := r.env.Site.BMCs
	rf, hasRedfish := fleet.BMCs[host]
	ip, hasIPMI := fleet.IPMI[host]
	if !hasRedfish && !hasIPMI {
		return fmt.Errorf("host %s has no BMC", host)
	}
	announce(fmt.Sprintf("the BMC of %s goes offline for %s", host, d))
	if hasRedfish {
		rf.Unreachable(d)
	}
	if hasIPMI {
		ip.Unreachable(d)
	}
	return nil
}

// degradeBMCs slows every BMC and makes it fail a share of requests.
func (r *run) degradeBMCs(f scenario.BMCFault, announce func(string)) {
	announce(fmt.Sprintf("every BMC answers after %s, %.0f%% of Redfish requests with 503 and of IPMI datagrams lost",
		f.Latency.Duration, f.ErrorRate*100))
	for _, b := range r.env.Site.BMCs.BMCs {
		b.SetFaults(bmc.Faults{Latency: f.Latency.Duration, ErrorRate: f.ErrorRate})
	}
	for _, b := range r.env.Site.BMCs.IPMI {
		b.SetFaults(ipmi.Faults{Latency: f.Latency.Duration, DropRate: f.ErrorRate})
	}
}

// powerLoss cuts the hosts' power at once and restores it later, as a
// PDU switched off and on would; or, with stayOff, their power supplies
// die and nothing can power them on again.
func powerLoss(ctx context.Context, hosts []*lab.Host, restoreAfter time.Duration, stayOff bool) error {
	for _, h := range hosts {
		cut := h.PowerOff
		if stayOff {
			cut = h.FailPowerSupply
		}
		if err := cut(); err != nil {
			return err
		}
	}
	if stayOff {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(restoreAfter):
	}
	for _, h := range hosts {
		if err := h.PowerOn(); err != nil {
			return err
		}
	}
	return nil
}

// controlPlaneHosts are n lab hosts serving control-plane Machines: the
// event's host first when it is one, then the others by name.
func (r *run) controlPlaneHosts(ctx context.Context, first string, n int) ([]string, error) {
	machines := &clusterv1.MachineList{}
	if err := r.env.Client.List(ctx, machines, client.InNamespace(r.env.Namespace), client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return nil, err
	}
	infra := map[string]bool{}
	for _, m := range machines.Items {
		infra[m.Spec.InfrastructureRef.Name] = true
	}
	hosts := &metal3.BareMetalHostList{}
	if err := r.env.Client.List(ctx, hosts, client.InNamespace(r.env.Namespace)); err != nil {
		return nil, err
	}
	var cp []string
	for _, h := range hosts.Items {
		if h.Spec.ConsumerRef != nil && infra[h.Spec.ConsumerRef.Name] {
			cp = append(cp, r.labHost(&h))
		}
	}
	sort.Strings(cp)
	if i := slices.Index(cp, first); i > 0 {
		cp = append([]string{first}, slices.Delete(cp, i, i+1)...)
	}
	if len(cp) < n {
		return nil, fmt.Errorf("%d control-plane hosts to cut, the cluster has %d (%v)", n, len(cp), cp)
	}
	return cp[:n], nil
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
