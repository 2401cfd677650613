package mgmt

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// spreader accepts connections on one address and hands each to the next
// backend in turn, as a Service's proxy spreads connections over a
// Deployment's Pods. TLS passes through: every replica serves the same
// certificate.
//
// A connection left idle for idleClose after the backend last sent
// something (an answer, not a request still being worked on) is closed.
// A client that keeps its
// connections (CAPI's runtime client, the API server's webhook client)
// would otherwise send every call to the replica its first connection
// reached; closed, each call a second or more apart dials anew and lands
// on the next replica, so a run exercises calls that come to a replica
// which did not see the earlier ones.
type spreader struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
}

const idleClose = 200 * time.Millisecond

func newSpreader(addr string, backends []string) (*spreader, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &spreader{ln: ln, backends: backends}
	go s.serve()
	return s, nil
}

func (s *spreader) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		backend := s.backends[s.next.Add(1)%uint64(len(s.backends))]
		go s.pipe(c, backend)
	}
}

// pipe copies both ways between c and a connection to backend until one
// side ends, or the backend spoke last and the pair has been idle for
// idleClose. last is when bytes last moved, negative when the client
// sent them (a request the backend may still be working on).
func (s *spreader) pipe(c net.Conn, backend string) {
	defer c.Close()
	b, err := net.DialTimeout("tcp", backend, 5*time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	var last atomic.Int64
	last.Store(-time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	copyOne := func(dst, src net.Conn, sign int64) {
		defer cancel()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(sign * time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return // EOF or a closed connection: the pair ends
			}
		}
	}
	go copyOne(b, c, -1)
	go copyOne(c, b, 1)
	tick := time.NewTicker(idleClose / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if at := last.Load(); at > 0 && time.Since(time.Unix(0, at)) > idleClose {
				return
			}
		}
	}
}

// Close stops accepting; connections open end when idle.
func (s *spreader) Close() error { return s.ln.Close() }
