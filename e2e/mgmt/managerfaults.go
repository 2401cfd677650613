package mgmt

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"time"

	"github.com/upgradelab/upgradelab/internal/failpoint"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/proc"
)

// The faults a scenario injects into a manager: a crash (KillAndRestart),
// an outage (KillFor), a crash at a named point of its work (CrashAt)
// and replicas at once (Replicate). On a kind management cluster only the
// crash is supported (the Pod is deleted; its Deployment starts another).

// KillAndRestart kills a manager (SIGKILL: no cleanup, as a crash or an
// OOM kill) and starts it again with the same flags, returning once it is
// ready. name is "capi", "kcp", "cabpk" or a Provider's name.
func (p *Plane) KillAndRestart(ctx context.Context, name string) error {
	if p.kind != nil {
		return p.restartPod(ctx, name)
	}
	i, err := p.managerIndex(name)
	if err != nil {
		return err
	}
	old := p.kill(i)
	child, err := p.startManager(ctx, i, nil)
	if err != nil || child == nil {
		return err
	}
	fmt.Fprintf(p.progress, "mgmt: %s killed (pid %d) and restarted (pid %d)\n", name, old.PID(), child.PID())
	return nil
}

// KillFor kills a manager and starts it again d (wall time) later, in the
// background, as a manager whose only Pod was evicted and waits to be
// scheduled again is down. It returns once the manager is dead.
func (p *Plane) KillFor(ctx context.Context, name string, d time.Duration) error {
	i, err := p.embeddedManager(name)
	if err != nil {
		return err
	}
	old := p.kill(i)
	fmt.Fprintf(p.progress, "mgmt: %s killed (pid %d), down for %s\n", name, old.PID(), d)
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		child, err := p.startManager(ctx, i, nil)
		switch {
		case err != nil:
			fmt.Fprintf(p.progress, "mgmt: %s not started again: %v\n", name, err)
		case child != nil:
			fmt.Fprintf(p.progress, "mgmt: %s started again (pid %d) after %s down\n", name, child.PID(), d)
		}
	}()
	return nil
}

// CrashAt starts a manager again with the failpoint point armed
// (internal/failpoint). When the process ends there, onCrash is told and
// the manager is started again unarmed, as the kubelet restarts a crashed
// container. CrashAt returns once the armed manager is ready.
func (p *Plane) CrashAt(ctx context.Context, name, point string, onCrash func(pid int)) error {
	i, err := p.embeddedManager(name)
	if err != nil {
		return err
	}
	p.kill(i)
	armed, err := p.startManager(ctx, i, []string{failpoint.Env + "=" + point})
	if err != nil || armed == nil {
		return err
	}
	fmt.Fprintf(p.progress, "mgmt: %s restarted (pid %d) to crash at %s\n", name, armed.PID(), point)
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-armed.Exited():
		}
		var exit *exec.ExitError
		if !errors.As(armed.Err(), &exit) || exit.ExitCode() != failpoint.ExitCode {
			return // stopped or killed otherwise: not the failpoint
		}
		onCrash(armed.PID())
		child, err := p.startManager(ctx, i, nil)
		switch {
		case err != nil:
			fmt.Fprintf(p.progress, "mgmt: %s not restarted after its crash at %s: %v\n", name, point, err)
		case child != nil:
			fmt.Fprintf(p.progress, "mgmt: %s (pid %d) crashed at %s; restarted (pid %d)\n", name, armed.PID(), point, child.PID())
		}
	}()
	return nil
}

func (p *Plane) managerIndex(name string) (int, error) {
	i := slices.IndexFunc(p.managers, func(m managerSpec) bool { return m.name == name })
	if i < 0 {
		return 0, fmt.Errorf("mgmt: no manager %q", name)
	}
	return i, nil
}

// embeddedManager is managerIndex for a fault only managers run here can
// take.
func (p *Plane) embeddedManager(name string) (int, error) {
	if p.kind != nil {
		return 0, fmt.Errorf("mgmt: %s runs in the kind cluster; only a crash (restart) can be injected there", name)
	}
	return p.managerIndex(name)
}

// kill kills manager i's process and returns it.
func (p *Plane) kill(i int) *proc.Process {
	p.procsMu.Lock()
	old := p.procs[i]
	p.procsMu.Unlock()
	old.Kill()
	return old
}

// startManager starts manager i with extraEnv added and waits until it is
// ready; nil (and no process) once the plane is stopping.
func (p *Plane) startManager(ctx context.Context, i int, extraEnv []string) (*proc.Process, error) {
	m := p.managers[i]
	env, err := m.localEnv(p.certDir, p.LogDir)
	if err != nil {
		return nil, err
	}
	p.procsMu.Lock()
	if p.managersStopped {
		p.procsMu.Unlock()
		return nil, nil
	}
	child, err := proc.Start(m.name, m.binary, m.args(p.certDir, p.ports[m.name]), append(slices.Clone(env), extraEnv...), p.LogDir)
	if err == nil {
		p.procs[i] = child
	}
	p.procsMu.Unlock()
	if err != nil {
		return nil, err
	}
	_ = p.reaper.Record(child.PID())
	return child, p.waitReady(ctx, m, child, p.ports[m.name])
}

// Replicate replaces a manager by n replicas that elect a leader
// (--leader-elect, their lease in the manager's own namespace, where its
// config/rbac grants leases), each on ports of its own, behind a spreader
// on the manager's webhook address: the API server and CAPI reach them as
// they reach one Deployment's Pods through its Service. It returns once
// every replica is ready.
func (p *Plane) Replicate(ctx context.Context, name string, n int) error {
	i, err := p.embeddedManager(name)
	if err != nil {
		return err
	}
	m := p.managers[i]
	if m.id == nil {
		return fmt.Errorf("mgmt: %s has no namespace of its own for a leader election lease", name)
	}
	all, err := loopback.Ports(3 * n)
	if err != nil {
		return err
	}
	p.kill(i)
	env, err := m.localEnv(p.certDir, p.LogDir)
	if err != nil {
		return err
	}
	var backends []string
	for k := range n {
		ports := managerPorts{webhook: all[3*k], health: all[3*k+1], diagnostics: all[3*k+2]}
		args := slices.DeleteFunc(m.args(p.certDir, ports), func(a string) bool { return a == "--leader-elect=false" })
		args = append(args, "--leader-elect=true", "--leader-election-namespace="+m.id.namespace)
		// One log for all replicas (each line is written whole), so
		// the RBAC refusals read from it (Forbidden) cover every one.
		child, err := p.startReplica(m, k, i, args, env)
		if err != nil || child == nil {
			return err
		}
		backends = append(backends, webhookAddr(ports))
		if err := p.waitReady(ctx, m, child, ports); err != nil {
			return err
		}
	}
	spread, err := newSpreader(webhookAddr(p.ports[name]), backends)
	if err != nil {
		return err
	}
	p.procsMu.Lock()
	p.spreaders = append(p.spreaders, spread)
	p.procsMu.Unlock()
	fmt.Fprintf(p.progress, "mgmt: %s runs as %d replicas electing a leader, behind %s\n", name, n, webhookAddr(p.ports[name]))
	return nil
}

// startReplica starts replica k of manager i and keeps it where Stop
// finds it (the first in the manager's own place, the others beside),
// so a replicate that fails half-way leaves nothing running unseen; nil
// (and no process) once the plane is stopping.
func (p *Plane) startReplica(m managerSpec, k, i int, args, env []string) (*proc.Process, error) {
	p.procsMu.Lock()
	defer p.procsMu.Unlock()
	if p.managersStopped {
		return nil, nil
	}
	child, err := proc.Start(m.name, m.binary, args, env, p.LogDir)
	if err != nil {
		return nil, err
	}
	if k == 0 {
		p.procs[i] = child
	} else {
		p.extra = append(p.extra, child)
	}
	_ = p.reaper.Record(child.PID())
	return child, nil
}

// waitReady waits until a manager's process answers /readyz (and, for
// one whose readiness leaves its webhooks out, listens on its webhook
// port).
func (p *Plane) waitReady(ctx context.Context, m managerSpec, child *proc.Process, ports managerPorts) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := child.WaitHealthy(ctx, ports.healthURL()); err != nil || !m.certsUnderTMPDIR {
		return err
	}
	return child.WaitListening(ctx, webhookAddr(ports))
}

// Restart stops a manager run here and starts it again as binary with
// args as its own flags, in place of those its Provider gave
// (Provider.Binary and Args), and returns once it is ready. A plane kept
// for the next run of a suite points the provider at that run's lab this
// way: its CRDs, webhooks, RBAC and ports stay.
func (p *Plane) Restart(ctx context.Context, name, binary string, args []string) error {
	i, err := p.embeddedManager(name)
	if err != nil {
		return err
	}
	p.kill(i)
	p.procsMu.Lock()
	p.managers[i].binary, p.managers[i].extraArgs = binary, slices.Clone(args)
	p.procsMu.Unlock()
	_, err = p.startManager(ctx, i, nil)
	return err
}
