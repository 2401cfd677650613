package proc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one child of the harness with its log in a folder. Children
// die with the harness (Pdeathsig) and, recorded with a Reaper, are ended
// by the next harness if the harness is killed before it can stop them.
type Process struct {
	// Name names the process in errors and its log file (NAME.log).
	Name string
	// LogPath is the file its stdout and stderr go to.
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start starts binary as a child named name, its output appended to
// logDir/NAME.log, env added to the harness's environment.
func Start(name, binary string, args, env []string, logDir string) (*Process, error) {
	if len(env) > 0 {
		env = append(os.Environ(), env...)
	}
	return StartIn(name, binary, args, env, logDir)
}

// StartIn is Start with env the child's whole environment (nil: the
// harness's).
func StartIn(name, binary string, args, env []string, logDir string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, binary, err)
	}
	p := &Process{Name: name, cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the child has exited and been waited for.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Running says whether the child has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is how the child ended (Wait's error); read it after Exited.
func (p *Process) Err() error { return p.err }

// Kill kills the child at once and returns once it has been waited for:
// every thread of it has ended.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to end and kills it when it does not within grace.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitHealthy polls url until it answers 200, the process exits, or ctx
// ends; the error carries the end of the process's log.
func (p *Process) WaitHealthy(ctx context.Context, url string) error {
	return p.WaitHealthyWith(ctx, &http.Client{Timeout: time.Second}, url)
}

// WaitHealthyWith is waitHealthy through client.
func (p *Process) WaitHealthyWith(ctx context.Context, client *http.Client, url string) error {
	return p.waitFor(ctx, url+" answered", func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// WaitListening polls until something accepts TCP connections on addr
// (a server whose readiness check does not cover it), the process exits,
// or ctx ends; the error carries the end of the process's log.
func (p *Process) WaitListening(ctx context.Context, addr string) error {
	return p.waitFor(ctx, addr+" listened", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// waitFor polls ready every 100 ms until it holds, the process exits or
// ctx ends.
func (p *Process) waitFor(ctx context.Context, what string, ready func() bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s (%s); last log lines:\n%s", p.Name, what, fmt.Sprint(p.err), TailFile(p.LogPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting until %s: %w; last log lines:\n%s", p.Name, what, ctx.Err(), TailFile(p.LogPath, 20))
		case <-tick.C:
		}
	}
	return nil
}

// TailFile is the last n lines of the file at path, or why it cannot be
// read.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
