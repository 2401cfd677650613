package proc

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Exited reports whether every thread of process pid has ended, so that
// nothing it held (listening sockets, files, locks) is held any more.
//
// A zombie thread-group leader is not enough: when a multi-threaded
// Process is killed, or its first thread ends on its own, the leader can
// turn zombie while its other threads still run, and those threads share
// the process's file table until the last of them exits. A kube-apiserver
// restarted on that evidence exited with "bind: address already in use".
// So the process counts as ended only when /proc no longer has it, or
// when its leader is a zombie that is its last thread.
func Exited(pid int) bool {
	if pid <= 0 {
		return true
	}
	stat, ok := Stat(pid)
	if !ok {
		return true
	}
	if stat[0] != "Z" {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true // reaped between the two reads
	}
	for _, t := range tasks {
		if t.Name() != strconv.Itoa(pid) {
			return false // a thread of the zombie's still runs
		}
	}
	return true
}

// Stat is /proc/PID/stat's fields after the command (whose name may
// hold spaces and parentheses): [0] is the state, [1] the parent's pid,
// [11:15] utime, stime, cutime and cstime. False when the process is gone.
func Stat(pid int) ([]string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, false
	}
	fields := strings.Fields(string(data[i+1:]))
	return fields, len(fields) > 0
}

// StartTime is when process pid started, in clock ticks since boot
// (/proc/PID/stat's field 22), "" when it is gone: with the pid, it names
// one process, whatever reuses the pid later.
func StartTime(pid int) string {
	fields, ok := Stat(pid)
	if !ok || len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// WaitExited waits until every thread of pid has ended (see Exited).
func WaitExited(ctx context.Context, pid int) error {
	for !Exited(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d has not ended: %w", pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// WaitBindable waits until a listener can bind addr (host:port) and
// releases it at once: the port a killed server held is free for its
// successor. It is the condition the restart needs, checked directly,
// after WaitExited has made it likely.
func WaitBindable(ctx context.Context, addr string) error {
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still taken: %w (%w)", addr, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100
// on every Linux architecture Go runs the plane on.
const userHZ = 100

// CPUTime is the CPU time (user and system, its reaped children's
// included) process pid has used so far; false when it is gone.
func CPUTime(pid int) (time.Duration, bool) {
	fields, ok := Stat(pid)
	if !ok || len(fields) < 15 {
		return 0, false
	}
	var ticks int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, true
}

// CmdlineHas says whether process pid's command line contains s.
func CmdlineHas(pid int, s string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(data), s)
}

// ChildNamed is the child of this process whose command is comm and
// whose command line contains mark, or 0. Several planes can run in one
// Process (the bench's four scenarios at once), so the command alone
// does not say whose a kube-apiserver is; its port does.
func ChildNamed(comm, mark string) int {
	for _, c := range ChildrenOf(os.Getpid()) {
		if got, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(got)) == comm && CmdlineHas(c, mark) {
			return c
		}
	}
	return 0
}

// Usage is what one process has used so far: CPU time (its own and its
// reaped children's), its resident memory now and at its peak (the
// kernel's high-water mark, VmHWM, so no sample can miss a peak).
type Usage struct {
	CPU          time.Duration
	RSS, PeakRSS int64 // bytes
}

// ReadUsage reads pid's Usage from /proc; false when it is gone.
func ReadUsage(pid int) (Usage, bool) {
	cpu, ok := CPUTime(pid)
	if !ok {
		return Usage{}, false
	}
	u := Usage{CPU: cpu}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			u.RSS = kib << 10
		case "VmHWM":
			u.PeakRSS = kib << 10
		}
	}
	return u, true
}
