package loopback

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Ports come from below Linux's ephemeral range (32768 up by default). A
// port from that range, free while its listener is not bound, can
// meanwhile become the source port of any outgoing connection; four
// scenarios starting at once open hundreds, and one did take a
// provider's health port, another a workload cluster's, that way. Below
// the range only another explicit bind can take it.
//
// Below 19000, too: CAPI's in-memory provider (CAPD's inMemory backend,
// run unmodified) binds its debug server on 19000 and its workload
// clusters on 20000, 20001, ... in turn, up to 30000, without checking
// that a port is free; a port of ours in that range could make one of
// its clusters fail. From 10300: the kubelet and the control plane's own
// components use 10248-10260 on a machine that runs Kubernetes.
const (
	firstPort = FirstPort
	portSpan  = 19000 - firstPort
)

// FirstPort is the lowest port this package hands out (a kind management
// cluster forwards lab ports from it up: e2e/mgmt/kind).
const FirstPort = 10300

// registry hands out ports no other live registry on the machine holds.
// Being free at the moment of asking is not enough: a workload cluster's
// port stays unbound until its first control-plane node boots, and `go
// test ./...` runs two test binaries at once, so another process could
// see the same port free and bind it first (it did: a cluster's API
// server then never came up). Each registry locks one byte per port,
// byte N for port N, in a file every upgradelab process opens. The locks
// are open-file-description locks, so the kernel drops them when the
// registry's file is closed or its process exits, however it exits.
type registry struct {
	mu          sync.Mutex
	file        *os.File
	first, span int
	handedOut   map[int]bool
}

// open opens the registry kept in file, handing out ports first to
// first+span-1.
func open(file string, first, span int) (*registry, error) {
	// Without O_CREAT first: Linux refuses O_CREAT on another user's file
	// in a sticky folder such as /tmp (fs.protected_regular).
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if f, err = os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o666); err == nil {
			// Another user's processes lock the same file (umask trimmed the mode).
			_ = f.Chmod(0o666)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loopback port registry: %w", err)
	}
	return &registry{file: f, first: first, span: span, handedOut: map[int]bool{}}, nil
}

// close releases every port this registry handed out.
func (r *registry) close() error { return r.file.Close() }

// take picks n distinct ports that are free now and that no live
// registry has handed out.
func (r *registry) take(n int) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("no %d free loopback ports between %d and %d", n, r.first, r.first+r.span-1)
		}
		port := r.first + rand.IntN(r.span)
		if r.handedOut[port] || !r.lock(port) {
			continue
		}
		// Held by this registry from now on, even if in use right now
		// (by a program that does not use the registry): it stays out of
		// the way of the next pick.
		r.handedOut[port] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// lock takes byte port of the file without waiting; false when another
// registry holds it.
func (r *registry) lock(port int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	return unix.FcntlFlock(r.file.Fd(), unix.F_OFD_SETLK, &lk) == nil
}

// machine is this process's registry. Ports are a machine-wide resource,
// hence process-wide state.
var machine = sync.OnceValues(func() (*registry, error) {
	return open(filepath.Join(os.TempDir(), "upgradelab-loopback-ports.lock"), firstPort, portSpan)
})

// Hold waits until no other holder on the machine has any of ports, then
// holds them until release is called (or the process exits): for ports a
// program binds whatever it is told, such as CAPD's fixed debug port, so
// that two runs of it never overlap, in this process or another. The
// ports are not checked for being free: the program binds them.
func Hold(ctx context.Context, ports ...int) (release func(), err error) {
	r, err := machine()
	if err != nil {
		return nil, err
	}
	// An open file description of its own: its locks conflict with every
	// other description's, this process's registry's and other holds'
	// included, and closing it releases them all.
	f, err := os.OpenFile(r.file.Name(), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("loopback port registry: %w", err)
	}
	for _, port := range ports {
		for {
			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
			if unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk) == nil {
				break
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("waiting for port %d, which another run holds: %w", port, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return func() { f.Close() }, nil
}

// Ports picks n ports from the machine's registry.
func Ports(n int) ([]int, error) {
	r, err := machine()
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

// Addr is one such port as 127.0.0.1:PORT.
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}
