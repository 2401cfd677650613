package ipa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Host is what the agent acts on (a *lab.Host).
type Host interface {
	Name() string
	Inventory() lab.Inventory
	EraseDisk() error
	WriteImage(ctx context.Context, url, wantSHA256 string) (disk.RootID, error)
	WriteConfigDrive(userData []byte, metaData map[string]string) error
	Activate(root disk.RootID, tries int) error
	// Shutdown is the OS's own poweroff.
	Shutdown(ctx context.Context) error
}

// Params are what Ironic's kernel command line tells the agent.
type Params struct {
	APIURL, Token string
	// InspectionURL is inspector's callback (ipa-inspection-callback-url):
	// the boot is an inspection, reported there before anything else.
	InspectionURL string
	// Collectors are ipa-inspection-collectors.
	Collectors []string
}

// ParseKernelArgs reads ipa-api-url, ipa-agent-token and the inspection
// parameters from a kernel command line; ok is false when it names
// neither Ironic's API nor an inspection callback.
func ParseKernelArgs(args string) (p Params, ok bool) {
	var named string
	for _, f := range strings.Fields(args) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "ipa-api-url":
			p.APIURL = strings.TrimRight(v, "/")
		case "ipa-agent-token":
			p.Token = v
		case "ipa-inspection-callback-url":
			p.InspectionURL = v
		case "ipa-inspection-collectors":
			named = v
		}
	}
	p.Collectors = collectors(named)
	return p, p.APIURL != "" || p.InspectionURL != ""
}

// Recorder records what the agent does in the host's history.
type Recorder func(reason, message string)

// Agent is one boot's agent.
type Agent struct {
	host   Host
	params Params
	record Recorder
	client *http.Client

	node, callback string
	interval       time.Duration
	beat           chan struct{}
	// ctx ends with the boot: commands still running stop with it.
	ctx context.Context

	mu       sync.Mutex
	commands []*Result
	root     disk.RootID
}

// minHeartbeat keeps a tiny heartbeat timeout from spinning.
const minHeartbeat = time.Second

// Run runs the agent for one boot: on an inspection boot it first posts
// the host's inventory to inspector; then, when the command line names
// Ironic's API, it serves the command API, looks its node up and
// heartbeats until alive says the boot is over or ctx ends. An
// inspection-only boot does nothing more (the ramdisk idles until Ironic
// powers the host off).
func Run(ctx context.Context, host Host, p Params, record Recorder, alive func() bool) {
	a := &Agent{host: host, params: p, record: record, client: &http.Client{Timeout: 30 * time.Second}, beat: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.ctx = ctx
	go func() { // the boot ends: so does everything of it
		for alive() && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
	}()
	if p.InspectionURL != "" {
		a.inspect(ctx)
	}
	if p.APIURL == "" || !a.lookup(ctx) {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		record("IronicAgentFailed", err.Error())
		return
	}
	srv := &http.Server{Handler: a.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	a.callback = "http://" + ln.Addr().String()
	record("IronicAgentRunning", fmt.Sprintf("node %s, commands at %s, heartbeating to %s", a.node, a.callback, p.APIURL))
	a.heartbeats(ctx)
}

// lookup finds the node by the host's MACs, retrying while Ironic does
// not yet wait for an agent (404) or cannot be reached.
func (a *Agent) lookup(ctx context.Context) bool {
	var macs []string
	for _, n := range a.host.Inventory().NICs {
		macs = append(macs, n.MAC)
	}
	u := a.params.APIURL + "/v1/lookup?addresses=" + url.QueryEscape(strings.Join(macs, ","))
	for failures := 0; ; failures++ {
		var ans lookupAnswer
		err := a.call(ctx, http.MethodGet, u, lookupVersion, nil, &ans)
		if err == nil {
			a.node = ans.Node.UUID
			a.interval = max(time.Duration(ans.Config.HeartbeatTimeout*0.45*float64(time.Second)), minHeartbeat)
			if ans.Config.AgentToken != nil && *ans.Config.AgentToken != "******" && a.params.Token == "" {
				a.params.Token = *ans.Config.AgentToken
			}
			return true
		}
		if failures%20 == 0 {
			a.record("IronicLookupFailed", err.Error())
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// heartbeats posts a heartbeat at once, whenever a command finishes and
// every interval.
func (a *Agent) heartbeats(ctx context.Context) {
	failures := 0
	for {
		err := a.call(ctx, http.MethodPost, a.params.APIURL+"/v1/heartbeat/"+a.node, heartbeatVersion,
			heartbeat{CallbackURL: a.callback, AgentToken: a.params.Token, AgentVersion: Version}, nil)
		if err != nil && ctx.Err() == nil {
			if failures%20 == 0 {
				a.record("IronicHeartbeatFailed", err.Error())
			}
			failures++
		}
		select {
		case <-ctx.Done():
			return
		case <-a.beat:
		case <-time.After(a.interval):
		}
	}
}

// heartbeatSoon asks for a heartbeat now (a command finished).
func (a *Agent) heartbeatSoon() {
	select {
	case a.beat <- struct{}{}:
	default:
	}
}

// call sends body (nil: none) with Ironic's version header and decodes
// the answer into out (nil: discarded).
func (a *Agent) call(ctx context.Context, method, u, version string, body, out any) error {
	req, err := jsonhttp.NewRequest(ctx, method, u, body)
	if err != nil {
		return err
	}
	if version != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return &httpError{what: method + " " + u, status: resp.Status, body: string(bytes.TrimSpace(data))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// httpError is an answer of status 300 or more.
type httpError struct{ what, status, body string }

func (e *httpError) Error() string { return e.what + ": " + e.status + ": " + e.body }
