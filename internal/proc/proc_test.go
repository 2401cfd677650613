package proc

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zombieLeaderEnv makes the test binary a process whose first thread
// ends while its other threads keep running and keep a listener open:
// the state a killed multi-threaded server can be seen in for a moment
// (its leader a zombie, its port still bound), held here for as long as
// the test needs it.
const zombieLeaderEnv = "PROC_TEST_ZOMBIE_LEADER"

func init() {
	if os.Getenv(zombieLeaderEnv) != "" {
		// Keep the main goroutine on the process's first thread, so
		// ending that thread ends the thread-group leader.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if addr := os.Getenv(zombieLeaderEnv); addr != "" {
		zombieLeader(addr)
		return
	}
	os.Exit(m.Run())
}

func zombieLeader(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fmt.Println("listening")
	// exit(2), not exit_group(2): only this thread ends. Through
	// syscall.Syscall the runtime takes the goroutine for one in a long
	// system call and keeps the other threads running.
	syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0)
}

// A restarted server waits for the process before it: a killed process
// whose leader is a zombie while another thread still holds its listener
// has not ended, and its port is not free until that thread ends too.
func TestAZombieLeaderWithLiveThreadsHasNotExited(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), zombieLeaderEnv+"="+addr)
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	reaped := make(chan struct{})
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-reaped
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	go func() { child.Wait(); close(reaped) }()
	if err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("the child: %q, %v", line, err)
	}

	// Wait until the kernel shows the leader as a zombie: the evidence
	// the old wait took as "dead, its port released".
	deadline := time.Now().Add(10 * time.Second)
	for !leaderIsZombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the child's leader never turned zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if Exited(pid) {
		t.Fatalf("Exited(%d) = true for a zombie leader whose other threads still run", pid)
	}
	if !Alive(pid) {
		t.Fatalf("Alive(%d) = false: the reaper would spare a process that still holds its ports", pid)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := WaitExited(short, pid); err == nil {
		t.Fatal("waitExited returned while a thread of the process still ran")
	}
	if err := WaitBindable(short, addr); err == nil {
		t.Fatalf("%s bound while the zombie's thread still held it", addr)
	}

	// Now kill the whole process, as a restart does: the wait returns
	// and the port binds.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := WaitExited(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if err := WaitBindable(ctx, addr); err != nil {
		t.Fatalf("after every thread ended: %v", err)
	}
}

func leaderIsZombie(pid int) bool {
	fields, ok := Stat(pid)
	return ok && fields[0] == "Z"
}

func TestReadUsageSeesThisProcessGrow(t *testing.T) {
	before, ok := ReadUsage(os.Getpid())
	if !ok || before.RSS <= 0 || before.PeakRSS < before.RSS {
		t.Fatalf("usage %+v, %v", before, ok)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after, _ := ReadUsage(os.Getpid())
	if after.PeakRSS < before.PeakRSS+32<<20 {
		t.Fatalf("peak RSS %d after touching 64 MiB, %d before", after.PeakRSS, before.PeakRSS)
	}
	runtime.KeepAlive(buf)
	if _, ok := ReadUsage(1 << 30); ok {
		t.Fatal("a process that does not exist has a usage")
	}
}
