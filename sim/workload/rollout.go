package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// The workload controllers that roll a template change out, as
// kube-controller-manager's do: a Deployment keeps one ReplicaSet per
// pod template (named and labelled by the template's hash, as
// pod-template-hash) and moves replicas from the old ones to the new
// one within maxSurge and maxUnavailable (RollingUpdate) or after the
// old ones are gone (Recreate); a ReplicaSet keeps its replicas; a
// DaemonSet replaces the pods of an old template node by node, never
// more than maxUnavailable of its nodes without a Ready pod.
//
// Kinder than the real controllers: no revision history limit (old
// ReplicaSets stay, scaled to zero), no progress deadline, no
// minReadySeconds, no DaemonSet maxSurge; pods are counted available as
// soon as they are Ready.

// Labels the controllers put on what they create.
const (
	podTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey
	revisionHashLabel    = appsv1.ControllerRevisionHashLabelKey
)

// templateHash names a pod template, as the controllers' ComputeHash
// does (a different function: names differ from a real cluster's).
func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	h := fnv.New32a()
	_, _ = h.Write(b)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// replicate runs the Deployment, ReplicaSet and DaemonSet controllers
// once over w.
func (c *Clusters) replicate(ctx context.Context, cluster string, cl inmemoryclient.Writer, w *world) error {
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for i := range w.deployments {
		note(c.rollDeployment(ctx, cl, w, &w.deployments[i]))
	}
	for i := range w.replicaSets {
		note(c.keepReplicas(ctx, cluster, cl, w, &w.replicaSets[i]))
	}
	for i := range w.daemonSets {
		note(c.rollDaemonSet(ctx, cl, w, &w.daemonSets[i]))
	}
	return firstErr
}

// deploymentFenceposts are a Deployment's maxSurge and maxUnavailable as
// its controller resolves them: percentages of replicas, surge rounded
// up and unavailable down, both zero read as one unavailable; an unset
// strategy is RollingUpdate at 25 % each (the API's defaults).
func deploymentFenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	quarter := intstr.FromString("25%")
	s, u := &quarter, &quarter
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			s = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			u = ru.MaxUnavailable
		}
	}
	want := int(replicasOf(d.Spec.Replicas))
	sv, _ := intstr.GetScaledValueFromIntOrPercent(s, want, true)
	uv, _ := intstr.GetScaledValueFromIntOrPercent(u, want, false)
	if sv == 0 && uv == 0 {
		uv = 1
	}
	return int32(sv), int32(uv)
}

// setsOf are the ReplicaSets a Deployment controls: the one of its
// current template (nil if none yet) and the others.
func setsOf(w *world, d *appsv1.Deployment, hash string) (current *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	for i := range w.replicaSets {
		rs := &w.replicaSets[i]
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		if rs.Labels[podTemplateHashLabel] == hash {
			current = rs
		} else {
			old = append(old, rs)
		}
	}
	sort.Slice(old, func(i, j int) bool {
		a, b := old[i].CreationTimestamp, old[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return old[i].Name < old[j].Name
	})
	return current, old
}

// rollDeployment is the Deployment controller for one Deployment: the
// current template's ReplicaSet created, replicas moved to it, and the
// Deployment's status summed over its ReplicaSets' pods.
func (c *Clusters) rollDeployment(ctx context.Context, cl inmemoryclient.Writer, w *world, d *appsv1.Deployment) error {
	hash := templateHash(&d.Spec.Template)
	current, old := setsOf(w, d, hash)
	if d.Spec.Paused {
		// A paused Deployment's template changes start nothing: no new
		// ReplicaSet, no scaling, only the status.
		return c.deploymentStatus(ctx, cl, w, d, current, old)
	}
	if current == nil {
		rs := newReplicaSet(d, hash)
		if err := cl.Create(ctx, rs); err != nil {
			return err
		}
		w.replicaSets = append(w.replicaSets, *rs)
		current, old = setsOf(w, d, hash)
	}
	scale := c.scaleDeployment(w, d, current, old)
	for rs, n := range scale {
		rs.Spec.Replicas = &n
		if err := cl.Update(ctx, rs); err != nil {
			return err
		}
	}
	return c.deploymentStatus(ctx, cl, w, d, current, old)
}

// scales are the replicas ReplicaSets are to have, where they change.
type scales map[*appsv1.ReplicaSet]int32

// of is what rs is to have: its new count, or its spec's.
func (sc scales) of(rs *appsv1.ReplicaSet) int32 {
	if n, ok := sc[rs]; ok {
		return n
	}
	return replicasOf(rs.Spec.Replicas)
}

// scaleDeployment is the replicas each ReplicaSet of d should have now
// (only those that change).
func (c *Clusters) scaleDeployment(w *world, d *appsv1.Deployment, current *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) scales {
	var out scales
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		out = scaleRecreate(w, replicasOf(d.Spec.Replicas), current, old)
	} else {
		surge, unavailable := deploymentFenceposts(d)
		out = scaleRolling(w, replicasOf(d.Spec.Replicas), surge, unavailable, current, old)
	}
	for rs, n := range out {
		if n == replicasOf(rs.Spec.Replicas) {
			delete(out, rs)
		}
	}
	return out
}

// scaleRecreate takes the old ReplicaSets to zero, and the current one
// to want once no old pod is left, terminating ones included.
func scaleRecreate(w *world, want int32, current *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) scales {
	out := scales{}
	pods := 0
	for _, rs := range old {
		out[rs] = 0
		pods += len(ownedAll(w.pods, rs.UID))
	}
	if pods == 0 {
		out[current] = want
	}
	return out
}

// scaleRolling is RollingUpdate, as the Deployment controller's
// reconcileNewReplicaSet and reconcileOldReplicaSets do it: the current
// ReplicaSet up within want + surge, the old ones down, their pods that
// are not Ready first, then as long as want - unavailable stay Ready.
func scaleRolling(w *world, want, surge, unavailable int32, current *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) scales {
	out := scales{}
	total := out.of(current)
	for _, rs := range old {
		total += out.of(rs)
	}
	switch n := out.of(current); {
	case n > want:
		out[current] = want
	case n < want:
		if room := want + surge - total; room > 0 {
			out[current] = n + min(room, want-n)
		}
	}
	minAvailable := want - unavailable
	curLive := owned(w.pods, current.UID)
	allPods, available := int32(len(curLive)), countReady(curLive)
	for _, rs := range old {
		live := owned(w.pods, rs.UID)
		allPods += int32(len(live))
		available += countReady(live)
	}
	maxScaledDown := allPods - minAvailable - (int32(len(curLive)) - countReady(curLive))
	for _, rs := range old {
		live := owned(w.pods, rs.UID)
		if unhealthy := min(int32(len(live))-countReady(live), out.of(rs), maxScaledDown); unhealthy > 0 {
			out[rs] = out.of(rs) - unhealthy
			maxScaledDown -= unhealthy
		}
	}
	canDrop := available - minAvailable
	for _, rs := range old {
		if drop := min(out.of(rs), canDrop); drop > 0 {
			out[rs] = out.of(rs) - drop
			canDrop -= drop
		}
	}
	return out
}

// replicasOf is a spec.replicas as the API defaults it (nil: 1).
func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// deploymentStatus writes d's status from its ReplicaSets' live pods
// (current: the ReplicaSet of its template, nil while paused before one
// was made).
func (c *Clusters) deploymentStatus(ctx context.Context, cl inmemoryclient.Writer, w *world, d *appsv1.Deployment, current *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	var updated []*corev1.Pod
	if current != nil {
		updated = owned(w.pods, current.UID)
	}
	replicas, ready := int32(len(updated)), countReady(updated)
	for _, rs := range old {
		live := owned(w.pods, rs.UID)
		replicas += int32(len(live))
		ready += countReady(live)
	}
	status := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: int32(len(updated)),
		ReadyReplicas: ready, AvailableReplicas: ready, UnavailableReplicas: max(0, replicasOf(d.Spec.Replicas)-ready)}
	if equality.Semantic.DeepEqual(d.Status, status) {
		return nil
	}
	d.Status = status
	d.Status.ObservedGeneration = writtenGeneration(d)
	return cl.Update(ctx, d)
}

// newReplicaSet is d's ReplicaSet for the template of hash, at zero
// replicas (rollDeployment scales it).
func newReplicaSet(d *appsv1.Deployment, hash string) *appsv1.ReplicaSet {
	isController := true
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(tmpl.Labels, podTemplateHashLabel, hash)
	sel := d.Spec.Selector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchLabels = withLabel(sel.MatchLabels, podTemplateHashLabel, hash)
	zero := int32(0)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-" + hash, Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: &isController, BlockOwnerDeletion: &isController}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: sel, Template: tmpl},
	}
}

func withLabel(in map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	out[key] = value
	return out
}

// keepReplicas is the ReplicaSet controller: spec.replicas live pods (a
// deleted one replaced at once; surplus ones deleted, those not Ready
// first, each told as a PodScaledDown event), and the status.
func (c *Clusters) keepReplicas(ctx context.Context, cluster string, cl inmemoryclient.Writer, w *world, rs *appsv1.ReplicaSet) error {
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	want := replicasOf(rs.Spec.Replicas)
	live := owned(w.pods, rs.UID)
	for n := int32(len(live)); n < want; n++ {
		note(cl.Create(ctx, newPod(rs.Namespace, rs.Name, "ReplicaSet", rs.UID, rs.Spec.Template, "")))
	}
	if surplus := int(int32(len(live)) - want); surplus > 0 {
		sort.SliceStable(live, func(i, j int) bool { return !podReady(live[i]) && podReady(live[j]) })
		for _, p := range live[:surplus] {
			if err := cl.Delete(ctx, p); err != nil {
				note(err)
				continue
			}
			c.emit(Event{Cluster: cluster, Node: p.Spec.NodeName, Reason: vocab.EventPodScaledDown,
				Message: fmt.Sprintf("pod %s/%s deleted by ReplicaSet %s, which wants %d", p.Namespace, p.Name, rs.Name, want),
				Data:    map[string]string{"pod": p.Namespace + "/" + p.Name}})
		}
		live = live[surplus:]
	}
	ready := countReady(live)
	status := appsv1.ReplicaSetStatus{ObservedGeneration: rs.Generation, Replicas: int32(len(live)), ReadyReplicas: ready, AvailableReplicas: ready}
	if !equality.Semantic.DeepEqual(rs.Status, status) {
		rs.Status = status
		rs.Status.ObservedGeneration = writtenGeneration(rs)
		note(cl.Update(ctx, rs))
	}
	return firstErr
}

// rollDaemonSet is the DaemonSet controller for one DaemonSet: a pod of
// the current template on every node it selects and whose taints it
// tolerates; a pod of an old template is deleted when it is not Ready,
// or while fewer than maxUnavailable of the DaemonSet's nodes lack a
// Ready pod (OnDelete: never); its replacement is created at once.
func (c *Clusters) rollDaemonSet(ctx context.Context, cl inmemoryclient.Writer, w *world, ds *appsv1.DaemonSet) error {
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	hash := templateHash(&ds.Spec.Template)
	onNode := map[string]*corev1.Pod{}
	live := owned(w.pods, ds.UID)
	for _, p := range live {
		onNode[p.Spec.NodeName] = p
	}
	var desired, unavailable, updated int32
	var stale []*corev1.Pod
	for _, name := range sortedNodes(w.nodes) {
		n := w.nodes[name]
		if !tolerates(ds.Spec.Template.Spec.Tolerations, n.Spec.Taints) || !selects(ds.Spec.Template.Spec.NodeSelector, n) {
			continue
		}
		desired++
		p := onNode[name]
		switch {
		case p == nil:
			unavailable++
			pod := newPod(ds.Namespace, ds.Name, "DaemonSet", ds.UID, ds.Spec.Template, name)
			pod.Labels = withLabel(pod.Labels, revisionHashLabel, hash)
			note(cl.Create(ctx, pod))
			continue
		case !podReady(p):
			unavailable++
		}
		if p.Labels[revisionHashLabel] == hash {
			updated++
		} else {
			stale = append(stale, p)
		}
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		maxUnavailable := daemonSetMaxUnavailable(ds, desired)
		for _, p := range stale {
			if podReady(p) && unavailable >= maxUnavailable {
				continue
			}
			if podReady(p) {
				unavailable++
			}
			note(cl.Delete(ctx, p))
		}
	}
	ready := countReady(live)
	status := appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: desired, CurrentNumberScheduled: int32(len(live)),
		NumberReady: ready, NumberAvailable: ready, UpdatedNumberScheduled: updated, NumberUnavailable: max(0, desired-ready)}
	if !equality.Semantic.DeepEqual(ds.Status, status) {
		ds.Status = status
		ds.Status.ObservedGeneration = writtenGeneration(ds)
		note(cl.Update(ctx, ds))
	}
	return firstErr
}

// daemonSetMaxUnavailable is a DaemonSet's maxUnavailable of its desired
// nodes (default 1, rounded up, at least 1).
func daemonSetMaxUnavailable(ds *appsv1.DaemonSet, desired int32) int32 {
	one := intstr.FromInt32(1)
	mu := &one
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		mu = ru.MaxUnavailable
	}
	v, _ := intstr.GetScaledValueFromIntOrPercent(mu, int(desired), true)
	return max(int32(v), 1)
}

// ownedAll are the pods a controller owns, terminating ones included.
func ownedAll(pods []*corev1.Pod, uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == uid {
			out = append(out, p)
		}
	}
	return out
}
