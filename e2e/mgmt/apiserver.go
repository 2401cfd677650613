package mgmt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"

	"k8s.io/client-go/discovery"
)

// RestartAPIServer kills the embedded kube-apiserver (SIGKILL, as a crash
// or an OOM kill would) and starts it again with the same command line,
// certificates and etcd, so every object and credential stays. It returns
// once the API server answers again. The supervisor (crash.go) does not
// count this kill as a crash. On a kind cluster the process in the node
// is killed and the node's kubelet starts its static Pod again; a plane
// on any other cluster has no API server the harness may kill.
func (p *Plane) RestartAPIServer(ctx context.Context) error {
	if p.kind != nil {
		return p.restartKindAPIServer(ctx)
	}
	if p.env == nil {
		return errors.New("mgmt: only the API server of the embedded plane or of a kind cluster can be restarted")
	}
	p.apiMu.Lock()
	st := p.api
	if st == nil {
		p.apiMu.Unlock()
		return errors.New("mgmt: the embedded plane's API server is not supervised yet")
	}
	pid := st.pid
	if p.apiServer != nil {
		p.apiServer.Kill() // our child: Wait returned, so every thread has ended
	} else if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.apiMu.Unlock()
		return fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	// envtest's child is not ours to Wait for: wait until all of its
	// threads have ended (internal/proc says why a zombie leader is no proof);
	// startAPIServer then waits until its port binds.
	gone, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := proc.WaitExited(gone, pid)
	cancel()
	if err == nil {
		err = p.startAPIServer()
	}
	restarted := p.apiServer
	p.apiMu.Unlock()
	if err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	fmt.Fprintf(p.progress, "mgmt: kube-apiserver killed (pid %d) and restarted (pid %d)\n", pid, restarted.PID())
	ctx, cancelAnswer := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelAnswer()
	dc := p.discovery()
	for {
		if _, err := dc.ServerVersion(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver did not answer after its restart: %w (log %s)", ctx.Err(), restarted.LogPath)
		case <-restarted.Exited():
			return fmt.Errorf("the restarted kube-apiserver exited: %s (log %s)", fmt.Sprint(restarted.Err()), restarted.LogPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// restartKindAPIServer kills kube-apiserver in the kind node (SIGKILL, as
// a crash or an OOM kill would) and returns once the kubelet has started
// it again and it answers.
func (p *Plane) restartKindAPIServer(ctx context.Context) error {
	before, err := p.kind.Run("pgrep", "-x", "kube-apiserver")
	if err != nil {
		return fmt.Errorf("finding kube-apiserver: %w", err)
	}
	before = strings.TrimSpace(before)
	if _, err := p.kind.Run("pkill", "-KILL", "-x", "kube-apiserver"); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	fmt.Fprintf(p.progress, "mgmt: kube-apiserver killed (pid %s in kind node %s); its kubelet starts the static Pod again\n", before, p.kind.Node())
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dc := p.discovery()
	for {
		now, _ := p.kind.Run("pgrep", "-x", "kube-apiserver")
		if now = strings.TrimSpace(now); now != "" && now != before {
			if _, err := dc.ServerVersion(); err == nil {
				fmt.Fprintf(p.progress, "mgmt: kube-apiserver answers again (pid %s in kind node %s)\n", now, p.kind.Node())
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver in kind node %s did not come back after it was killed: %w (its kubelet's log: docker exec %s journalctl -u kubelet)", p.kind.Node(), ctx.Err(), p.kind.Node())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// apiServerProcess finds envtest's kube-apiserver, the process the
// supervisor starts from.
func (p *Plane) apiServerProcess() (pid int, binary string, args []string, err error) {
	pid = p.envtestPID("kube-apiserver")
	if pid == 0 {
		return 0, "", nil, errors.New("mgmt: no kube-apiserver process found among the harness's children")
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, "", nil, err
	}
	argv := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
	return pid, argv[0], argv[1:], nil
}

// apiServerPID is the running kube-apiserver's pid (0 on a plane without
// one of its own).
func (p *Plane) apiServerPID() int {
	p.apiMu.Lock()
	defer p.apiMu.Unlock()
	if p.api == nil {
		return 0
	}
	return p.api.pid
}

// hostPort is the host:port of a REST config's Host (a URL or host:port).
func hostPort(host string) string {
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		return u.Host
	}
	return host
}

// envtestPID is the pid of envtest's kube-apiserver or etcd of this
// plane (found by the port each serves), or 0.
func (p *Plane) envtestPID(comm string) int {
	if p.env == nil {
		return 0
	}
	switch comm {
	case "kube-apiserver":
		return proc.ChildNamed(comm, "--secure-port="+strconv.Itoa(p.env.ControlPlane.GetAPIServer().SecurePort))
	case "etcd":
		if u := p.env.ControlPlane.Etcd.URL; u != nil {
			return proc.ChildNamed(comm, u.Host)
		}
	}
	return 0
}

// ProcessCPU is the CPU time one of the plane's processes has used, and
// its peak resident memory. PID tells a process restarted since an
// earlier reading from the one read then.
type ProcessCPU struct {
	Name    string        `json:"name"`
	PID     int           `json:"-"`
	CPU     time.Duration `json:"cpu"`
	PeakRSS int64         `json:"peakRSS"`
}

// CPU reads the CPU time each running process of the plane has used so
// far, and its peak RSS: the embedded kube-apiserver and etcd,
// kube-controller-manager, then each manager. Read it before Stop. A
// kube-apiserver started again (by RestartAPIServer or after a crash)
// counts from its restart.
func (p *Plane) CPU() []ProcessCPU {
	var out []ProcessCPU
	for _, child := range p.Processes() {
		if u, ok := proc.ReadUsage(child.PID); ok {
			out = append(out, ProcessCPU{Name: child.Name, PID: child.PID, CPU: u.CPU, PeakRSS: u.PeakRSS})
		}
	}
	return out
}

// Process is one running process of the plane.
type Process struct {
	Name string
	PID  int
}

// Processes are the plane's running processes, in CPU's order; a process
// not found (a plane on an existing cluster runs no API server here) is
// left out.
func (p *Plane) Processes() []Process {
	var out []Process
	add := func(name string, pid int) {
		if pid > 0 {
			out = append(out, Process{Name: name, PID: pid})
		}
	}
	add("kube-apiserver", p.apiServerPID())
	add("etcd", p.envtestPID("etcd"))
	if p.controllerManager != nil {
		add("kube-controller-manager", p.controllerManager.PID())
	}
	p.procsMu.Lock()
	procs := p.procs
	p.procsMu.Unlock()
	for i, m := range p.managers {
		if i < len(procs) {
			add(m.name, procs[i].PID())
		}
	}
	return out
}

// MetricsURLs are each manager's Prometheus endpoint (controller-runtime's
// workqueue and reconcile metrics), by manager name: the diagnostics
// address every manager is started with, served without authentication
// (--insecure-diagnostics) on loopback. Managers running as Pods (a kind
// target) have none here: their diagnostics port is the Pod's.
func (p *Plane) MetricsURLs() map[string]string {
	out := map[string]string{}
	if len(p.pods) > 0 {
		return out
	}
	for _, m := range p.managers {
		if ports, ok := p.ports[m.name]; ok && ports.diagnostics > 0 {
			out[m.name] = "http://127.0.0.1:" + strconv.Itoa(ports.diagnostics) + "/metrics"
		}
	}
	return out
}

func (p *Plane) discovery() *discovery.DiscoveryClient {
	return discovery.NewDiscoveryClientForConfigOrDie(p.RESTConfig)
}
