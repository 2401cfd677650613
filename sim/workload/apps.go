package workload

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// The lab plays kube-controller-manager, kube-scheduler and each node's
// kubelet for the applications users run on a workload cluster, so that
// an upgrade meets them as it would on a real cluster: Deployments and
// DaemonSets get pods, pods are bound to Ready schedulable nodes whose
// taints they tolerate (spread over the nodes), become Ready after a
// modelled start, stop with their node, terminate when deleted (an
// evicted pod is gone only once its node's kubelet stopped it), are
// evicted from a node lost for longer than the not-ready toleration,
// and go with a deleted node; PodDisruptionBudgets get the status the
// disruption controller computes, which the Eviction API reads.
//
// kube-system's add-ons (the kube-proxy DaemonSet and the CoreDNS
// Deployment kubeadm init leaves, which KCP versions) get pods and status
// like any other; its static pods (no controller) are the hosts' own.
//
// A template change rolls out as kube-controller-manager rolls it
// (rollout.go): Deployments through ReplicaSets within maxSurge and
// maxUnavailable, DaemonSets node by node.
//
// Not modelled: probes, resources, affinity.
//
// Every read and write goes through the cluster's etcd (store.go), and
// the controllers run only while one of its control-plane hosts runs an
// API server (they are static pods there): a cluster that lost quorum
// or all its control plane changes nothing.

// AppTiming is the modelled time of the application lifecycle.
type AppTiming struct {
	// PodStart is from a pod's binding to Ready (image pull, start,
	// readiness probe).
	PodStart time.Duration
	// PodStop is from deletion to gone, on a running node.
	PodStop time.Duration
	// NodeLost is how long pods stay on a NotReady node before the
	// node lifecycle controller evicts them (the default toleration of
	// node.kubernetes.io/not-ready and unreachable: 300 s).
	NodeLost time.Duration
}

// disruptionDeletionTimeout is how long the disruption controller counts
// an evicted pod not yet gone as disrupted (its DeletionTimeout).
const disruptionDeletionTimeout = 2 * time.Minute

// DefaultAppTiming is what a small real application does.
var DefaultAppTiming = AppTiming{PodStart: 8 * time.Second, PodStop: 5 * time.Second, NodeLost: 300 * time.Second}

// kubeletFinalizer holds a deleted pod until its node's kubelet stopped
// it, which is what graceful deletion waits for.
const kubeletFinalizer = "upgradelab.dev/kubelet"

// controllerTick is how often the controllers look (real time). A look
// reads a cluster's objects only when something may have changed since
// its last pass: its store was written (the store's resource version
// moved; every write and every deletion moves it), a kubelet started or
// stopped, one of the pass's own deadlines came (a pod Ready after its
// start, ended after its stop, a node lost after the toleration), or
// fullPassEvery went by. Reading every cluster's whole world at every
// tick cost the harness most of a core at 55 clusters.
const controllerTick = 50 * time.Millisecond

// fullPassEvery bounds how long a cluster goes unread: a change no
// trigger catches (a terminating pod the store's garbage collector
// removes, which moves no resource version) waits at most this long.
const fullPassEvery = time.Second

// appState is the controllers' memory of one cluster, as theirs is.
type appState struct {
	// kubelets are the nodes whose kubelet runs (their host booted), and
	// kubeletStarted when each node's kubelet last started. The node
	// agents write both (SetNode, StopNode) under Clusters.mu; the
	// controllers read a copy (kubeletsNow). The other fields are the
	// controller goroutine's alone.
	kubelets       map[string]bool
	kubeletStarted map[string]time.Time
	// bound: when each pod (by UID) was bound to its node, and
	// deleted: when its deletion was first seen.
	bound, deleted map[string]time.Time
	// notReadySince: when each Node was first seen not Ready.
	notReadySince map[string]time.Time
	// nodesSeen are the Nodes the controllers ever saw: a kube-system
	// pod bound to one of them that is gone is an orphan. (A static pod
	// is there before its kubelet registers the Node, so a node never
	// seen is not a deleted one; kube-controller-manager's pod GC waits
	// a 40 s quarantine for the same reason.)
	nodesSeen map[string]bool

	// What decides whether the next tick reads the cluster
	// (controllerTick): kubeletChanges counts the node agents' changes
	// (under Clusters.mu); the rest are the controller goroutine's: the
	// changes and the store's resource version its last pass began at,
	// when that was, and due, the earliest deadline that pass found
	// (zero: none).
	kubeletChanges uint64
	passChanges    uint64
	passVersion    string
	passAt, due    time.Time
	// passes counts the passes (read by tests).
	passes atomic.Uint64
}

// wake makes due no later than t.
func (st *appState) wake(t time.Time) {
	if st.due.IsZero() || t.Before(st.due) {
		st.due = t
	}
}

func newAppState() *appState {
	return &appState{kubelets: map[string]bool{}, bound: map[string]time.Time{}, deleted: map[string]time.Time{},
		notReadySince: map[string]time.Time{}, kubeletStarted: map[string]time.Time{}, nodesSeen: map[string]bool{}}
}

func (c *Clusters) runControllers(ctx context.Context) {
	t := time.NewTicker(controllerTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		var names []string
		for name, w := range c.clusters {
			if len(w.runningAPIServers()) > 0 {
				names = append(names, name)
			}
		}
		c.mu.Unlock()
		sort.Strings(names)
		for _, name := range names {
			st := c.appState(name)
			version, err := c.manager.GetCache().GetBookmarkResourceVersion(name)
			changes := c.kubeletChanges(st)
			now := time.Now()
			if err == nil && version == st.passVersion && changes == st.passChanges &&
				(st.due.IsZero() || now.Before(st.due)) && now.Sub(st.passAt) < fullPassEvery {
				continue // nothing to do since the last pass
			}
			st.passVersion, st.passChanges, st.passAt, st.due = version, changes, now, time.Time{}
			st.passes.Add(1)
			// An error is the cluster's etcd refusing, or a conflict with
			// another writer: look again at the next tick.
			if err := c.reconcileApps(ctx, name); err != nil {
				st.passVersion = ""
			}
		}
	}
}

// kubeletChanges reads st's count of kubelet changes under the lock the
// node agents write it with.
func (c *Clusters) kubeletChanges(st *appState) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return st.kubeletChanges
}

// world is one tick's reading of a cluster's application objects.
type world struct {
	nodes map[string]*corev1.Node
	pods  []*corev1.Pod
	// orphans are kube-system pods (static pods' mirrors) bound to a
	// node that does not exist.
	orphans     []*corev1.Pod
	deployments []appsv1.Deployment
	replicaSets []appsv1.ReplicaSet
	daemonSets  []appsv1.DaemonSet
	budgets     []policyv1.PodDisruptionBudget
}

func (c *Clusters) read(ctx context.Context, cl inmemoryclient.Reader) (*world, error) {
	w := &world{nodes: map[string]*corev1.Node{}}
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		w.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		_, bound := w.nodes[p.Spec.NodeName]
		switch {
		case managed(p):
			w.pods = append(w.pods, p)
		case p.Spec.NodeName != "" && !bound:
			w.orphans = append(w.orphans, p)
		}
	}
	deps := &appsv1.DeploymentList{}
	if err := cl.List(ctx, deps); err != nil {
		return nil, err
	}
	for _, d := range deps.Items {
		if managed(&d) {
			w.deployments = append(w.deployments, d)
		}
	}
	rss := &appsv1.ReplicaSetList{}
	if err := cl.List(ctx, rss); err != nil {
		return nil, err
	}
	for _, rs := range rss.Items {
		if managed(&rs) {
			w.replicaSets = append(w.replicaSets, rs)
		}
	}
	dss := &appsv1.DaemonSetList{}
	if err := cl.List(ctx, dss); err != nil {
		return nil, err
	}
	for _, d := range dss.Items {
		if managed(&d) {
			w.daemonSets = append(w.daemonSets, d)
		}
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := cl.List(ctx, pdbs); err != nil {
		return nil, err
	}
	w.budgets = pdbs.Items
	return w, nil
}

// managed: the lab's controllers act on everything outside kube-system,
// and in kube-system on the add-ons' Deployments, ReplicaSets and
// DaemonSets and the pods they own; static pods (their mirrors have no
// controller) are the hosts'.
func managed(o client.Object) bool {
	if o.GetNamespace() != metav1.NamespaceSystem {
		return true
	}
	switch o.(type) {
	case *appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.DaemonSet:
		return true
	}
	ref := metav1.GetControllerOf(o)
	return ref != nil && (ref.Kind == "Deployment" || ref.Kind == "ReplicaSet" || ref.Kind == "DaemonSet")
}

func (c *Clusters) reconcileApps(ctx context.Context, name string) error {
	cl := c.client(name)
	w, err := c.read(ctx, cl)
	if err != nil {
		return err
	}
	st := c.appState(name)
	now := time.Now()
	var errs []string
	note := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err.Error())
		}
	}
	note(c.nodeLifecycle(ctx, name, cl, w, st, now))
	note(c.kubelet(ctx, name, cl, w, st, c.kubeletsNow(st), now))
	note(c.replicate(ctx, name, cl, w))
	note(c.schedule(ctx, name, cl, w, st, now))
	note(c.disruption(ctx, cl, w, st, now))
	if len(errs) > 0 {
		return fmt.Errorf("workload cluster %s: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

func (c *Clusters) appState(name string) *appState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusters[name].apps
}

// kubeletView is which kubelets run, and since when, as one controller
// pass sees it.
type kubeletView struct {
	running map[string]bool
	started map[string]time.Time
}

// kubeletsNow copies the node agents' part of st under the lock they
// write it with.
func (c *Clusters) kubeletsNow(st *appState) kubeletView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := kubeletView{running: make(map[string]bool, len(st.kubelets)), started: make(map[string]time.Time, len(st.kubeletStarted))}
	for k, r := range st.kubelets {
		v.running[k] = r
	}
	for k, t := range st.kubeletStarted {
		v.started[k] = t
	}
	return v
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeLifecycle is kube-controller-manager's pod GC and node lifecycle
// controller: pods of a deleted node go at once, kube-system's static
// pods' mirrors among them (so a replaced control-plane node leaves no
// etcd or kube-apiserver pod behind); pods of a node NotReady for longer
// than the toleration are deleted (and, their kubelet being gone,
// removed).
func (c *Clusters) nodeLifecycle(ctx context.Context, cluster string, cl inmemoryclient.Writer, w *world, st *appState, now time.Time) error {
	for name := range w.nodes {
		st.nodesSeen[name] = true
	}
	for _, p := range w.orphans {
		if !st.nodesSeen[p.Spec.NodeName] {
			continue
		}
		if err := c.forceDelete(ctx, cluster, cl, p, "its node "+p.Spec.NodeName+" was deleted"); err != nil {
			return err
		}
	}
	for name, n := range w.nodes {
		if nodeReady(n) {
			delete(st.notReadySince, name)
		} else if _, ok := st.notReadySince[name]; !ok {
			st.notReadySince[name] = now
		}
	}
	var firstErr error
	for _, p := range w.pods {
		if p.Spec.NodeName == "" {
			continue
		}
		n, exists := w.nodes[p.Spec.NodeName]
		lostAt := st.notReadySince[p.Spec.NodeName].Add(c.scale.Real(c.timing.NodeLost))
		lost := exists && !nodeReady(n) && !now.Before(lostAt)
		if exists && !lost {
			if !nodeReady(n) {
				st.wake(lostAt)
			}
			continue
		}
		why := "its node " + p.Spec.NodeName + " was deleted"
		if lost {
			why = "its node " + p.Spec.NodeName + " was NotReady longer than the toleration"
		}
		if err := c.forceDelete(ctx, cluster, cl, p, why); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// forceDelete removes a pod whose kubelet will never confirm.
func (c *Clusters) forceDelete(ctx context.Context, cluster string, cl inmemoryclient.Writer, p *corev1.Pod, why string) error {
	if err := finish(ctx, cl, p); err != nil {
		return err
	}
	c.emit(Event{Cluster: cluster, Node: p.Spec.NodeName, Reason: vocab.EventPodDeleted, Message: fmt.Sprintf("pod %s/%s deleted: %s", p.Namespace, p.Name, why),
		Data: map[string]string{"pod": p.Namespace + "/" + p.Name}})
	return nil
}

// finish is a pod's end confirmed: the kubelet's finalizer goes and the
// pod with it (CAPI's store would leave a finalizer-free terminating
// object to its garbage collector's next pass, seconds later).
func finish(ctx context.Context, cl inmemoryclient.Writer, p *corev1.Pod) error {
	if len(p.Finalizers) > 0 {
		p.Finalizers = nil
		if err := cl.Update(ctx, p); err != nil {
			return err
		}
	}
	if err := cl.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// kubelet is each node's kubelet: a running one starts its bound pods
// (Ready after PodStart) and ends deleted ones (after PodStop); pods on a
// node that is not Ready are marked not Ready (the node lifecycle
// controller's MarkPodsNotReady).
func (c *Clusters) kubelet(ctx context.Context, cluster string, cl inmemoryclient.Writer, w *world, st *appState, kl kubeletView, now time.Time) error {
	var firstErr error
	keep := map[string]bool{}
	for _, p := range w.pods {
		keep[string(p.UID)] = true
		if p.Spec.NodeName == "" {
			continue
		}
		n := w.nodes[p.Spec.NodeName]
		running := kl.running[p.Spec.NodeName] && n != nil
		if p.DeletionTimestamp != nil {
			if _, ok := st.deleted[string(p.UID)]; !ok {
				st.deleted[string(p.UID)] = now
			}
			stopAt := st.deleted[string(p.UID)].Add(c.scale.Real(c.timing.PodStop))
			if running && now.Before(stopAt) {
				st.wake(stopAt)
			}
			if running && !now.Before(stopAt) {
				if err := finish(ctx, cl, p); err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				c.emit(Event{Cluster: cluster, Node: p.Spec.NodeName, Reason: vocab.EventPodDeleted, Message: fmt.Sprintf("pod %s/%s stopped on %s", p.Namespace, p.Name, p.Spec.NodeName),
					Data: map[string]string{"pod": p.Namespace + "/" + p.Name}})
			}
			continue
		}
		// A pod starts when it is bound or when its node's kubelet
		// started again after a reboot, whichever is later.
		startedAt := st.bound[string(p.UID)]
		if k := kl.started[p.Spec.NodeName]; k.After(startedAt) {
			startedAt = k
		}
		readyAt := startedAt.Add(c.scale.Real(c.timing.PodStart))
		ready := running && nodeReady(n) && !now.Before(readyAt)
		if _, ok := st.bound[string(p.UID)]; !ok {
			// Bound before this controller's memory (another run of it):
			// the pod has been starting since now.
			st.bound[string(p.UID)] = now
			readyAt, ready = now.Add(c.scale.Real(c.timing.PodStart)), false
		}
		if running && nodeReady(n) && !ready {
			st.wake(readyAt)
		}
		phase := p.Status.Phase
		if running && phase == corev1.PodPending {
			phase = corev1.PodRunning
		}
		if phase == p.Status.Phase && podReady(p) == ready {
			continue
		}
		setPodStatus(p, phase, ready)
		if err := cl.Update(ctx, p); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for uid := range st.bound {
		if !keep[uid] {
			delete(st.bound, uid)
			delete(st.deleted, uid)
		}
	}
	return firstErr
}

func setPodStatus(p *corev1.Pod, phase corev1.PodPhase, ready bool) {
	now := metav1.Now()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = phase
	if p.Status.StartTime == nil && phase == corev1.PodRunning {
		p.Status.StartTime = &now
	}
	conds := []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	p.Status.Conditions = conds
}

// writtenGeneration is the generation a status write leaves: CAPI's
// store bumps metadata.generation on every write (kube-apiserver only on
// a spec change), so a controller that recorded the generation it read
// would never catch up with it (CAPI's DNS upgrade wait reads CoreDNS's
// observedGeneration).
func writtenGeneration(o client.Object) int64 { return o.GetGeneration() + 1 }

// owned are the live (not terminating) pods a controller owns.
func owned(pods []*corev1.Pod, uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == uid && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func countReady(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if podReady(p) {
			n++
		}
	}
	return n
}

func newPod(namespace, owner, kind string, uid types.UID, tmpl corev1.PodTemplateSpec, node string) *corev1.Pod {
	isController := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: owner + "-" + rand.String(5), Labels: tmpl.Labels, Annotations: tmpl.Annotations,
			Finalizers: []string{kubeletFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner, UID: uid,
				Controller: &isController, BlockOwnerDeletion: &isController}},
		},
		Spec:   *tmpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node != "" {
		p.Spec.NodeName = node // the DaemonSet controller binds its own
	}
	return p
}

func sortedNodes(nodes map[string]*corev1.Node) []string {
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// tolerates: every NoSchedule and NoExecute taint is tolerated.
func tolerates(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func selects(selector map[string]string, n *corev1.Node) bool {
	return labels.SelectorFromSet(selector).Matches(labels.Set(n.Labels))
}

// schedule is kube-scheduler: each unbound pod goes to a Ready,
// schedulable node whose taints it tolerates and whose labels its
// nodeSelector matches, the one with the fewest pods of the same owner
// (spread), then by name.
func (c *Clusters) schedule(ctx context.Context, cluster string, cl inmemoryclient.Writer, w *world, st *appState, now time.Time) error {
	var firstErr error
	perNode := map[string]map[string]int{} // owner UID -> node -> pods
	for _, p := range w.pods {
		if ref := metav1.GetControllerOf(p); ref != nil && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			if perNode[string(ref.UID)] == nil {
				perNode[string(ref.UID)] = map[string]int{}
			}
			perNode[string(ref.UID)][p.Spec.NodeName]++
		}
	}
	for _, p := range w.pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		owner := ""
		if ref := metav1.GetControllerOf(p); ref != nil {
			owner = string(ref.UID)
		}
		best, bestCount := "", 0
		for _, name := range sortedNodes(w.nodes) {
			n := w.nodes[name]
			if !nodeReady(n) || n.Spec.Unschedulable || !tolerates(p.Spec.Tolerations, n.Spec.Taints) || !selects(p.Spec.NodeSelector, n) {
				continue
			}
			if count := perNode[owner][name]; best == "" || count < bestCount {
				best, bestCount = name, count
			}
		}
		if best == "" {
			continue // stays Pending until a node fits
		}
		p.Spec.NodeName = best
		if err := cl.Update(ctx, p); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		st.bound[string(p.UID)] = now
		if perNode[owner] == nil {
			perNode[owner] = map[string]int{}
		}
		perNode[owner][best]++
		c.emit(Event{Cluster: cluster, Node: best, Reason: vocab.EventPodScheduled, Message: fmt.Sprintf("pod %s/%s bound to %s", p.Namespace, p.Name, best),
			Data: map[string]string{"pod": p.Namespace + "/" + p.Name}})
	}
	return firstErr
}

// disruption is the disruption controller: each budget's status from the
// pods it selects and their owners' replicas, written when it changed.
// A pass follows every write to the cluster, so a budget is never more
// than a tick behind its pods; an entry of disruptedPods, which only time
// ends, wakes the pass that drops it.
func (c *Clusters) disruption(ctx context.Context, cl inmemoryclient.Writer, w *world, st *appState, now time.Time) error {
	var firstErr error
	for i := range w.budgets {
		pdb := &w.budgets[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		var expected, healthy int32
		owners := map[string]bool{}
		for _, p := range w.pods {
			if p.Namespace != pdb.Namespace || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if ref := metav1.GetControllerOf(p); ref != nil {
				owners[string(ref.UID)] = true
			} else if p.DeletionTimestamp == nil {
				expected++ // a bare pod counts for itself
			}
			if _, disrupted := pdb.Status.DisruptedPods[p.Name]; p.DeletionTimestamp == nil && podReady(p) && !disrupted {
				healthy++
			}
		}
		for _, rs := range w.replicaSets {
			if !owners[string(rs.UID)] {
				continue
			}
			// The disruption controller counts a Deployment's
			// replicas for the pods of all its ReplicaSets.
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
				owners[string(ref.UID)] = true
			} else {
				expected += replicasOf(rs.Spec.Replicas)
			}
		}
		for _, d := range w.deployments {
			if owners[string(d.UID)] {
				if d.Spec.Replicas != nil {
					expected += *d.Spec.Replicas
				} else {
					expected++
				}
			}
		}
		for _, ds := range w.daemonSets {
			if owners[string(ds.UID)] {
				expected += ds.Status.DesiredNumberScheduled
			}
		}
		timeout := c.scale.Real(disruptionDeletionTimeout)
		status := budgetStatus(pdb, expected, healthy, now, timeout)
		for _, at := range status.DisruptedPods {
			st.wake(at.Add(timeout))
		}
		status.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
			Reason: policyv1.InsufficientPodsReason, ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(now)}}
		if status.DisruptionsAllowed > 0 {
			status.Conditions[0].Status, status.Conditions[0].Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
		}
		if sameBudgetStatus(pdb.Status, status) {
			continue
		}
		pdb.Status = status
		pdb.Status.ObservedGeneration = writtenGeneration(pdb)
		pdb.Status.Conditions[0].ObservedGeneration = pdb.Status.ObservedGeneration
		if err := cl.Update(ctx, pdb); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func sameBudgetStatus(a, b policyv1.PodDisruptionBudgetStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.ExpectedPods == b.ExpectedPods && a.CurrentHealthy == b.CurrentHealthy &&
		a.DesiredHealthy == b.DesiredHealthy && a.DisruptionsAllowed == b.DisruptionsAllowed && len(a.DisruptedPods) == len(b.DisruptedPods) &&
		len(a.Conditions) == 1 && len(b.Conditions) == 1 && a.Conditions[0].Status == b.Conditions[0].Status
}
