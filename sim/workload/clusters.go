package workload

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	policyv1 "k8s.io/api/policy/v1"
	inmemoryapi "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api"
	inmemoryetcd "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/etcd"
	"sigs.k8s.io/cluster-api/util/certs"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/queue"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Clusters holds every workload cluster of a run: one in-memory store
// (store.go), one HTTPS server, and per cluster its VIP (vip.go), its
// API server instances and its etcd members (etcd.go).
type Clusters struct {
	manager store
	codecs  serializer.CodecFactory
	server  *http.Server
	host    string
	key     servingKey
	scale   timescale.Scale
	timing  AppTiming
	// stop ends the controllers.
	stop context.CancelFunc

	mu sync.Mutex
	// closed: Stop ran; no VIP opens again.
	closed   bool
	clusters map[string]*cluster
	byPort   map[int32]*cluster
	events   queue.Fanout[Event]
}

// cluster is one workload cluster's runtime state: which of its
// control-plane nodes run an API server and what each etcd member's data
// is, which together decide whether its VIP answers and what its API
// serves.
type cluster struct {
	name  string
	vip   vip
	certs certificates
	// apiServers are the nodes whose kube-apiserver static pod runs.
	apiServers map[string]bool
	members    map[string]MemberState
	// electing: the leader stopped and the others are electing one
	// (ElectionTimeout); etcd serves nothing meanwhile.
	electing bool
	// erased: the store was emptied when the last data went.
	erased bool
	// apps is the lab's controllers' memory of the cluster (apps.go).
	apps *appState
}

func (w *cluster) runningAPIServers() []string {
	var out []string
	for node, up := range w.apiServers {
		if up {
			out = append(out, node)
		}
	}
	sort.Strings(out)
	return out
}

// Endpoint is where a workload cluster's API server answers; it is what
// Cluster.spec.controlPlaneEndpoint must say.
type Endpoint struct {
	Host string
	Port int32
}

// CA is a certificate authority as CAPI stores it in the cluster's secrets
// (<cluster>-ca, <cluster>-etcd).
type CA struct {
	Cert *x509.Certificate
	Key  *rsa.PrivateKey
}

// Options are the modelled time of what runs in the clusters.
type Options struct {
	Scale timescale.Scale
	// Apps is the application lifecycle's timing; zero is
	// DefaultAppTiming.
	Apps AppTiming
}

// Start runs the in-memory runtime, the server behind the VIPs (all on
// loopback) and the lab's controllers for the clusters' applications,
// until ctx ends.
func Start(ctx context.Context, o Options) (*Clusters, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{cloudv1.AddToScheme, corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c := &Clusters{host: "127.0.0.1", clusters: map[string]*cluster{}, byPort: map[int32]*cluster{}, scale: o.Scale, timing: o.Apps}
	if c.timing == (AppTiming{}) {
		c.timing = DefaultAppTiming
	}
	c.manager = store{Manager: inmemoryruntime.NewManager(scheme), etcd: c}
	c.codecs = serializer.NewCodecFactory(scheme)
	// The runtime's own log (its garbage collector's "Object garbage
	// collected", and its error for a pod the kubelet model deleted first)
	// says nothing a run needs.
	if err := c.manager.Start(ctrl.LoggerInto(ctx, logr.Discard())); err != nil {
		return nil, fmt.Errorf("workload clusters: in-memory runtime: %w", err)
	}
	log := logr.Discard()
	c.server = c.newServer(inmemoryapi.NewAPIServerHandler(c.manager, log, c.resolve),
		inmemoryetcd.NewEtcdServerHandler(c.manager, log, c.resolve))
	ctx, c.stop = context.WithCancel(ctx)
	go c.runControllers(ctx)
	return c, nil
}

// Stop closes every VIP. Clients' watches keep connections open, so it
// waits at most two seconds for them before closing them anyway.
func (c *Clusters) Stop(ctx context.Context) error {
	c.stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c.mu.Lock()
	c.closed = true
	for _, w := range c.clusters {
		if w.vip.listener != nil {
			w.vip.listener.closeAll()
			w.vip.listener = nil
		}
	}
	c.mu.Unlock()
	c.events.Close()
	if err := c.server.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Create makes an empty workload cluster (default namespaces, no API server
// yet) and reserves its endpoint. Creating one that exists returns its
// endpoint.
func (c *Clusters) Create(ctx context.Context, name string) (Endpoint, error) {
	c.mu.Lock()
	if w, ok := c.clusters[name]; ok {
		c.mu.Unlock()
		return Endpoint{Host: c.host, Port: w.vip.port}, nil
	}
	port, err := freePort()
	if err != nil {
		c.mu.Unlock()
		return Endpoint{}, err
	}
	c.manager.AddResourceGroup(name)
	w := &cluster{name: name, vip: vip{port: port}, apiServers: map[string]bool{}, members: map[string]MemberState{},
		certs: certificates{etcd: map[string]*tls.Certificate{}}, apps: newAppState()}
	c.clusters[name], c.byPort[port] = w, w
	c.mu.Unlock()
	cl := c.client(name)
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespacePublic, metav1.NamespaceSystem} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns}}}
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return Endpoint{}, fmt.Errorf("workload cluster %s: namespace %s: %w", name, ns, err)
		}
	}
	return Endpoint{Host: c.host, Port: port}, nil
}

// client reaches cluster's store as its API server does: through etcd.
func (c *Clusters) client(name string) inmemoryclient.Client {
	return c.manager.GetResourceGroup(name).GetClient()
}

// AdminConfig is an administrator's REST config for a cluster that has an
// API server, for the harness's own reads (checks, monitors). It reaches
// the VIP like any client: while no API server runs, its calls are
// refused.
func (c *Clusters) AdminConfig(name string) (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok {
		return nil, fmt.Errorf("no workload cluster %s", name)
	}
	if w.certs.apiServer == nil {
		return nil, fmt.Errorf("workload cluster %s: no API server has started yet", name)
	}
	return &rest.Config{
		Host: fmt.Sprintf("https://%s", net.JoinHostPort(c.host, fmt.Sprint(w.vip.port))),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   certs.EncodeCertPEM(w.certs.clusterCA.Cert),
			CertData: certs.EncodeCertPEM(w.certs.adminCert),
			KeyData:  certs.EncodePrivateKeyPEM(w.certs.adminKey),
		},
	}, nil
}

// Health is what cluster's etcd members can do now, and the members.
func (c *Clusters) Health(name string) (Health, map[string]MemberState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok {
		return HealthNoMembers, nil
	}
	return health(w.members), maps.Clone(w.members)
}

// behaviour implements etcdGate.
func (c *Clusters) behaviour(name string) Behaviour {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok {
		return Behaviour{}
	}
	if h := health(w.members); h != HealthQuorum || !w.electing {
		return behaviours[h]
	}
	return Behaviour{Reads: errNoLeader, Writes: errNoLeader}
}

// memberRemoved implements etcdGate: KCP removed node's member.
func (c *Clusters) memberRemoved(name, node string) {
	c.setMember(name, node, MemberRemoved, "KCP removed the member")
}

// setMember moves one member to st and applies what the cluster's new
// Health means (the store emptied when the last data went).
func (c *Clusters) setMember(name, node string, st MemberState, why string) {
	c.mu.Lock()
	w, ok := c.clusters[name]
	if !ok || w.members[node] == st {
		c.mu.Unlock()
		return
	}
	if old, known := w.members[node]; known && (old == MemberRemoved || old == MemberWiped && st == MemberRunning) {
		c.mu.Unlock()
		return // a removed member never votes again; a wiped one never has its data back
	}
	before := health(w.members)
	w.members[node] = st
	after := health(w.members)
	if st != MemberRunning {
		// A stacked API server talks to its own member only.
		c.apiServerStopped(w, node, "lost its etcd member ("+string(st)+")", st == MemberStopped)
	}
	erase := behaviours[after].Erase && !w.erased
	if erase {
		w.erased = true
	}
	members := describe(w.members)
	c.mu.Unlock()
	c.emit(Event{Cluster: name, Node: node, Reason: vocab.EventEtcdMember, Message: fmt.Sprintf("etcd member %s %s: %s", node, st, why),
		Data: map[string]string{"member": string(st), "health": string(after), "members": members}})
	if before != after {
		c.emit(Event{Cluster: name, Reason: vocab.EventEtcdHealth, Message: fmt.Sprintf("etcd %s (was %s): %s", after, before, members),
			Data: map[string]string{"health": string(after), "was": string(before)}})
	}
	if erase {
		c.manager.DeleteResourceGroup(name)
		c.manager.AddResourceGroup(name)
		c.emit(Event{Cluster: name, Reason: vocab.EventDataLost, Message: "every etcd member's data is gone: the cluster's objects are gone (" + members + ")"})
		return
	}
	c.electLeader(name)
}

// ElectionTimeout is etcd's election timeout (its default, which kubeadm
// keeps), lab time: how long a cluster whose leader stopped has none
// while its other members keep quorum.
const ElectionTimeout = time.Second

// electLeader is etcd's leader election as the members see it: when the
// leader is not running (its host off, its disk wiped, KCP removed it)
// and the running members have quorum, the cluster has no leader for
// ElectionTimeout (reads and writes fail with "no leader"), then one of
// them becomes the leader (the running member first by name). Without
// quorum there is no leader, and the behaviour table refuses every read
// and write. CAPI's etcd emulation names the leader by its pod's
// leader-from annotation, the latest wins; KCP's remediation moves
// leadership away from a member it removes and cannot reach a stopped
// one, so a leader that never moved made it fail ("failed to move etcd
// leadership"). Kinder than etcd: one round always elects, where real
// members' randomised timeouts may split a vote and take another.
func (c *Clusters) electLeader(name string) {
	leader, _, ok := c.leaderless(name)
	if !ok {
		return
	}
	c.mu.Lock()
	w := c.clusters[name]
	if w == nil || w.electing {
		c.mu.Unlock()
		return
	}
	w.electing = true
	c.mu.Unlock()
	c.emit(Event{Cluster: name, Node: leader, Reason: vocab.EventEtcdElection,
		Message: fmt.Sprintf("etcd member %s, the leader, is not running: no leader until the others elect one (election timeout %s)", leader, ElectionTimeout)})
	if d := c.scale.Real(ElectionTimeout); d > 0 {
		time.AfterFunc(d, func() { c.finishElection(name, leader) })
		return
	}
	c.finishElection(name, leader)
}

// finishElection ends the election electLeader started when old, the
// leader, stopped: the first running member by name leads, unless old
// runs again or quorum went meanwhile.
func (c *Clusters) finishElection(name, old string) {
	c.mu.Lock()
	if w := c.clusters[name]; w != nil {
		w.electing = false
	}
	c.mu.Unlock()
	_, next, ok := c.leaderless(name)
	if !ok {
		c.emit(Event{Cluster: name, Node: old, Reason: vocab.EventEtcdLeader, Message: "the election ended with no new leader: etcd member " + old + " leads again, or quorum went"})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := c.client(name)
	from := time.Now().Truncate(time.Second)
	if last := next.leaderFrom; !from.After(last) {
		from = last.Add(time.Second) // the annotation has whole seconds; the latest wins
	}
	patch := client.MergeFrom(next.pod.DeepCopy())
	next.pod.Annotations[cloudv1.EtcdLeaderFromAnnotationName] = from.Format(time.RFC3339)
	if err := cl.Patch(ctx, next.pod, patch); err != nil {
		c.emit(Event{Cluster: name, Node: old, Reason: vocab.EventEtcdLeader, Message: "the election's result could not be written: " + err.Error()})
		return
	}
	c.emit(Event{Cluster: name, Node: next.pod.Spec.NodeName, Reason: vocab.EventEtcdLeader,
		Message: fmt.Sprintf("etcd member %s became the leader (%s, the leader, is not running)", next.pod.Spec.NodeName, old)})
}

// candidate is the member an election makes the leader, with the
// leader-from time of the leader it replaces.
type candidate struct {
	pod        *corev1.Pod
	leaderFrom time.Time
}

// leaderless says whether the cluster needs a leader: its members keep
// quorum and the leader does not run. It names the leader and the
// member that would replace it (the first running by name).
func (c *Clusters) leaderless(name string) (leader string, next candidate, ok bool) {
	c.mu.Lock()
	w, found := c.clusters[name]
	if !found || health(w.members) != HealthQuorum {
		c.mu.Unlock()
		return "", candidate{}, false
	}
	running := map[string]bool{}
	for node, st := range w.members {
		running[node] = st == MemberRunning
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if err := c.client(name).List(ctx, pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"component": "etcd"}); err != nil {
		return "", candidate{}, false
	}
	var current *corev1.Pod
	var leaderFrom time.Time
	var candidates []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, removed := p.Annotations[cloudv1.EtcdMemberRemoved]; removed {
			continue
		}
		if t, err := time.Parse(time.RFC3339, p.Annotations[cloudv1.EtcdLeaderFromAnnotationName]); err == nil && t.After(leaderFrom) {
			current, leaderFrom = p, t
		}
		if running[p.Spec.NodeName] {
			candidates = append(candidates, p)
		}
	}
	if current == nil || running[current.Spec.NodeName] || len(candidates) == 0 {
		return "", candidate{}, false
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].Name < candidates[j].Name })
	return current.Spec.NodeName, candidate{pod: candidates[0], leaderFrom: leaderFrom}, true
}

// StopNode is a host that powered off or reset: the kubelet, the static
// pods and the etcd member of node stop; the VIP closes when node ran
// the cluster's last API server.
func (c *Clusters) StopNode(ctx context.Context, name, node string) error {
	c.mu.Lock()
	w, ok := c.clusters[name]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("no workload cluster %s", name)
	}
	c.apiServerStopped(w, node, "stopped", true)
	running := w.members[node] == MemberRunning
	w.apps.kubelets[node] = false
	c.mu.Unlock()
	left := c.undrained(ctx, name, node)
	c.emit(Event{Cluster: name, Node: node, Reason: vocab.EventNodeStopped,
		Message: fmt.Sprintf("node %s stopped with %d pods a drain would have moved", node, len(left)),
		Data:    map[string]string{"pods": strings.Join(left, ",")}})
	if running {
		c.setMember(name, node, MemberStopped, "its host stopped")
	}
	return nil
}

// undrained are the pods on node a drain moves (not kube-system's, not a
// DaemonSet's, not finished), read from the store as it is (a stopped
// control plane does not stop this bookkeeping).
func (c *Clusters) undrained(ctx context.Context, name, node string) []string {
	pods := &corev1.PodList{}
	if err := c.manager.raw(name).List(ctx, pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if !managed(&p) || ref != nil && ref.Kind == "DaemonSet" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

// MemberDataLost is a host whose disk was erased: the etcd data of the
// member on node is gone. A member KCP removed first loses nothing that
// counts.
func (c *Clusters) MemberDataLost(ctx context.Context, name, node string) error {
	c.mu.Lock()
	w, ok := c.clusters[name]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("no workload cluster %s", name)
	}
	st, member := w.members[node]
	c.mu.Unlock()
	if !member || st == MemberRemoved || st == MemberWiped {
		return nil
	}
	c.setMember(name, node, MemberWiped, "its host's disk was erased")
	return nil
}

// freePort is a port the mux binds later (see package loopback).
func freePort() (int32, error) {
	ports, err := loopback.Ports(1)
	if err != nil {
		return 0, err
	}
	return int32(ports[0]), nil
}
