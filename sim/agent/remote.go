package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"sigs.k8s.io/cluster-api/util/certs"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// The hardware channel: an agent running in another process (its own
// binary, or a VM's init) reaches its host's hardware model and its
// workload cluster through these HTTP calls, which the lab process serves
// with the same in-process Machine and Workload the embedded agent uses.
// Each call is POST /hw/{call} with a JSON body, declared once as an
// hwCall with its request and reply types, which the server's handler
// table and the Remote's methods share; events stream from GET
// /hw/events as JSON lines.

// HardwareServer serves one host's Machine and the run's Workload.
type HardwareServer struct {
	machine   Machine
	workload  Workload
	subscribe func() (<-chan lab.Event, func())
}

// NewHardwareServer wraps what the embedded agent would be given.
func NewHardwareServer(m Machine, w Workload, subscribe func() (<-chan lab.Event, func())) *HardwareServer {
	return &HardwareServer{machine: m, workload: w, subscribe: subscribe}
}

// wire types of the calls
type (
	hwWrite struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
	}
	hwActivate struct {
		Root  disk.RootID `json:"root"`
		Tries int         `json:"tries"`
	}
	hwEtc struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	hwPersistent struct {
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	hwRecord struct {
		Kind    lab.EventKind     `json:"kind"`
		Reason  string            `json:"reason"`
		Message string            `json:"message"`
		Data    map[string]string `json:"data"`
	}
	hwJoin struct {
		Cluster, Node     string
		Release           workload.Release
		Args              workload.StaticPodArgs
		ClusterCA, EtcdCA pemCA
	}
	hwInit struct {
		Cluster, ClusterConfiguration string
		Release                       workload.Release
	}
	hwSetNode struct {
		Cluster string
		Node    workload.NodeInfo
	}
	hwNode     struct{ Cluster, Name string }
	hwNotReady struct{ Cluster, Name, Reason string }
	hwReady    struct {
		Ready   bool
		Message string
	}
	hwEndpoint struct {
		Cluster string
		Found   bool
	}
	pemCA struct{ Cert, Key []byte }
)

func toPEM(ca workload.CA) pemCA {
	return pemCA{Cert: certs.EncodeCertPEM(ca.Cert), Key: certs.EncodePrivateKeyPEM(ca.Key)}
}

func (p pemCA) ca() (workload.CA, error) {
	return workload.CAFromSecretData(map[string][]byte{"tls.crt": p.Cert, "tls.key": p.Key})
}

// ServeHTTP implements http.Handler.
func (s *HardwareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := strings.TrimPrefix(r.URL.Path, "/hw/")
	if call == "events" && r.Method == http.MethodGet {
		s.events(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	handler, ok := hwHandlers[call]
	if !ok {
		http.Error(w, fmt.Sprintf("unknown hardware call %q", call), http.StatusNotFound)
		return
	}
	result, err := handler(r.Context(), s, r.Body)
	if err != nil {
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(result)
}

// none is the request or reply of a call that carries none.
type none struct{}

// hwCall is one call of the hardware channel: its name (POST /hw/NAME)
// and, as type parameters, its request and reply. The server's handlers
// and the Remote's methods both go through one, so they cannot disagree
// on a call's name or the shape of what it carries.
type hwCall[In, Out any] struct{ name string }

// The calls, Machine's then Workload's.
var (
	callName             = hwCall[none, string]{"name"}
	callStatus           = hwCall[none, lab.HostStatus]{"status"}
	callUserData         = hwCall[none, []byte]{"userdata"}
	callInventory        = hwCall[none, lab.Inventory]{"inventory"}
	callPersistent       = hwCall[none, map[string]string]{"persistent"}
	callSetPersistent    = hwCall[hwPersistent, none]{"set-persistent"}
	callCommit           = hwCall[none, none]{"commit"}
	callRollback         = hwCall[none, none]{"rollback"}
	callEtc              = hwCall[none, map[string]string]{"etc"}
	callWriteEtc         = hwCall[hwEtc, none]{"write-etc"}
	callRecoveryBoot     = hwCall[none, none]{"recovery-boot"}
	callReboot           = hwCall[none, none]{"reboot"}
	callShutdown         = hwCall[none, none]{"shutdown"}
	callWipe             = hwCall[none, none]{"wipe"}
	callErase            = hwCall[none, none]{"erase"}
	callWriteConfigDrive = hwCall[agentv1.ConfigDrive, none]{"write-configdrive"}
	callMetaData         = hwCall[none, map[string]string]{"metadata"}
	callWrite            = hwCall[hwWrite, disk.RootID]{"write"}
	callActivate         = hwCall[hwActivate, none]{"activate"}
	callRecord           = hwCall[hwRecord, none]{"record"}

	callByEndpoint           = hwCall[string, hwEndpoint]{"by-endpoint"}
	callJoinControlPlane     = hwCall[hwJoin, none]{"join-control-plane"}
	callInitObjects          = hwCall[hwInit, none]{"init-objects"}
	callSetNode              = hwCall[hwSetNode, none]{"set-node"}
	callSetNodeNotReady      = hwCall[hwNotReady, none]{"set-node-not-ready"}
	callStopNode             = hwCall[hwNode, none]{"stop-node"}
	callMemberDataLost       = hwCall[hwNode, none]{"member-data-lost"}
	callClusterConfiguration = hwCall[string, string]{"cluster-configuration"}
	callNodeReady            = hwCall[hwNode, hwReady]{"node-ready"}
)

// hwHandler serves one call: it decodes the request from body and
// returns the reply to encode.
type hwHandler func(ctx context.Context, s *HardwareServer, body io.Reader) (any, error)

// namedHandler is a call's name and its handler.
type namedHandler struct {
	name string
	fn   hwHandler
}

// handle makes c's handler from fn, which gets the decoded request.
func handle[In, Out any](c hwCall[In, Out], fn func(ctx context.Context, s *HardwareServer, in In) (Out, error)) namedHandler {
	return namedHandler{c.name, func(ctx context.Context, s *HardwareServer, body io.Reader) (any, error) {
		var in In
		if err := json.NewDecoder(io.LimitReader(body, 4<<20)).Decode(&in); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		return fn(ctx, s, in)
	}}
}

// do is a handler body for a call that returns only an error.
func do(err error) (none, error) { return none{}, err }

// hwHandlers serve the calls, by name.
var hwHandlers = handlers(
	handle(callName, func(_ context.Context, s *HardwareServer, _ none) (string, error) { return s.machine.Name(), nil }),
	handle(callStatus, func(_ context.Context, s *HardwareServer, _ none) (lab.HostStatus, error) {
		return s.machine.Status(), nil
	}),
	handle(callUserData, func(_ context.Context, s *HardwareServer, _ none) ([]byte, error) { return s.machine.UserData(), nil }),
	handle(callInventory, func(_ context.Context, s *HardwareServer, _ none) (lab.Inventory, error) {
		return s.machine.Inventory(), nil
	}),
	handle(callPersistent, func(_ context.Context, s *HardwareServer, _ none) (map[string]string, error) {
		return s.machine.Persistent(), nil
	}),
	handle(callSetPersistent, func(_ context.Context, s *HardwareServer, a hwPersistent) (none, error) {
		return do(s.machine.SetPersistent(a.Name, a.Content))
	}),
	handle(callCommit, func(_ context.Context, s *HardwareServer, _ none) (none, error) { return do(s.machine.Commit()) }),
	handle(callRollback, func(_ context.Context, s *HardwareServer, _ none) (none, error) { return do(s.machine.Rollback()) }),
	handle(callEtc, func(_ context.Context, s *HardwareServer, _ none) (map[string]string, error) {
		return s.machine.Etc(), nil
	}),
	handle(callWriteEtc, func(_ context.Context, s *HardwareServer, a hwEtc) (none, error) {
		return do(s.machine.WriteEtc(a.Path, a.Content))
	}),
	handle(callRecoveryBoot, func(_ context.Context, s *HardwareServer, _ none) (none, error) {
		return do(s.machine.RequestRecoveryBoot())
	}),
	handle(callReboot, func(ctx context.Context, s *HardwareServer, _ none) (none, error) { return do(s.machine.Reboot(ctx)) }),
	handle(callShutdown, func(ctx context.Context, s *HardwareServer, _ none) (none, error) { return do(s.machine.Shutdown(ctx)) }),
	handle(callWipe, func(_ context.Context, s *HardwareServer, _ none) (none, error) { return do(s.machine.WipeData()) }),
	handle(callErase, func(_ context.Context, s *HardwareServer, _ none) (none, error) { return do(s.machine.EraseDisk()) }),
	handle(callWriteConfigDrive, func(_ context.Context, s *HardwareServer, d agentv1.ConfigDrive) (none, error) {
		return do(s.machine.WriteConfigDrive(d.UserData, d.MetaData))
	}),
	handle(callMetaData, func(_ context.Context, s *HardwareServer, _ none) (map[string]string, error) {
		return s.machine.MetaData(), nil
	}),
	handle(callWrite, func(ctx context.Context, s *HardwareServer, a hwWrite) (disk.RootID, error) {
		return s.machine.WriteImage(ctx, a.URL, a.SHA256)
	}),
	handle(callActivate, func(_ context.Context, s *HardwareServer, a hwActivate) (none, error) {
		return do(s.machine.Activate(a.Root, a.Tries))
	}),
	handle(callRecord, func(_ context.Context, s *HardwareServer, a hwRecord) (none, error) {
		s.machine.Record(a.Kind, a.Reason, a.Message, a.Data)
		return none{}, nil
	}),
	handle(callByEndpoint, func(_ context.Context, s *HardwareServer, hostPort string) (hwEndpoint, error) {
		name, ok := s.workload.ByEndpoint(hostPort)
		return hwEndpoint{Cluster: name, Found: ok}, nil
	}),
	handle(callJoinControlPlane, joinControlPlane),
	handle(callInitObjects, func(ctx context.Context, s *HardwareServer, a hwInit) (none, error) {
		return do(s.workload.InitObjects(ctx, a.Cluster, a.Release, a.ClusterConfiguration))
	}),
	handle(callSetNode, func(ctx context.Context, s *HardwareServer, a hwSetNode) (none, error) {
		return do(s.workload.SetNode(ctx, a.Cluster, a.Node))
	}),
	handle(callSetNodeNotReady, func(ctx context.Context, s *HardwareServer, a hwNotReady) (none, error) {
		return do(s.workload.SetNodeNotReady(ctx, a.Cluster, a.Name, a.Reason))
	}),
	handle(callStopNode, func(ctx context.Context, s *HardwareServer, a hwNode) (none, error) {
		return do(s.workload.StopNode(ctx, a.Cluster, a.Name))
	}),
	handle(callMemberDataLost, func(ctx context.Context, s *HardwareServer, a hwNode) (none, error) {
		return do(s.workload.MemberDataLost(ctx, a.Cluster, a.Name))
	}),
	handle(callClusterConfiguration, func(ctx context.Context, s *HardwareServer, cluster string) (string, error) {
		return s.workload.ClusterConfiguration(ctx, cluster)
	}),
	handle(callNodeReady, func(ctx context.Context, s *HardwareServer, a hwNode) (hwReady, error) {
		ready, msg, err := s.workload.NodeReady(ctx, a.Cluster, a.Name)
		return hwReady{Ready: ready, Message: msg}, err
	}),
)

// handlers indexes handlers by their calls' names.
func handlers(named ...namedHandler) map[string]hwHandler {
	out := map[string]hwHandler{}
	for _, h := range named {
		out[h.name] = h.fn
	}
	return out
}

// joinControlPlane joins a node to a workload cluster with the cluster's
// and etcd's CAs, which travel as PEM.
func joinControlPlane(ctx context.Context, s *HardwareServer, a hwJoin) (none, error) {
	cca, err := a.ClusterCA.ca()
	if err != nil {
		return none{}, err
	}
	eca, err := a.EtcdCA.ca()
	if err != nil {
		return none{}, err
	}
	return do(s.workload.JoinControlPlane(ctx, a.Cluster, a.Node, a.Release, a.Args, cca, eca))
}

// events streams this host's lab events as JSON lines until the client goes.
func (s *HardwareServer) events(w http.ResponseWriter, r *http.Request) {
	events, cancel := s.subscribe()
	defer cancel()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	name := s.machine.Name()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Host != name {
				continue
			}
			if enc.Encode(e) != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// Remote is the client side: a Machine and a Workload over the channel.
type Remote struct {
	base   string
	client *http.Client
	name   string
}

var (
	_ Machine  = (*Remote)(nil)
	_ Workload = (*Remote)(nil)
)

// Dial connects to a HardwareServer at base (https://host:port).
func Dial(ctx context.Context, base string, client *http.Client) (*Remote, error) {
	r := &Remote{base: strings.TrimSuffix(base, "/"), client: client}
	name, err := invoke(ctx, r, callName, none{})
	if err != nil {
		return nil, fmt.Errorf("hardware channel %s: %w", base, err)
	}
	r.name = name
	return r, nil
}

var errRemote = errors.New("hardware call failed")

// invoke makes call c with in and returns its reply.
func invoke[In, Out any](ctx context.Context, r *Remote, c hwCall[In, Out], in In) (Out, error) {
	var out Out
	err := r.post(ctx, c.name, in, &out)
	return out, err
}

// post sends in to call and decodes the reply into out.
func (r *Remote) post(ctx context.Context, call string, in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	body := bytes.NewReader(data)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/hw/"+call, body)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%w: %s: %s", errRemote, call, e.Error)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Events streams the host's lab events until ctx ends.
func (r *Remote) Events(ctx context.Context) (<-chan lab.Event, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/hw/events", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	out := make(chan lab.Event)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e lab.Event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (r *Remote) bg() context.Context { return context.Background() }

// value is a call's reply, or its zero value when the call failed (the
// Machine methods without an error return).
func value[Out any](out Out, _ error) Out { return out }

// failed is a call's error alone.
func failed[Out any](_ Out, err error) error { return err }

// Name implements Machine.
func (r *Remote) Name() string { return r.name }

// Status implements Machine.
func (r *Remote) Status() lab.HostStatus { return value(invoke(r.bg(), r, callStatus, none{})) }

// Inventory implements Machine.
func (r *Remote) Inventory() lab.Inventory { return value(invoke(r.bg(), r, callInventory, none{})) }

// UserData implements Machine.
func (r *Remote) UserData() []byte { return value(invoke(r.bg(), r, callUserData, none{})) }

// WriteImage implements Machine.
func (r *Remote) WriteImage(ctx context.Context, url, sha256 string) (disk.RootID, error) {
	return invoke(ctx, r, callWrite, hwWrite{URL: url, SHA256: sha256})
}

// Activate implements Machine.
func (r *Remote) Activate(root disk.RootID, tries int) error {
	return failed(invoke(r.bg(), r, callActivate, hwActivate{Root: root, Tries: tries}))
}

// Commit implements Machine.
func (r *Remote) Commit() error { return failed(invoke(r.bg(), r, callCommit, none{})) }

// Rollback implements Machine.
func (r *Remote) Rollback() error { return failed(invoke(r.bg(), r, callRollback, none{})) }

// Etc implements Machine.
func (r *Remote) Etc() map[string]string { return orEmpty(value(invoke(r.bg(), r, callEtc, none{}))) }

// WriteEtc implements Machine.
func (r *Remote) WriteEtc(path, content string) error {
	return failed(invoke(r.bg(), r, callWriteEtc, hwEtc{Path: path, Content: content}))
}

// RequestRecoveryBoot implements Machine.
func (r *Remote) RequestRecoveryBoot() error {
	return failed(invoke(r.bg(), r, callRecoveryBoot, none{}))
}

// Reboot implements Machine.
func (r *Remote) Reboot(ctx context.Context) error { return failed(invoke(ctx, r, callReboot, none{})) }

// Shutdown implements Machine.
func (r *Remote) Shutdown(ctx context.Context) error {
	return failed(invoke(ctx, r, callShutdown, none{}))
}

// WipeData implements Machine.
func (r *Remote) WipeData() error { return failed(invoke(r.bg(), r, callWipe, none{})) }

// EraseDisk implements Machine.
func (r *Remote) EraseDisk() error { return failed(invoke(r.bg(), r, callErase, none{})) }

// WriteConfigDrive implements Machine.
func (r *Remote) WriteConfigDrive(userData []byte, metaData map[string]string) error {
	return failed(invoke(r.bg(), r, callWriteConfigDrive, agentv1.ConfigDrive{UserData: userData, MetaData: metaData}))
}

// MetaData implements Machine.
func (r *Remote) MetaData() map[string]string {
	return orEmpty(value(invoke(r.bg(), r, callMetaData, none{})))
}

// SetPersistent implements Machine.
func (r *Remote) SetPersistent(name, content string) error {
	return failed(invoke(r.bg(), r, callSetPersistent, hwPersistent{Name: name, Content: content}))
}

// Persistent implements Machine.
func (r *Remote) Persistent() map[string]string {
	return orEmpty(value(invoke(r.bg(), r, callPersistent, none{})))
}

// Record implements Machine.
func (r *Remote) Record(kind lab.EventKind, reason, message string, data map[string]string) {
	_, _ = invoke(r.bg(), r, callRecord, hwRecord{Kind: kind, Reason: reason, Message: message, Data: data})
}

// ByEndpoint implements Workload.
func (r *Remote) ByEndpoint(hostPort string) (string, bool) {
	e, err := invoke(r.bg(), r, callByEndpoint, hostPort)
	return e.Cluster, err == nil && e.Found
}

// JoinControlPlane implements Workload.
func (r *Remote) JoinControlPlane(ctx context.Context, cluster, node string, rel workload.Release, args workload.StaticPodArgs, clusterCA, etcdCA workload.CA) error {
	return failed(invoke(ctx, r, callJoinControlPlane, hwJoin{Cluster: cluster, Node: node, Release: rel, Args: args, ClusterCA: toPEM(clusterCA), EtcdCA: toPEM(etcdCA)}))
}

// InitObjects implements Workload.
func (r *Remote) InitObjects(ctx context.Context, cluster string, rel workload.Release, clusterConfiguration string) error {
	return failed(invoke(ctx, r, callInitObjects, hwInit{Cluster: cluster, Release: rel, ClusterConfiguration: clusterConfiguration}))
}

// SetNode implements Workload.
func (r *Remote) SetNode(ctx context.Context, cluster string, n workload.NodeInfo) error {
	return failed(invoke(ctx, r, callSetNode, hwSetNode{Cluster: cluster, Node: n}))
}

// SetNodeNotReady implements Workload.
func (r *Remote) SetNodeNotReady(ctx context.Context, cluster, name, reason string) error {
	return failed(invoke(ctx, r, callSetNodeNotReady, hwNotReady{Cluster: cluster, Name: name, Reason: reason}))
}

// NodeReady implements Workload.
func (r *Remote) NodeReady(ctx context.Context, cluster, name string) (bool, string, error) {
	res, err := invoke(ctx, r, callNodeReady, hwNode{Cluster: cluster, Name: name})
	return res.Ready, res.Message, err
}

// StopNode implements Workload.
func (r *Remote) StopNode(ctx context.Context, cluster, node string) error {
	return failed(invoke(ctx, r, callStopNode, hwNode{Cluster: cluster, Name: node}))
}

// MemberDataLost implements Workload.
func (r *Remote) MemberDataLost(ctx context.Context, cluster, node string) error {
	return failed(invoke(ctx, r, callMemberDataLost, hwNode{Cluster: cluster, Name: node}))
}

// ClusterConfiguration implements Workload.
func (r *Remote) ClusterConfiguration(ctx context.Context, cluster string) (string, error) {
	return invoke(ctx, r, callClusterConfiguration, cluster)
}

// orEmpty is m, or an empty map for nil, as the in-process Machine
// returns.
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
