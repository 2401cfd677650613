package proc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// WaitListening returns once something listens on the address; a
// process that exits first ends the wait at once with its log's last
// lines, and a deadline ends it naming what was awaited.
func TestWaitListeningEndsWithTheProcess(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sleeper, err := Start("sleeper", "/bin/sleep", []string{"30"}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sleeper.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sleeper.WaitListening(ctx, ln.Addr().String()); err != nil {
		t.Errorf("with a listener: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if err := sleeper.WaitListening(short, addr); err == nil || !strings.Contains(err.Error(), "waiting until "+addr+" listened") {
		t.Errorf("nothing listening, deadline: %v", err)
	}
	crasher, err := Start("crasher", "/bin/sh", []string{"-c", "echo no certificate; exit 3"}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	err = crasher.WaitListening(ctx, addr)
	if err == nil || !strings.Contains(err.Error(), "crasher exited before "+addr+" listened") || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("a process that exits: %v", err)
	}
}
