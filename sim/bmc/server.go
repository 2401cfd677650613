package bmc

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/queue"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// Config is one BMC.
type Config struct {
	Host               *lab.Host
	Username, Password string
	Certificate        tls.Certificate
	// Addr to listen on; default a loopback port (package loopback).
	Addr      string
	Scale     timescale.Scale
	NVMImages nic.Catalog
	// BIOSVersion and BMCVersion are the firmware the server ships with.
	BIOSVersion, BMCVersion string
	// BMCUpdateSeconds is the modelled time the BMC is unreachable while
	// its own firmware applies.
	BMCUpdateSeconds float64
	// OnReboot is told when this BMC reboots itself (Manager.Reset, its
	// own firmware update), with the time it is down, so its other
	// services (IPMI) go down with it.
	OnReboot func(down time.Duration)
}

// Faults are injected per BMC at run time.
type Faults struct {
	// Latency is added to every request.
	Latency time.Duration
	// ErrorRate is the share of requests (0..1) answered 503.
	ErrorRate float64
}

// BMC is a running Redfish service for one host.
type BMC struct {
	cfg  Config
	host *lab.Host
	addr string

	mu       sync.Mutex
	srv      *http.Server
	faults   Faults
	sessions map[string]session // by token
	nextID   int
	tasks    map[string]*task
	bios     string
	bmcFW    string
	staged   []*task // OnReset updates waiting for the next reset
	closed   bool
	// events go to the EventService's SSE clients (events.go).
	events      queue.Fanout[eventRecord]
	nextEventID int
	stopEvents  func()
}

type session struct {
	ID       string
	Username string
	Created  time.Time
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*BMC, error) {
	if cfg.Host == nil || cfg.Username == "" || cfg.Password == "" {
		return nil, errors.New("bmc: a host and credentials are required")
	}
	if cfg.Addr == "" {
		// An offline BMC binds its address again when it comes back.
		addr, err := loopback.Addr()
		if err != nil {
			return nil, err
		}
		cfg.Addr = addr
	}
	if cfg.BMCUpdateSeconds == 0 {
		cfg.BMCUpdateSeconds = 180
	}
	b := &BMC{cfg: cfg, host: cfg.Host, sessions: map[string]session{}, tasks: map[string]*task{},
		bios: cfg.BIOSVersion, bmcFW: cfg.BMCVersion}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("bmc %s: %w", cfg.Host.Name(), err)
	}
	// The address is fixed for the BMC's life: an unreachable period
	// listens again on the same one.
	b.addr = l.Addr().String()
	b.serve(l)
	events, stop := b.host.Subscribe()
	b.stopEvents = stop
	go b.forwardHostEvents(events)
	return b, nil
}

func (b *BMC) serve(l net.Listener) {
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{b.cfg.Certificate}, MinVersion: tls.VersionTLS12})
	// Plain HTTP to this port gets a TLS alert, never a page.
	// Requests' contexts end when the server shuts down, so an event
	// stream does not hold up an unreachable period or Close.
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: b.routes(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	srv.RegisterOnShutdown(cancel)
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	go srv.Serve(tl)
}

// Endpoint is the service's base URL, e.g. https://127.0.0.1:PORT.
func (b *BMC) Endpoint() string { return "https://" + b.addr }

// SystemURL is the host's ComputerSystem, as a BareMetalHost's bmc.address
// names it.
func (b *BMC) SystemURL() string { return b.Endpoint() + systemsPath + b.host.Name() }

// SetFaults replaces the injected faults.
func (b *BMC) SetFaults(f Faults) {
	b.mu.Lock()
	b.faults = f
	b.mu.Unlock()
}

// Unreachable closes the endpoint for d (real time), as a BMC rebooting
// into new firmware does, then opens it again on the same address.
func (b *BMC) Unreachable(d time.Duration) {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	srv.Shutdown(ctx)
	cancel()
	time.AfterFunc(d, func() {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return
		}
		if l, err := net.Listen("tcp", b.addr); err == nil {
			b.serve(l)
		}
	})
}

// reboot is the BMC rebooting itself: every service it has is down for d.
func (b *BMC) reboot(d time.Duration) {
	if b.cfg.OnReboot != nil {
		b.cfg.OnReboot(d)
	}
	b.Unreachable(d)
}

// Close stops the service.
func (b *BMC) Close() error {
	b.mu.Lock()
	b.closed = true
	srv, stop := b.srv, b.stopEvents
	b.mu.Unlock()
	if stop != nil {
		stop()
	}
	b.events.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// withFaults applies injected latency and errors before any handler.
func (b *BMC) withFaults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		f := b.faults
		b.mu.Unlock()
		if f.Latency > 0 {
			select {
			case <-time.After(f.Latency):
			case <-r.Context().Done():
				return
			}
		}
		if f.ErrorRate > 0 && rand.Float64() < f.ErrorRate {
			writeError(w, http.StatusServiceUnavailable, msgServiceUnavailable, "The service is temporarily unavailable (injected fault).", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withAuth lets through the service root and session login unauthenticated,
// as Redfish requires, and everything else with valid Basic credentials or
// an X-Auth-Token of a live session.
func (b *BMC) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		if path == "/redfish" || path == "/redfish/v1" || path == "/redfish/v1/odata" ||
			(r.Method == http.MethodPost && path == sessionsPath[:len(sessionsPath)-1]) {
			next.ServeHTTP(w, r)
			return
		}
		if token := r.Header.Get("X-Auth-Token"); token != "" {
			b.mu.Lock()
			_, ok := b.sessions[token]
			b.mu.Unlock()
			if ok {
				next.ServeHTTP(w, r)
				return
			}
		} else if user, pass, ok := r.BasicAuth(); ok && b.credentialsMatch(user, pass) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="upgradelab BMC"`)
		writeError(w, http.StatusUnauthorized, msgNoValidSession, "There is no valid session established with the implementation.", "")
	})
}

func (b *BMC) credentialsMatch(user, pass string) bool {
	u := subtle.ConstantTimeCompare([]byte(user), []byte(b.cfg.Username))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(b.cfg.Password))
	return u&p == 1
}

// decode reads a JSON body into v, refusing malformed JSON and properties
// the resource does not have, with the Redfish messages for each.
//
// OData annotations (@odata.type and the like) are dropped first, at any
// depth: clients send them (sushy types its @Redfish.SettingsApplyTime)
// and the Redfish specification has services ignore them in requests.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		var generic any
		if json.Unmarshal(raw, &generic) == nil {
			raw, _ = json.Marshal(dropODataAnnotations(generic))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if field, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			prop := strings.Trim(field, `"`)
			writeError(w, http.StatusBadRequest, msgPropertyUnknown, fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", prop), prop)
			return false
		}
		writeError(w, http.StatusBadRequest, msgMalformedJSON, "The request body submitted was malformed JSON and could not be parsed: "+msg, "")
		return false
	}
	return true
}

// dropODataAnnotations removes every "@odata.*" key.
func dropODataAnnotations(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.HasPrefix(k, "@odata.") {
				delete(x, k)
				continue
			}
			x[k] = dropODataAnnotations(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropODataAnnotations(e)
		}
	}
	return v
}

// decodeStrict reads JSON into v, refusing unknown properties (for JSON
// that is not the request body, such as a multipart part).
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func odataID(path string) map[string]string { return map[string]string{"@odata.id": path} }

// odataIDs is a list of links.
func odataIDs(paths []string) []map[string]string {
	out := make([]map[string]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, odataID(p))
	}
	return out
}
