package monitor

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Recorder polls the objects of one cluster and records every change of
// their summaries. It polls when something changed (wake.go: watches on
// both clusters, and the events the runner passes to Wake), at most every
// Interval (100 ms by default), so it sees each state that lasts longer
// than that; CAPI's own steps last seconds. With nothing changing it
// polls every Idle (DefaultIdle).
type Recorder struct {
	// Management reads the cluster's namespace (WatchedReader, or any
	// client).
	Management client.Reader
	Namespace  string
	// Workload reaches the workload cluster once it answers (nil before).
	Workload func(context.Context) (client.Client, error)
	Timeline *timeline.Timeline
	Interval time.Duration
	Idle     time.Duration
	// Hosts: the provider keeps BareMetalHosts (a plane without their CRD
	// would answer every poll with an error); SpareLabel is the label it
	// marks its spare hosts with.
	Hosts      bool
	SpareLabel string

	// mu makes a Poll called by the runner wait for the one Run is doing.
	mu       sync.Mutex
	last     map[string]map[string]map[string]string
	workload client.Client
	// apiDownFrom: when the first read that found the workload API not
	// answering began (zero: the last poll found it answering).
	apiDownFrom time.Time

	wakeOnce sync.Once
	wake     chan struct{}
}

// Run polls until ctx ends: whenever something changed, at most every
// Interval; while the workload API does not answer, every Interval; and
// at least every Idle.
func (r *Recorder) Run(ctx context.Context) {
	r.watchManagement(ctx)
	wake := r.wakeCh()
	watching := false
	for {
		r.Poll(ctx)
		r.mu.Lock()
		c, down := r.workload, !r.apiDownFrom.IsZero()
		r.mu.Unlock()
		if wc, ok := c.(client.WithWatch); ok && !watching {
			watching = true
			r.watchWorkload(ctx, wc)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.interval()):
		}
		if down {
			continue
		}
		idle := time.NewTimer(r.idle())
		select {
		case <-ctx.Done():
		case <-wake:
		case <-idle.C:
		}
		idle.Stop()
	}
}

// recordedKind is one kind the recorder follows and how to list it.
type recordedKind struct {
	name string
	list func(context.Context) (map[string]map[string]string, error)
}

// kinds are in the order changes flow: CAPI's objects, then what they
// change in the workload cluster, then the hosts they free.
func (r *Recorder) kinds() []recordedKind {
	kinds := []recordedKind{
		{vocab.KindCluster, r.clusters}, {vocab.KindControlPlane, r.controlPlanes}, {vocab.KindMachineDeployment, r.deployments},
		// A control-plane Machine's etcd member is removed (KCP's
		// pre-terminate hook) before its Node is deleted, so the member
		// comes first in the flow and is read after the Node: a poll
		// that sees the Node gone sees the member removed too. Read the
		// other way round, both could change between the two reads and
		// a removed member replay as a live one on a vanished Node (it
		// did, as lost quorum, on four runs at once).
		{vocab.KindMachineSet, r.machineSets}, {vocab.KindMachine, r.machines}, {vocab.KindEtcdMember, r.etcdMembers}, {vocab.KindStaticPod, r.staticPods}, {vocab.KindNode, r.nodes},
		// A drained Node's pods go (and come back elsewhere) after its
		// Machine started deleting or its update began, and budgets
		// follow the pods.
		{vocab.KindPod, r.pods}, {vocab.KindBudget, r.budgets}, {vocab.KindApp, r.apps},
		{vocab.KindAddon, r.addons},
		// The API as a client finds it: read first, so a poll's other
		// reads are judged against an API known to answer.
		{vocab.KindWorkloadAPI, r.api},
	}
	if r.Hosts {
		kinds = append(kinds, recordedKind{vocab.KindHost, r.hosts})
	}
	return kinds
}

// Poll records what changed since the last poll; a kind that cannot be
// listed now is skipped (and its objects kept) until it can.
//
// The kinds are read against the flow, effects before their causes, and
// recorded with it. A host read deprovisioning was freed by a Machine
// already deleting and an etcd member already removed, and both, read
// after the host, show it: one poll never records an effect without its
// cause. Read the other way round, a Machine read just before it started
// deleting and its host read just after it was freed would replay as a
// host wiped under a live Machine.
func (r *Recorder) Poll(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]map[string]map[string]string{}
	}
	r.connectWorkload(ctx)
	kinds := r.kinds()
	seen := make([]map[string]map[string]string, len(kinds))
	for i := len(kinds) - 1; i >= 0; i-- {
		if now, err := kinds[i].list(ctx); err == nil {
			seen[i] = now
		}
	}
	// Every change of the poll carries one time: the poll is one
	// observation, and the checks judge the changes that share a time
	// together. Stamped per kind, a new etcd member and its new Node seen
	// in one poll replayed as a moment with the member and without the
	// Node (a lost quorum that never was).
	at := time.Now()
	for i, kind := range kinds {
		if seen[i] != nil {
			r.diff(kind.name, seen[i], at)
		}
	}
}

// connectWorkload gets the workload cluster's client once CAPI has
// written its kubeconfig.
func (r *Recorder) connectWorkload(ctx context.Context) {
	if r.workload != nil || r.Workload == nil {
		return
	}
	if c, err := r.Workload(ctx); err == nil {
		r.workload = c
	}
}

// diff records what one poll saw change. Objects gone are recorded before
// objects new or changed: one poll cannot tell their order, and a Machine
// deleted and its replacement created between two polls (KCP's scale-in
// waits for the deletion) must not replay as both existing at once.
func (r *Recorder) diff(kind string, now map[string]map[string]string, at time.Time) {
	before := r.last[kind]
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := now[name]; !ok {
			r.Timeline.Add(timeline.Entry{Time: at, Kind: kind, Name: name, Old: before[name]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(now)) {
		if old, ok := before[name]; !ok || !maps.Equal(old, now[name]) {
			r.Timeline.Add(timeline.Entry{Time: at, Kind: kind, Name: name, Old: old, New: now[name]})
		}
	}
	r.last[kind] = now
}

func (r *Recorder) clusters(ctx context.Context) (map[string]map[string]string, error) {
	l := &clusterv1.ClusterList{}
	if err := r.Management.List(ctx, l, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = ClusterSummary(&l.Items[i])
	}
	return out, nil
}

func (r *Recorder) controlPlanes(ctx context.Context) (map[string]map[string]string, error) {
	l := &controlplanev1.KubeadmControlPlaneList{}
	if err := r.Management.List(ctx, l, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = ControlPlaneSummary(&l.Items[i])
	}
	return out, nil
}

func (r *Recorder) deployments(ctx context.Context) (map[string]map[string]string, error) {
	l := &clusterv1.MachineDeploymentList{}
	if err := r.Management.List(ctx, l, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = DeploymentSummary(&l.Items[i])
	}
	return out, nil
}

func (r *Recorder) machineSets(ctx context.Context) (map[string]map[string]string, error) {
	l := &clusterv1.MachineSetList{}
	if err := r.Management.List(ctx, l, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = MachineSetSummary(&l.Items[i])
	}
	return out, nil
}

// addons reads kube-proxy, CoreDNS and the kubeadm-config ConfigMap in
// the workload cluster (once it answers), by the names kubeadm gives
// them.
func (r *Recorder) addons(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	out := map[string]map[string]string{}
	var pods *corev1.PodList // kube-system's, read once, when an add-on is found
	summary := func(containers []corev1.Container, selector *metav1.LabelSelector) (map[string]string, error) {
		if pods == nil {
			pods = &corev1.PodList{}
			if err := r.workload.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem)); err != nil {
				return nil, err
			}
		}
		return AddonSummary(containers, selector, pods.Items)
	}
	ds := &appsv1.DaemonSet{}
	if err := r.workload.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kube-proxy"}, ds); err == nil {
		if out["kube-proxy"], err = summary(ds.Spec.Template.Spec.Containers, ds.Spec.Selector); err != nil {
			return nil, err
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	dep := &appsv1.Deployment{}
	if err := r.workload.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "coredns"}, dep); err == nil {
		if out["coredns"], err = summary(dep.Spec.Template.Spec.Containers, dep.Spec.Selector); err != nil {
			return nil, err
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := r.workload.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"}, cm); err == nil {
		out[vocab.AddonKubeadmConfig] = KubeadmConfigSummary(cm.Data["ClusterConfiguration"])
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	return out, nil
}

func (r *Recorder) machines(ctx context.Context) (map[string]map[string]string, error) {
	l := &clusterv1.MachineList{}
	if err := r.Management.List(ctx, l, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = MachineSummary(&l.Items[i])
	}
	return out, nil
}

func (r *Recorder) hosts(ctx context.Context) (map[string]map[string]string, error) {
	l := &metal3.BareMetalHostList{}
	if err := r.Management.List(ctx, l, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = HostSummary(&l.Items[i], r.SpareLabel)
	}
	return out, nil
}

// nodes lists the workload cluster's Nodes (once it answers).
func (r *Recorder) nodes(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	l := &corev1.NodeList{}
	if err := r.workload.List(ctx, l); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = NodeSummary(&l.Items[i])
	}
	return out, nil
}

// etcdMembers lists the etcd members of the workload cluster (once it
// answers).
func (r *Recorder) etcdMembers(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	l := &corev1.PodList{}
	if err := r.workload.List(ctx, l, client.InNamespace("kube-system"), client.MatchingLabels{"component": "etcd"}); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = EtcdMemberSummary(&l.Items[i])
	}
	return out, nil
}

// controlPlaneNotEtcd selects kubeadm's static pods but etcd's (which
// etcdMembers reads), by the labels kubeadm and CAPI's in-memory
// provider give them, so no pod is read twice in a poll.
var controlPlaneNotEtcd = func() labels.Selector {
	s, err := labels.Parse("tier=control-plane,component!=etcd")
	if err != nil {
		panic(err)
	}
	return s
}()

// staticPods lists the control-plane nodes' kube-apiserver,
// kube-controller-manager and kube-scheduler (once the workload cluster
// answers), by the labels kubeadm gives them.
func (r *Recorder) staticPods(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	l := &corev1.PodList{}
	if err := r.workload.List(ctx, l, client.InNamespace("kube-system"), client.MatchingLabelsSelector{Selector: controlPlaneNotEtcd}); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = StaticPodSummary(&l.Items[i])
	}
	return out, nil
}

// RecordLab writes the lab's hardware events into the timeline until ctx
// ends: power, boot, disk and NIC events of each host that keep selects
// (nil: every host; a fleet's run records only its own hosts). Each event
// recorded calls wake (when not nil): the Recorder's Wake, so a host
// powered off is followed by a poll of what it took down.
func RecordLab(ctx context.Context, l *lab.Lab, tl *timeline.Timeline, keep func(host string) bool, wake func()) {
	events, cancel := l.Subscribe()
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if keep != nil && !keep(e.Host) {
				continue
			}
			fields := map[string]string{"kind": string(e.Kind), "reason": e.Reason, "message": e.Message}
			for k, v := range e.Data {
				fields[k] = v
			}
			tl.Add(timeline.Entry{Time: e.Time, Kind: timeline.KindLab, Name: e.Host, New: fields})
			if wake != nil {
				wake()
			}
		}
	}
}
