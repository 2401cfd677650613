package ipmi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Config is one BMC's IPMI interface.
type Config struct {
	Host               *lab.Host
	Username, Password string
	// Addr to listen on (UDP); default a loopback port (package loopback).
	Addr  string
	Scale timescale.Scale
	// FirmwareVersion is the BMC's (Get Device ID), e.g. "7.00".
	FirmwareVersion string
	// ResetSeconds is the modelled time a BMC reset leaves it silent.
	ResetSeconds float64
	// OnReboot is told when this BMC reboots itself (`mc reset`), with
	// the time it is down, so the BMC's other services (its Redfish) go
	// down with it: they are one controller.
	OnReboot func(down time.Duration)
}

// Faults are injected per BMC at run time.
type Faults struct {
	// Latency is added before every answer.
	Latency time.Duration
	// DropRate is the share of datagrams (0..1) that get no answer, as on
	// a lossy management network.
	DropRate float64
}

// BMC is a running IPMI over LAN interface for one host.
type BMC struct {
	cfg  Config
	addr string

	mu                sync.Mutex
	conn              *net.UDPConn
	faults            Faults
	sessions          map[uint32]*session
	bootSetInProgress bool
	bootInfoAck       byte
	lastOnByIPMI      bool
	offlineUntil      time.Time
	closed            bool

	wg     sync.WaitGroup // the read loop and background work
	ctx    context.Context
	cancel context.CancelFunc
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*BMC, error) {
	if cfg.Host == nil || cfg.Username == "" {
		return nil, errors.New("ipmi: a host and a user name are required")
	}
	if len(cfg.Password) > 20 {
		return nil, fmt.Errorf("ipmi: host %s: an IPMI v2.0 password has at most 20 characters, this one %d", cfg.Host.Name(), len(cfg.Password))
	}
	if cfg.FirmwareVersion == "" {
		cfg.FirmwareVersion = "7.00"
	}
	if cfg.ResetSeconds == 0 {
		cfg.ResetSeconds = 60
	}
	addr := cfg.Addr
	if addr == "" {
		var err error
		if addr, err = loopback.Addr(); err != nil {
			return nil, err
		}
	}
	b := &BMC{cfg: cfg, addr: addr, sessions: map[uint32]*session{}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if err := b.listen(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *BMC) listen() error {
	ua, err := net.ResolveUDPAddr("udp", b.addr)
	if err != nil {
		return fmt.Errorf("ipmi: host %s: %w", b.cfg.Host.Name(), err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return fmt.Errorf("ipmi: host %s: %w", b.cfg.Host.Name(), err)
	}
	b.addr = conn.LocalAddr().String()
	b.mu.Lock()
	b.conn = conn
	b.mu.Unlock()
	b.wg.Add(1)
	go b.serve(conn)
	return nil
}

// Addr is HOST:PORT (UDP), what ipmitool's -H and -p take.
func (b *BMC) Addr() string { return b.addr }

// SetFaults replaces the injected faults.
func (b *BMC) SetFaults(f Faults) {
	b.mu.Lock()
	b.faults = f
	b.mu.Unlock()
}

// Reset reboots the BMC: every session is forgotten and nothing is
// answered for the modelled reset time (`mc reset cold`, or a fault).
// The host's power is untouched, as on real servers.
func (b *BMC) Reset() {
	down := b.cfg.Scale.Real(timescale.Seconds(b.cfg.ResetSeconds))
	b.Unreachable(down)
	if b.cfg.OnReboot != nil {
		b.cfg.OnReboot(down)
	}
}

// Unreachable is the BMC down for d (real time): a reset, a crashed BMC,
// its network cut. Sessions are lost, nothing is answered until then.
func (b *BMC) Unreachable(d time.Duration) {
	b.mu.Lock()
	b.sessions = map[uint32]*session{}
	b.offlineUntil = time.Now().Add(d)
	b.bootSetInProgress = false
	b.mu.Unlock()
	b.cfg.Host.Record(lab.EventBMC, "BMCReset", fmt.Sprintf("the BMC reboots: no IPMI for %s", d.Round(time.Millisecond)), map[string]string{"protocol": "ipmi"})
}

// offline says whether a reset keeps the BMC silent now.
func (b *BMC) offline() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Now().Before(b.offlineUntil)
}

// Close stops serving and waits for work in flight.
func (b *BMC) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	conn := b.conn
	b.mu.Unlock()
	b.cancel()
	err := conn.Close()
	b.wg.Wait()
	return err
}

// guid is the system's GUID, stable per host name (RAKP 2 carries it and
// `mc guid` reads it): a version 4 UUID, sent as IPMI encodes GUIDs
// (section 20.8: the 16 bytes least significant first, the reverse of
// RFC 4122's order; ipmitool warns of a specification violation
// otherwise).
func (b *BMC) guid() [16]byte {
	sum := sha256.Sum256([]byte("upgradelab system " + b.cfg.Host.Name()))
	var u [16]byte
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0F | 0x40
	u[8] = u[8]&0x3F | 0x80
	var g [16]byte
	for i := range u {
		g[i] = u[15-i]
	}
	return g
}

func (b *BMC) serve(conn *net.UDPConn) {
	defer b.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		b.mu.Lock()
		f, offline := b.faults, time.Now().Before(b.offlineUntil)
		b.mu.Unlock()
		if offline || (f.DropRate > 0 && rand.Float64() < f.DropRate) {
			continue
		}
		out := b.handle(buf[:n])
		if out == nil {
			continue
		}
		if f.Latency > 0 {
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				select {
				case <-time.After(f.Latency):
					conn.WriteToUDP(out, from)
				case <-b.ctx.Done():
				}
			}()
			continue
		}
		conn.WriteToUDP(out, from)
	}
}

// handle answers one datagram; nil means no answer (what a BMC does with
// a packet it cannot read or authenticate: a console times out).
func (b *BMC) handle(dgram []byte) []byte {
	p, err := parsePacket(dgram, b.macLen)
	if err != nil {
		return nil
	}
	if p.v15 {
		return b.sessionless(p, v15Packet)
	}
	if p.sessionID == 0 {
		switch p.payloadType {
		case payloadOpenSession:
			return rmcpPacket(payloadOpenResp, 0, 0, b.openSession(p.payload), false, nil)
		case payloadRAKP1:
			return rmcpPacket(payloadRAKP2, 0, 0, b.rakp1(p.payload), false, nil)
		case payloadRAKP3:
			return rmcpPacket(payloadRAKP4, 0, 0, b.rakp3(p.payload), false, nil)
		case payloadIPMI:
			if p.encrypted || p.authed {
				return nil
			}
			return b.sessionless(p, func(msg []byte) []byte { return rmcpPacket(payloadIPMI, 0, 0, msg, false, nil) })
		}
		return nil
	}
	return b.inSession(p)
}

func (b *BMC) macLen(id uint32) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.sessions[id]; s != nil && s.active {
		return s.suite.macLen
	}
	return 0
}

// sessionless serves the commands allowed before a session (Get Channel
// Authentication Capabilities, Get Channel Cipher Suites, Get System
// GUID).
func (b *BMC) sessionless(p packet, frame func([]byte) []byte) []byte {
	m, err := parseMessage(p.payload)
	if err != nil {
		return nil
	}
	c, ok := commands[[2]byte{m.netFn, m.cmd}]
	if !ok || !c.preSession {
		return frame(m.reply(ccInsufficientPriv, nil))
	}
	cc, data := c.run(b, nil, m.data)
	return frame(m.reply(cc, data))
}

// inSession checks an active session's packet (integrity, then
// decryption), runs the IPMI command and answers in the same session,
// signed and encrypted as the request was.
func (b *BMC) inSession(p packet) []byte {
	b.mu.Lock()
	s := b.sessions[p.sessionID]
	if s == nil || !s.active || !p.authed || p.payloadType != payloadIPMI {
		b.mu.Unlock()
		return nil
	}
	want := s.suite.hmac(s.k1, p.signed)[:s.suite.macLen]
	if !hmac.Equal(p.mac, want) {
		b.mu.Unlock()
		return nil
	}
	// Replays far behind the highest sequence seen are dropped; a console
	// retransmitting the same sequence is answered again.
	if p.seq == 0 || p.seq+32 < s.inSeq {
		b.mu.Unlock()
		return nil
	}
	s.inSeq = max(s.inSeq, p.seq)
	s.seen = time.Now()
	k2 := s.k2
	b.mu.Unlock()

	payload := p.payload
	if p.encrypted {
		var err error
		if payload, err = decrypt(k2, payload); err != nil {
			return nil
		}
	}
	m, err := parseMessage(payload)
	if err != nil {
		return nil
	}
	var cc byte
	var data []byte
	switch c, ok := commands[[2]byte{m.netFn, m.cmd}]; {
	case !ok:
		cc = ccInvalidCommand
	case c.priv > s.currentPriv(b):
		cc = ccInsufficientPriv
	default:
		cc, data = c.run(b, s, m.data)
	}
	reply := m.reply(cc, data)
	b.mu.Lock()
	s.outSeq++
	seq := s.outSeq
	b.mu.Unlock()
	if p.encrypted {
		reply = encrypt(k2, reply)
	}
	return rmcpPacket(payloadIPMI, s.console, seq, reply, p.encrypted, func(signed []byte) []byte {
		return s.suite.hmac(s.k1, signed)[:s.suite.macLen]
	})
}

func (s *session) currentPriv(b *BMC) byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.priv
}

// afterReply runs fn once the current answer has had time to leave (a
// reset or a session close must not eat its own reply).
func (b *BMC) afterReply(fn func()) {
	b.background(func(ctx context.Context) {
		select {
		case <-time.After(50 * time.Millisecond):
			fn()
		case <-ctx.Done():
		}
	})
}

// background runs work that outlives the request (a soft shutdown) and
// is waited for by Close.
func (b *BMC) background(fn func(ctx context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
}

func (b *BMC) markPowerOnByIPMI() {
	b.mu.Lock()
	b.lastOnByIPMI = true
	b.mu.Unlock()
}

func (b *BMC) lastOnByIPMIFlag() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastOnByIPMI
}
