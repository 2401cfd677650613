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
// Each call is POST /hw/{call} with a JSON body; events stream from
// GET /hw/events as JSON lines.

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
	result, err := s.call(r.Context(), call, r.Body)
	if err != nil {
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(result)
}

func decodeInto(body io.Reader, v any) error {
	return json.NewDecoder(io.LimitReader(body, 4<<20)).Decode(v)
}

func (s *HardwareServer) call(ctx context.Context, call string, body io.Reader) (any, error) {
	m, wl := s.machine, s.workload
	switch call {
	case "name":
		return m.Name(), nil
	case "status":
		return m.Status(), nil
	case "userdata":
		return m.UserData(), nil
	case "inventory":
		return m.Inventory(), nil
	case "persistent":
		return m.Persistent(), nil
	case "commit":
		return nil, m.Commit()
	case "rollback":
		return nil, m.Rollback()
	case "etc":
		return m.Etc(), nil
	case "write-etc":
		var a hwEtc
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, m.WriteEtc(a.Path, a.Content)
	case "recovery-boot":
		return nil, m.RequestRecoveryBoot()
	case "reboot":
		return nil, m.Reboot(ctx)
	case "wipe":
		return nil, m.WipeData()
	case "erase":
		return nil, m.EraseDisk()
	case "write-configdrive":
		var d agentv1.ConfigDrive
		if err := decodeInto(body, &d); err != nil {
			return nil, err
		}
		return nil, m.WriteConfigDrive(d.UserData, d.MetaData)
	case "metadata":
		return m.MetaData(), nil
	case "write":
		var a hwWrite
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return m.WriteImage(ctx, a.URL, a.SHA256)
	case "activate":
		var a hwActivate
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, m.Activate(a.Root, a.Tries)
	case "set-persistent":
		var a hwPersistent
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, m.SetPersistent(a.Name, a.Content)
	case "record":
		var a hwRecord
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		m.Record(a.Kind, a.Reason, a.Message, a.Data)
		return nil, nil
	case "by-endpoint":
		var hostPort string
		if err := decodeInto(body, &hostPort); err != nil {
			return nil, err
		}
		name, ok := wl.ByEndpoint(hostPort)
		return hwEndpoint{Cluster: name, Found: ok}, nil
	case "join-control-plane":
		var a hwJoin
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		cca, err := a.ClusterCA.ca()
		if err != nil {
			return nil, err
		}
		eca, err := a.EtcdCA.ca()
		if err != nil {
			return nil, err
		}
		return nil, wl.JoinControlPlane(ctx, a.Cluster, a.Node, a.Release, cca, eca)
	case "init-objects":
		var a hwInit
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, wl.InitObjects(ctx, a.Cluster, a.Release, a.ClusterConfiguration)
	case "set-node":
		var a hwSetNode
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, wl.SetNode(ctx, a.Cluster, a.Node)
	case "set-node-not-ready":
		var a hwNotReady
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, wl.SetNodeNotReady(ctx, a.Cluster, a.Name, a.Reason)
	case "stop-node":
		var a hwNode
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, wl.StopNode(ctx, a.Cluster, a.Name)
	case "member-data-lost":
		var a hwNode
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		return nil, wl.MemberDataLost(ctx, a.Cluster, a.Name)
	case "cluster-configuration":
		var cluster string
		if err := decodeInto(body, &cluster); err != nil {
			return nil, err
		}
		return wl.ClusterConfiguration(ctx, cluster)
	case "node-ready":
		var a hwNode
		if err := decodeInto(body, &a); err != nil {
			return nil, err
		}
		ready, msg, err := wl.NodeReady(ctx, a.Cluster, a.Name)
		return hwReady{Ready: ready, Message: msg}, err
	}
	return nil, fmt.Errorf("unknown hardware call %q", call)
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
	if err := r.do(ctx, "name", nil, &r.name); err != nil {
		return nil, fmt.Errorf("hardware channel %s: %w", base, err)
	}
	return r, nil
}

var errRemote = errors.New("hardware call failed")

func (r *Remote) do(ctx context.Context, call string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
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
	if out == nil {
		return nil
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

// Name implements Machine.
func (r *Remote) Name() string { return r.name }

// Status implements Machine.
func (r *Remote) Status() lab.HostStatus {
	var s lab.HostStatus
	_ = r.do(r.bg(), "status", nil, &s)
	return s
}

// Inventory implements Machine.
func (r *Remote) Inventory() lab.Inventory {
	var inv lab.Inventory
	_ = r.do(r.bg(), "inventory", nil, &inv)
	return inv
}

// UserData implements Machine.
func (r *Remote) UserData() []byte {
	var d []byte
	_ = r.do(r.bg(), "userdata", nil, &d)
	return d
}

// WriteImage implements Machine.
func (r *Remote) WriteImage(ctx context.Context, url, sha256 string) (disk.RootID, error) {
	var root disk.RootID
	err := r.do(ctx, "write", hwWrite{URL: url, SHA256: sha256}, &root)
	return root, err
}

// Activate implements Machine.
func (r *Remote) Activate(root disk.RootID, tries int) error {
	return r.do(r.bg(), "activate", hwActivate{Root: root, Tries: tries}, nil)
}

// Commit implements Machine.
func (r *Remote) Commit() error { return r.do(r.bg(), "commit", nil, nil) }

// Rollback implements Machine.
func (r *Remote) Rollback() error { return r.do(r.bg(), "rollback", nil, nil) }

// Etc implements Machine.
func (r *Remote) Etc() map[string]string {
	etc := map[string]string{}
	_ = r.do(r.bg(), "etc", nil, &etc)
	return etc
}

// WriteEtc implements Machine.
func (r *Remote) WriteEtc(path, content string) error {
	return r.do(r.bg(), "write-etc", hwEtc{Path: path, Content: content}, nil)
}

// RequestRecoveryBoot implements Machine.
func (r *Remote) RequestRecoveryBoot() error { return r.do(r.bg(), "recovery-boot", nil, nil) }

// Reboot implements Machine.
func (r *Remote) Reboot(ctx context.Context) error { return r.do(ctx, "reboot", nil, nil) }

// WipeData implements Machine.
func (r *Remote) WipeData() error { return r.do(r.bg(), "wipe", nil, nil) }

// EraseDisk implements Machine.
func (r *Remote) EraseDisk() error { return r.do(r.bg(), "erase", nil, nil) }

// WriteConfigDrive implements Machine.
func (r *Remote) WriteConfigDrive(userData []byte, metaData map[string]string) error {
	return r.do(r.bg(), "write-configdrive", agentv1.ConfigDrive{UserData: userData, MetaData: metaData}, nil)
}

// MetaData implements Machine.
func (r *Remote) MetaData() map[string]string {
	m := map[string]string{}
	_ = r.do(r.bg(), "metadata", nil, &m)
	return m
}

// SetPersistent implements Machine.
func (r *Remote) SetPersistent(name, content string) error {
	return r.do(r.bg(), "set-persistent", hwPersistent{Name: name, Content: content}, nil)
}

// Persistent implements Machine.
func (r *Remote) Persistent() map[string]string {
	p := map[string]string{}
	_ = r.do(r.bg(), "persistent", nil, &p)
	return p
}

// Record implements Machine.
func (r *Remote) Record(kind lab.EventKind, reason, message string, data map[string]string) {
	_ = r.do(r.bg(), "record", hwRecord{Kind: kind, Reason: reason, Message: message, Data: data}, nil)
}

// ByEndpoint implements Workload.
func (r *Remote) ByEndpoint(hostPort string) (string, bool) {
	var e hwEndpoint
	if r.do(r.bg(), "by-endpoint", hostPort, &e) != nil {
		return "", false
	}
	return e.Cluster, e.Found
}

// JoinControlPlane implements Workload.
func (r *Remote) JoinControlPlane(ctx context.Context, cluster, node string, rel workload.Release, clusterCA, etcdCA workload.CA) error {
	return r.do(ctx, "join-control-plane", hwJoin{Cluster: cluster, Node: node, Release: rel, ClusterCA: toPEM(clusterCA), EtcdCA: toPEM(etcdCA)}, nil)
}

// InitObjects implements Workload.
func (r *Remote) InitObjects(ctx context.Context, cluster string, rel workload.Release, clusterConfiguration string) error {
	return r.do(ctx, "init-objects", hwInit{Cluster: cluster, Release: rel, ClusterConfiguration: clusterConfiguration}, nil)
}

// SetNode implements Workload.
func (r *Remote) SetNode(ctx context.Context, cluster string, n workload.NodeInfo) error {
	return r.do(ctx, "set-node", hwSetNode{Cluster: cluster, Node: n}, nil)
}

// SetNodeNotReady implements Workload.
func (r *Remote) SetNodeNotReady(ctx context.Context, cluster, name, reason string) error {
	return r.do(ctx, "set-node-not-ready", hwNotReady{Cluster: cluster, Name: name, Reason: reason}, nil)
}

// NodeReady implements Workload.
func (r *Remote) NodeReady(ctx context.Context, cluster, name string) (bool, string, error) {
	var res hwReady
	err := r.do(ctx, "node-ready", hwNode{Cluster: cluster, Name: name}, &res)
	return res.Ready, res.Message, err
}

// StopNode implements Workload.
func (r *Remote) StopNode(ctx context.Context, cluster, node string) error {
	return r.do(ctx, "stop-node", hwNode{Cluster: cluster, Name: node}, nil)
}

// MemberDataLost implements Workload.
func (r *Remote) MemberDataLost(ctx context.Context, cluster, node string) error {
	return r.do(ctx, "member-data-lost", hwNode{Cluster: cluster, Name: node}, nil)
}

// ClusterConfiguration implements Workload.
func (r *Remote) ClusterConfiguration(ctx context.Context, cluster string) (string, error) {
	var cc string
	err := r.do(ctx, "cluster-configuration", cluster, &cc)
	return cc, err
}
