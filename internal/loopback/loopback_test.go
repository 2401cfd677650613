package loopback

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Scenarios starting at once each ask for their ports: every port is below
// the ephemeral range and none is handed out twice.
func TestPortsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ports, err := Ports(15)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ports {
				if p < firstPort || p >= 32768 {
					t.Errorf("port %d is outside %d..32767", p, firstPort)
				}
				if seen[p] {
					t.Errorf("port %d handed out twice", p)
				}
				seen[p] = true
			}
		}()
	}
	wg.Wait()
	if len(seen) != 8*15 {
		t.Fatalf("%d distinct ports, want %d", len(seen), 8*15)
	}
}

// holdEnv makes the test binary a second process that takes ports from
// a registry and holds them until its standard input closes.
const holdEnv = "LOOPBACK_TEST_HOLD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(holdEnv); spec != "" {
		holdPorts(spec)
		return
	}
	os.Exit(m.Run())
}

// holdPorts is the second process: spec is "file first span n".
func holdPorts(spec string) {
	var file string
	var first, span, n int
	if _, err := fmt.Sscan(spec, &file, &first, &span, &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r, err := open(file, first, span)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ports, err := r.take(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(ports)
	io.Copy(io.Discard, os.Stdin)
}

// Two test binaries run at once: a port one process handed out (and
// has not bound yet) is never handed out by the other, and comes free
// when that process exits.
func TestAPortAnotherProcessHoldsIsNotHandedOut(t *testing.T) {
	const span = 20
	first := freeRange(t, span)
	file := filepath.Join(t.TempDir(), "ports.lock")

	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d", holdEnv, file, first, span, span/2))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the other process: %v", err)
	}
	held := map[int]bool{}
	for _, f := range strings.Fields(strings.Trim(line, "[]\n")) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the other process printed %q", line)
		}
		held[p] = true
	}
	if len(held) != span/2 {
		t.Fatalf("the other process holds %v, want %d ports", held, span/2)
	}

	r, err := open(file, first, span)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	mine, err := r.take(span / 2)
	if err != nil {
		t.Fatalf("the other half of the range: %v", err)
	}
	for _, p := range mine {
		if held[p] {
			t.Errorf("port %d handed out while the other process holds it", p)
		}
	}
	if more, err := r.take(1); err == nil {
		t.Fatalf("got port %v from a range both processes have used up", more)
	}

	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}
	freed, err := r.take(span / 2)
	if err != nil {
		t.Fatalf("after the other process exited: %v", err)
	}
	for _, p := range freed {
		if !held[p] {
			t.Errorf("port %d was not the other process's", p)
		}
	}
}

// freeRange finds span consecutive loopback ports nothing listens on.
func freeRange(t *testing.T, span int) int {
	t.Helper()
next:
	for range 50 {
		first := firstPort + rand.IntN(portSpan-span)
		for p := first; p < first+span; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue next
			}
			l.Close()
		}
		return first
	}
	t.Fatal("no free range of loopback ports")
	return 0
}

// A registry that cannot be opened says which file.
func TestOpenNamesTheFileItCannotOpen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "no-such-folder", "ports.lock")
	_, err := open(file, firstPort, portSpan)
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("open(%s) = %v, want an error naming the file", file, err)
	}
}

// Two runs of a program that binds a fixed port never overlap: a second
// Hold of the port waits until the first is released, in the same
// process as in another.
func TestHoldWaitsForTheHolderToRelease(t *testing.T) {
	const port = 19000 + 7 // outside the range Ports hands out
	release, err := Hold(t.Context(), port)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := Hold(short, port); err == nil {
		t.Fatal("a second Hold of a held port did not wait")
	}
	got := make(chan error, 1)
	go func() {
		again, err := Hold(t.Context(), port)
		if err == nil {
			again()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second Hold returned (%v) while the first held the port", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second Hold still waits after the first released the port")
	}
}
