package mgmt

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// backend answers each line with its name, after delay.
func backend(t *testing.T, name string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					time.Sleep(delay)
					if _, err := c.Write([]byte(name + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// Connections go to the backends in turn; an answer slower than
// idleClose still arrives (the backend is working on a request); a
// connection left idle after an answer is closed, so the next call dials
// anew and reaches the other backend.
func TestSpreaderHandsConnectionsOutInTurnAndClosesIdleOnes(t *testing.T) {
	s, err := newSpreader("127.0.0.1:0", []string{backend(t, "a", 0), backend(t, "b", 2*idleClose)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(c net.Conn) (string, error) {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line), err
	}
	var got []string
	for range 2 {
		c, err := net.Dial("tcp", s.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		name, err := call(c)
		if err != nil {
			t.Fatalf("call through the spreader: %v (a slow answer cut off?)", err)
		}
		got = append(got, name)
		time.Sleep(3 * idleClose)
		if _, err := call(c); err == nil {
			t.Fatalf("a connection idle for %s after its answer was kept", 3*idleClose)
		}
		c.Close()
	}
	if strings.Join(got, ",") != "b,a" && strings.Join(got, ",") != "a,b" {
		t.Fatalf("backends %v; want each once", got)
	}
}
