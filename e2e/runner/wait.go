package runner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// progress is one look at the cluster during a wait: whether the wait is
// over, the line to print when it changed, and what to say if time runs
// out.
type progress struct {
	done         bool
	line, detail string
}

// wait polls look every pollEvery, printing its line when it changes,
// until it is done, limit (or the run's time) is up, or a fault could not
// be injected.
func (r *run) wait(ctx context.Context, limit time.Duration, look func(context.Context) (progress, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last progress
	for {
		p, err := look(ctx)
		switch {
		case ctx.Err() != nil:
			// The look ran into the deadline: reads it could not finish
			// (the workload's Nodes, say) would count every machine as
			// not up to date. The last whole look stands.
		case err == nil:
			if p.line != last.line {
				r.say("%s", p.line)
			}
			if p.done {
				return nil
			}
			last = p
		default:
			last.detail = err.Error()
		}
		select {
		case <-ctx.Done():
			if last.line == "" {
				last.line = "nothing could be read"
			}
			return fmt.Errorf("%s when its time (%s, or the run's) was up: %s", last.line, limit, last.detail)
		case err := <-r.faultErrs:
			return err
		case <-time.After(pollEvery):
		}
	}
}

// pollEvery is how often the runner looks while it waits: as often as
// the recorder polls. Its management reads come from the recorder's
// watch-fed cache (r.watched), so looking often costs the API server
// nothing; a slower poll only added up to its period to every wait.
const pollEvery = 100 * time.Millisecond

// waitRolledOut waits until every Machine is UpToDate at version with no
// update in progress, KCP and the MachineDeployment count them so, and
// every Node is Ready with that kubelet.
func (r *run) waitRolledOut(ctx context.Context, version, phase string, limit time.Duration) error {
	want := r.scenario.Cluster.ControlPlane.Replicas + r.scenario.Cluster.Workers.Replicas
	return r.wait(ctx, limit, func(ctx context.Context) (progress, error) {
		done, n, detail, err := r.rolledOut(ctx, version, want)
		return progress{done: done, line: fmt.Sprintf("%s: %d/%d machines up to date at %s", phase, n, want, version), detail: detail}, err
	})
}

func (r *run) rolledOut(ctx context.Context, version string, want int) (done bool, upToDate int, detail string, err error) {
	c, ns := r.watched, r.env.Namespace
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-cp"}, kcp); err != nil {
		return false, 0, "", err
	}
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-md"}, md); err != nil {
		return false, 0, "", err
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName}); err != nil {
		return false, 0, "", err
	}
	nodes := map[string]*corev1.Node{}
	if wl, err := r.workloadClient(ctx); err == nil {
		list := &corev1.NodeList{}
		if err := wl.List(ctx, list); err == nil {
			for i := range list.Items {
				nodes[list.Items[i].Name] = &list.Items[i]
			}
		}
	}
	var states []string
	for _, m := range machines.Items {
		cond := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
		_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
		n := nodes[m.Status.NodeRef.Name]
		ok := cond != nil && cond.Status == metav1.ConditionTrue && m.Spec.Version == version && m.DeletionTimestamp.IsZero() && !updating &&
			n != nil && nodeReady(n) && n.Status.NodeInfo.KubeletVersion == version
		if ok {
			upToDate++
		}
		states = append(states, fmt.Sprintf("%s(%s %s up-to-date=%v)", m.Name, m.Status.Phase, m.Spec.Version, ok))
	}
	sort.Strings(states)
	cp := int32(r.scenario.Cluster.ControlPlane.Replicas)
	workers := int32(r.scenario.Cluster.Workers.Replicas)
	done = meta.IsStatusConditionTrue(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneAvailableCondition) &&
		val(kcp.Status.UpToDateReplicas) == cp && val(kcp.Status.AvailableReplicas) == cp &&
		val(md.Status.UpToDateReplicas) == workers && val(md.Status.AvailableReplicas) == workers &&
		upToDate == want && len(machines.Items) == want
	return done, upToDate, strings.Join(states, " "), nil
}

func val(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRolledBack waits for the end of an upgrade that must fail safely:
// CAPI reports the in-place update of a Machine failed, and every Machine
// is there, not deleting, its Node Ready with the from-version's kubelet.
func (r *run) waitRolledBack(ctx context.Context, limit time.Duration) error {
	from := r.scenario.From.Version
	want := r.scenario.Cluster.ControlPlane.Replicas + r.scenario.Cluster.Workers.Replicas
	return r.wait(ctx, limit, func(ctx context.Context) (progress, error) {
		failed, ready, detail, err := r.rolledBack(ctx, from)
		return progress{done: failed > 0 && ready == want, detail: detail,
			line: fmt.Sprintf("rollback: %d Machine(s) report the update failed, %d/%d Nodes Ready at %s", failed, ready, want, from)}, err
	})
}

func (r *run) rolledBack(ctx context.Context, version string) (failed, ready int, detail string, err error) {
	machines := &clusterv1.MachineList{}
	if err := r.watched.List(ctx, machines, client.InNamespace(r.env.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName}); err != nil {
		return 0, 0, "", err
	}
	wl, err := r.workloadClient(ctx)
	if err != nil {
		return 0, 0, "", err
	}
	var states []string
	for _, m := range machines.Items {
		updateFailed := monitor.MachineSummary(&m)[vocab.FieldUpdateFailed] != ""
		if updateFailed {
			failed++
		}
		n := &corev1.Node{}
		ok := m.DeletionTimestamp.IsZero() && wl.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, n) == nil &&
			nodeReady(n) && n.Status.NodeInfo.KubeletVersion == version
		if ok {
			ready++
		}
		states = append(states, fmt.Sprintf("%s(update-failed=%v node-ready-at-%s=%v)", m.Name, updateFailed, version, ok))
	}
	sort.Strings(states)
	return failed, ready, strings.Join(states, " "), nil
}

// minStallWatch is the least wall time a stalled upgrade is watched.
// CAPI's own fixed waits are wall time at any scale (docs/ARCHITECTURE.md,
// "Time"): under its rate limit a drain is looked at again after 20 s
// and KCP requeues a deletion after 30 s, so at the suite's scale a
// stallFor of 35 lab minutes (21 s) ended before KCP's fallback had
// deleted the Machine it chose: the deletion rules went unexercised
// under the rate limit where they had passed without it.
const minStallWatch = time.Minute

// waitStalled watches an upgrade the scenario's faults stall: once every
// fault fired, for d (at least minStallWatch), printing what the Machines
// do; the rules then judge what the faults broke (expect.brokenRules).
func (r *run) waitStalled(ctx context.Context, d time.Duration) error {
	d = max(d, minStallWatch)
	want := r.scenario.Cluster.ControlPlane.Replicas + r.scenario.Cluster.Workers.Replicas
	if err := r.wait(ctx, r.provider.Intervals.Upgrade.Duration, func(ctx context.Context) (progress, error) {
		_, n, _, err := r.rolledOut(ctx, r.scenario.To.Version, want)
		return progress{done: r.faultsFired() == nil, line: fmt.Sprintf("upgrade: %d/%d machines up to date at %s, waiting for the faults", n, want, r.scenario.To.Version)}, err
	}); err != nil {
		return err
	}
	until := time.Now().Add(d)
	return r.wait(ctx, d+time.Minute, func(ctx context.Context) (progress, error) {
		_, n, detail, err := r.rolledOut(ctx, r.scenario.To.Version, want)
		return progress{done: time.Now().After(until), line: fmt.Sprintf("stalled: %d/%d machines up to date at %s", n, want, r.scenario.To.Version), detail: detail}, err
	})
}
