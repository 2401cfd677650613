package workload

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// VIPLeaseDuration is kube-vip's leader-election lease as its
// control-plane manifests set it (vip_leaseduration 5, renew deadline 3,
// retry period 1): how long the address stays with a holder whose API
// server went before another node's kube-vip takes it.
const VIPLeaseDuration = 5 * time.Second

// The VIP of a workload cluster is its controlPlaneEndpoint as kube-vip
// announces it: one loopback listener, held by one control-plane node
// (the first whose API server ran) and answered by that node's API
// server only. Every request goes to the holder, so the other nodes'
// API servers take no traffic while it serves.
//
// When the holder's API server stops the address does not answer until
// the holder's lease runs out (VIPLeaseDuration, lab time) and another
// node whose API server runs takes it: a holder whose host is gone
// answers nothing (connections hang, as packets to a dead host's MAC
// do), one whose host runs refuses them (its API server's port is
// closed). With no other API server running the address is released and
// refuses connections until one starts, which takes it at once. Kinder
// than kube-vip: the lease always runs its full duration (a real one
// may have been renewed up to its retry period before), a holder that
// comes back within its lease keeps the address, and a released address
// refuses connections where a real one, unannounced, would time out.
//
// This replaces CAPI's in-memory WorkloadClustersMux listeners, which
// bind every interface and never close while an API server instance is
// registered; the request handlers behind it are still CAPI's own
// (inmemoryapi for the Kubernetes API, inmemoryetcd for etcd's gRPC
// through port-forward), with upgradelab's additions in front
// (subresources.go).
type vip struct {
	port int32
	// listener is nil while the address refuses connections.
	listener *trackedListener
	// holder is the node whose kube-vip holds the address ("": none).
	holder string
	// lost: the holder's API server went and its lease is running out.
	lost bool
	// term counts changes of the holder's state, so a failover timer set
	// in an earlier term does nothing.
	term int
}

// apiServerStarted is node's API server taking requests: it takes the
// address when none holds it, and answers again as the holder whose
// lease has not run out. c.mu held.
func (c *Clusters) apiServerStarted(w *cluster, node string) error {
	w.apiServers[node] = true
	switch {
	case w.vip.holder == "":
		w.vip.holder, w.vip.term = node, w.vip.term+1
		return c.serveVIP(w, "kube-vip on "+node+" holds the VIP and its API server answers")
	case w.vip.holder == node && w.vip.lost:
		w.vip.lost, w.vip.term = false, w.vip.term+1
		return c.serveVIP(w, "the API server on "+node+", the VIP's holder, answers again")
	}
	return nil
}

// apiServerStopped is node's API server gone (why); hostGone says its
// host went with it. The holder's going takes the address down until
// its lease runs out. c.mu held.
func (c *Clusters) apiServerStopped(w *cluster, node, why string, hostGone bool) {
	if !w.apiServers[node] {
		return
	}
	w.apiServers[node] = false
	if w.vip.holder != node || w.vip.lost {
		return
	}
	w.vip.lost, w.vip.term = true, w.vip.term+1
	msg := fmt.Sprintf("the API server on %s, the VIP's holder, %s: ", node, why)
	if hostGone {
		c.blackholeVIP(w, msg+"its host is gone, so connections hang until kube-vip's lease runs out")
	} else {
		c.closeVIP(w, msg+"connections are refused until kube-vip's lease runs out")
	}
	name, term := w.name, w.vip.term
	time.AfterFunc(c.scale.Real(VIPLeaseDuration), func() { c.leaseRanOut(name, term, node) })
}

// leaseRanOut is the holder's lease ending in term: another node whose
// API server runs takes the address, or it is released.
func (c *Clusters) leaseRanOut(name string, term int, old string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok || w.vip.term != term || c.closed {
		return
	}
	w.vip.lost, w.vip.term = false, w.vip.term+1
	running := w.runningAPIServers()
	if len(running) == 0 {
		w.vip.holder = ""
		c.closeVIP(w, "the lease of "+old+" ran out and no API server runs: the address is released")
		return
	}
	w.vip.holder = running[0]
	if err := c.serveVIP(w, "kube-vip on "+running[0]+" took the VIP when the lease of "+old+" ran out"); err != nil {
		c.emit(Event{Cluster: name, Reason: vocab.EventAPIUnavailable, Message: err.Error()})
	}
}

// serveVIP answers on w's VIP; c.mu held.
func (c *Clusters) serveVIP(w *cluster, why string) error {
	switch {
	case w.vip.listener == nil:
		l, err := net.Listen("tcp", net.JoinHostPort(c.host, fmt.Sprint(w.vip.port)))
		if err != nil {
			return fmt.Errorf("workload cluster %s: VIP %s:%d: %w", w.name, c.host, w.vip.port, err)
		}
		tl := &trackedListener{Listener: l, conns: map[net.Conn]struct{}{}}
		w.vip.listener = tl
		go func() { _ = c.server.ServeTLS(tl, "", "") }()
	default:
		w.vip.listener.release()
	}
	c.emit(Event{Cluster: w.name, Reason: vocab.EventAPIAvailable, Message: "the VIP answers: " + why})
	return nil
}

// closeVIP refuses connections on w's VIP and drops the open ones; c.mu
// held.
func (c *Clusters) closeVIP(w *cluster, why string) {
	if w.vip.listener == nil {
		return
	}
	w.vip.listener.closeAll()
	w.vip.listener = nil
	c.emit(Event{Cluster: w.name, Reason: vocab.EventAPIUnavailable, Message: "the VIP refuses connections: " + why})
}

// blackholeVIP makes w's VIP answer nothing: open connections drop and
// new ones are accepted and never served; c.mu held.
func (c *Clusters) blackholeVIP(w *cluster, why string) {
	if w.vip.listener == nil {
		return
	}
	w.vip.listener.hold()
	c.emit(Event{Cluster: w.name, Reason: vocab.EventAPIUnavailable, Message: "the VIP answers nothing: " + why})
}

// trackedListener remembers its connections so closing the VIP drops
// them as a dead backend would; while holding, it parks new connections
// unserved.
type trackedListener struct {
	net.Listener
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	holding bool
	parked  []net.Conn
}

func (l *trackedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.holding {
			l.parked = append(l.parked, conn)
			l.mu.Unlock()
			continue
		}
		l.conns[conn] = struct{}{}
		l.mu.Unlock()
		return &trackedConn{Conn: conn, l: l}, nil
	}
}

type trackedConn struct {
	net.Conn
	l *trackedListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// hold drops every served connection and parks new ones.
func (l *trackedListener) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holding = true
	l.dropLocked()
}

// release serves new connections again; the parked ones are dropped
// (their clients, which waited, retry).
func (l *trackedListener) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holding = false
	for _, conn := range l.parked {
		_ = conn.Close()
	}
	l.parked = nil
}

// closeAll stops accepting and drops every connection.
func (l *trackedListener) closeAll() {
	_ = l.Listener.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked()
	for _, conn := range l.parked {
		_ = conn.Close()
	}
	l.parked = nil
}

// dropLocked closes the served connections; l.mu held.
func (l *trackedListener) dropLocked() {
	for conn := range l.conns {
		_ = conn.Close()
	}
}
