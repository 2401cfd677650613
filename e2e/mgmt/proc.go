package mgmt

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// exited reports whether every thread of process pid has ended, so that
// nothing it held (listening sockets, files, locks) is held any more.
//
// A zombie thread-group leader is not enough: when a multi-threaded
// process is killed, or its first thread ends on its own, the leader can
// turn zombie while its other threads still run, and those threads share
// the process's file table until the last of them exits. A kube-apiserver
// restarted on that evidence exited with "bind: address already in use".
// So the process counts as ended only when /proc no longer has it, or
// when its leader is a zombie that is its last thread.
func exited(pid int) bool {
	if pid <= 0 {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
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

// waitExited waits until every thread of pid has ended (see exited).
func waitExited(ctx context.Context, pid int) error {
	for !exited(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d has not ended: %w", pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// waitBindable waits until a listener can bind addr (host:port) and
// releases it at once: the port a killed server held is free for its
// successor. It is the condition the restart needs, checked directly,
// after waitExited has made it likely.
func waitBindable(ctx context.Context, addr string) error {
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still taken: %v (%w)", addr, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
