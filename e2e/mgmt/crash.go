package mgmt

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"
)

// APIServerCrash is one end of the embedded kube-apiserver that nobody
// asked for, and the restart the plane gave it.
//
// On a real control-plane node kube-apiserver is a static Pod and the
// kubelet starts it again when it exits; the CAPI managers ride through
// the outage on their retries. The embedded plane has no kubelet, so
// without this a crash ended the run with whatever request was in flight
// ("installing CRD ...: unexpected EOF"), a verdict about kube-apiserver
// (v1.36.3 panicked in kube-openapi's cache while 30 CRDs were created at
// once, the family of kubernetes/kubernetes#120758) and not about the
// upgrade. A crash is never hidden: it is a progress line, a step on the
// run's timeline (e2e/runner) and a line of the report.
type APIServerCrash struct {
	Time time.Time `json:"time"`
	PID  int       `json:"pid"`
	// Reason is the Go runtime's last word in the log (the panic or fatal
	// signal line and the function it came from), or "exited" when the log
	// has none (an OOM kill, SIGKILL).
	Reason string `json:"reason"`
	Log    string `json:"log"`
	// RestartedPID is the process started in its place; 0 when that start
	// failed (Err).
	RestartedPID int    `json:"restartedPID,omitempty"`
	Err          string `json:"error,omitempty"`
}

func (c APIServerCrash) String() string {
	s := fmt.Sprintf("kube-apiserver (pid %d) crashed: %s (log %s); ", c.PID, c.Reason, c.Log)
	if c.Err != "" {
		return s + "not restarted: " + c.Err
	}
	return s + fmt.Sprintf("restarted as the kubelet restarts a static Pod (pid %d)", c.RestartedPID)
}

// apiServerState is the embedded kube-apiserver as the supervisor and
// RestartAPIServer share it, under Plane.apiMu.
type apiServerState struct {
	argv []string // binary and flags, read from envtest's child at start
	pid  int
	// log and logFrom: the file the running process writes and its size
	// when it started, so a crash's reason is read from its own output.
	log     string
	logFrom int64
	crashes []APIServerCrash
	onCrash map[int]func(APIServerCrash)
	nextSub int
	stop    chan struct{}
	done    chan struct{}
}

// crashBackoff is the kubelet's restart back-off for a container that
// keeps exiting: the first restart at once, then 10 s doubling to 5 min.
// crashes counts this one and the ones before it in a row (backOffCount).
func crashBackoff(crashes int) time.Duration {
	if crashes <= 1 {
		return 0
	}
	d := 10 * time.Second
	for i := 2; i < crashes && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// backOffCount is how many crashes in a row a crash at now makes: the
// kubelet forgets a container's back-off once it has not been raised for
// twice its 5 min cap (client-go's flowcontrol.Backoff), so a crash after
// 10 quiet minutes is restarted at once again.
func backOffCount(earlier []APIServerCrash, now time.Time) int {
	n := 1
	for i := len(earlier) - 1; i >= 0 && now.Sub(earlier[i].Time) <= 10*time.Minute; i-- {
		n, now = n+1, earlier[i].Time
	}
	return n
}

// superviseAPIServer watches the embedded kube-apiserver from now until
// Stop, and starts it again whenever it ends on its own.
func (p *Plane) superviseAPIServer(logPath string) error {
	pid, binary, args, err := p.apiServerProcess()
	if err != nil {
		return err
	}
	p.apiMu.Lock()
	p.api = &apiServerState{argv: append([]string{binary}, args...), pid: pid, log: logPath,
		onCrash: map[int]func(APIServerCrash){}, stop: make(chan struct{}), done: make(chan struct{})}
	st := p.api
	p.apiMu.Unlock()
	go func() {
		defer close(st.done)
		for {
			select {
			case <-st.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			p.apiMu.Lock()
			dead := p.apiServerGone(st.pid)
			p.apiMu.Unlock()
			if !dead {
				continue
			}
			select {
			case <-st.stop:
				return
			case <-time.After(crashBackoff(backOffCount(st.crashes, time.Now()))):
			}
			p.apiMu.Lock()
			c := p.restartCrashed()
			subs := make([]func(APIServerCrash), 0, len(st.onCrash))
			for _, fn := range st.onCrash {
				subs = append(subs, fn)
			}
			p.apiMu.Unlock()
			fmt.Fprintf(p.progress, "mgmt: %s\n", c)
			for _, fn := range subs {
				fn(c)
			}
		}
	}()
	return nil
}

// apiServerGone says whether the API server process pid has ended: every
// thread gone, or the pid now someone else's.
func (p *Plane) apiServerGone(pid int) bool {
	return proc.Exited(pid) || !proc.CmdlineHas(pid, "--secure-port=")
}

// restartCrashed records the crash of the current process and starts a
// new one with the same command line. Called with apiMu held.
func (p *Plane) restartCrashed() APIServerCrash {
	st := p.api
	c := APIServerCrash{Time: time.Now(), PID: st.pid, Reason: crashReason(st.log, st.logFrom), Log: st.log}
	if p.apiServer != nil {
		<-p.apiServer.Exited() // /proc says it is gone; Wait returns at once
		if c.Reason == "exited" && p.apiServer.Err() != nil {
			c.Reason = "exited: " + p.apiServer.Err().Error()
		}
	}
	if err := p.startAPIServer(); err != nil {
		c.Err = err.Error()
	} else {
		c.RestartedPID = st.pid
	}
	st.crashes = append(st.crashes, c)
	return c
}

// startAPIServer starts kube-apiserver with the recorded command line
// once its port can be bound again. Called with apiMu held.
func (p *Plane) startAPIServer() error {
	st := p.api
	gone, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := proc.WaitBindable(gone, hostPort(p.RESTConfig.Host)); err != nil {
		return fmt.Errorf("its port: %w", err)
	}
	const name = "kube-apiserver-restarted"
	logPath := filepath.Join(p.LogDir, name+".log")
	var from int64
	if fi, err := os.Stat(logPath); err == nil {
		from = fi.Size()
	}
	child, err := proc.Start(name, st.argv[0], st.argv[1:], nil, p.LogDir)
	if err != nil {
		return err
	}
	p.apiServer = child
	st.pid, st.log, st.logFrom = child.PID(), logPath, from
	_ = p.reaper.Record(child.PID())
	return nil
}

// APIServerCrashes are the embedded kube-apiserver's crashes so far.
func (p *Plane) APIServerCrashes() []APIServerCrash {
	p.apiMu.Lock()
	defer p.apiMu.Unlock()
	if p.api == nil {
		return nil
	}
	return append([]APIServerCrash(nil), p.api.crashes...)
}

// OnAPIServerCrash calls fn with each crash so far (the plane's start
// included) and then after each crash and restart until the returned func
// is called; a run records them on its timeline. A plane that runs no API
// server of its own never calls it.
func (p *Plane) OnAPIServerCrash(fn func(APIServerCrash)) (cancel func()) {
	p.apiMu.Lock()
	if p.api == nil {
		p.apiMu.Unlock()
		return func() {}
	}
	past := append([]APIServerCrash(nil), p.api.crashes...)
	id := p.api.nextSub
	p.api.nextSub++
	p.api.onCrash[id] = fn
	p.apiMu.Unlock()
	for _, c := range past {
		fn(c)
	}
	return func() {
		p.apiMu.Lock()
		delete(p.api.onCrash, id)
		p.apiMu.Unlock()
	}
}

// stopSupervising ends the supervisor before Stop ends the API server.
func (p *Plane) stopSupervising() {
	p.apiMu.Lock()
	st := p.api
	p.apiMu.Unlock()
	if st == nil {
		return
	}
	select {
	case <-st.stop:
	default:
		close(st.stop)
	}
	<-st.done
}

// crashReason is what the Go runtime last wrote to a log after offset
// from: its "panic:", "fatal error:" or fatal signal line, with the first
// function of the goroutine that died; "exited" when there is none.
func crashReason(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "exited"
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "exited"
	}
	reason, frame := "", ""
	inStack := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "), isSignalLine(line):
			reason, frame, inStack = line, "", false
		case reason != "" && frame == "" && strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
			inStack = true
		case inStack && frame == "" && line != "" && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "panic("):
			frame, inStack = line, false
			if i := strings.LastIndexByte(frame, '('); i > 0 {
				frame = frame[:i]
			}
		}
	}
	if reason == "" {
		return "exited"
	}
	if frame != "" {
		return reason + " in " + frame
	}
	return reason
}

// isSignalLine is the Go runtime's first line for a fatal signal, e.g.
// "SIGABRT: abort" or "SIGSEGV: segmentation violation".
func isSignalLine(line string) bool {
	name, _, ok := strings.Cut(line, ": ")
	if !ok || len(name) < 5 || !strings.HasPrefix(name, "SIG") {
		return false
	}
	return strings.ToUpper(name) == name && !strings.Contains(name, " ")
}
