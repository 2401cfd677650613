package site

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// Every listener of a site binds a loopback address: a developer's lab
// (BMCs, agents, the image server, the workload clusters' VIPs) must not
// be reachable from the network the machine is on.
func TestEveryListenerOfASiteIsOnLoopback(t *testing.T) {
	def, err := lab.Load("../../fixtures/labs/three-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Start(ctx, Options{Lab: def, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	// A workload cluster with a running API server: its VIP listens.
	if _, err := s.VIP(ctx, "default/wl"); err != nil {
		t.Fatal(err)
	}
	clusterCA, etcdCA := labtest.ClusterCAs(t)
	if err := s.Workloads.JoinControlPlane(ctx, "default/wl", "cp-0", workload.Release{Kubernetes: "v1.35.3"}, nil, clusterCA, etcdCA); err != nil {
		t.Fatal(err)
	}

	listeners := listening(t)
	// Three BMCs, three agents, the image server and the VIP at least.
	if len(listeners) < 8 {
		t.Fatalf("found %d listening sockets of this process, want every server of the site: %v", len(listeners), listeners)
	}
	for _, addr := range listeners {
		if !addr.IP.IsLoopback() {
			t.Errorf("a site listener binds %s, not a loopback address", addr)
		}
	}
}

// listening is every TCP socket this process listens on, from
// /proc/net/tcp{,6} matched to the process's own socket inodes.
func listening(t *testing.T) []*net.TCPAddr {
	t.Helper()
	mine := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []*net.TCPAddr
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ... inode (field 9)
			if len(fields) < 10 || fields[3] != "0A" || !mine[fields[9]] {
				continue
			}
			addr, err := parseProcAddr(fields[1])
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			out = append(out, addr)
		}
		f.Close()
	}
	return out
}

// parseProcAddr reads /proc/net/tcp's "0100007F:1F90" (the address in
// host byte order per 32-bit word).
func parseProcAddr(s string) (*net.TCPAddr, error) {
	hostHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(hostHex)
	if err != nil {
		return nil, err
	}
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	var port int
	if _, err := fmt.Sscanf(portHex, "%X", &port); err != nil {
		return nil, err
	}
	return &net.TCPAddr{IP: net.IP(raw), Port: port}, nil
}
