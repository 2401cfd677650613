package inplace

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// DrainAnnotation is when the drain of the update for WHAT began
// ("WHAT@TIME"), so the drain's deadline survives a restart.
const DrainAnnotation = "inplace.upgradelab.dev/drain-started"

// drained is one look at a node being drained.
type drained struct {
	// done: no pod that must leave is left on the node.
	done bool
	// left are the pods still there (evicted and terminating, or
	// refused), refused why each refused one may not go.
	left    []string
	refused map[string]string
}

func (d drained) String() string {
	if d.done {
		return "drained"
	}
	var why []string
	for _, p := range d.left {
		if msg, ok := d.refused[p]; ok {
			why = append(why, p+" (eviction refused: "+msg+")")
		} else {
			why = append(why, p+" (terminating)")
		}
	}
	return fmt.Sprintf("%d pods left: %s", len(d.left), strings.Join(why, ", "))
}

// cordonAndDrain marks the node unschedulable and evicts its pods through
// the Eviction API, as `kubectl drain --ignore-daemonsets
// --delete-emptydir-data` and CAPI's own drain do, so PodDisruptionBudgets
// hold: CAPI does not drain for an in-place update, the extension must.
// Mirror pods (static pods), DaemonSet pods and finished pods stay. It
// does not wait: each call evicts what may go now and says what is left;
// the node is drained once every pod that must leave is gone (its
// kubelet stopped it), not when its eviction was granted.
func cordonAndDrain(ctx context.Context, wl client.Client, node *corev1.Node) (drained, error) {
	if !node.Spec.Unschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = true
		if err := wl.Patch(ctx, node, patch); err != nil {
			return drained{}, fmt.Errorf("cordon %s: %w", node.Name, err)
		}
	}
	pods := &corev1.PodList{}
	if err := wl.List(ctx, pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return drained{}, fmt.Errorf("drain %s: %w", node.Name, err)
	}
	d := drained{refused: map[string]string{}}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node.Name || isMirror(p) || ownedByDaemonSet(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		name := p.Namespace + "/" + p.Name
		d.left = append(d.left, name)
		if p.DeletionTimestamp != nil {
			continue // evicted, its kubelet is stopping it
		}
		err := wl.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			d.refused[name] = evictionRefusal(err)
		default:
			return drained{}, fmt.Errorf("drain %s: evict %s: %w", node.Name, name, err)
		}
	}
	sort.Strings(d.left)
	d.done = len(d.left) == 0
	return d, nil
}

// evictionRefusal is the budget's own words from a 429.
func evictionRefusal(err error) string {
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				return c.Message
			}
		}
	}
	return err.Error()
}

// drain runs cordonAndDrain within the update's drain deadline: a node
// not drained DrainTimeout after its drain began is a failed update
// (nothing was changed on the host; the pods that could not go are named).
func (u *Updater) drain(ctx context.Context, bmm *infrav1.BareMetalMachine, wl client.Client, node *corev1.Node, key string) (progress, bool, error) {
	d, err := cordonAndDrain(ctx, wl, node)
	if err != nil {
		return progress{}, false, err
	}
	if d.done {
		return progress{}, true, nil
	}
	started, ok := annotatedAt(bmm, DrainAnnotation, key)
	if !ok {
		if err := u.annotate(ctx, bmm, DrainAnnotation, key+"@"+u.now().UTC().Format(time.RFC3339Nano)); err != nil {
			return progress{}, false, err
		}
		started = u.now()
	}
	if u.DrainTimeout > 0 && u.now().Sub(started) > u.DrainTimeout {
		p, err := u.recordFailure(ctx, bmm, key, fmt.Sprintf("drain of %s did not finish in %s: %s; nothing was changed on the host", node.Name, u.DrainTimeout, d))
		return p, false, err
	}
	return running("draining %s: %s", node.Name, d), false, nil
}

func isMirror(p *corev1.Pod) bool {
	_, ok := p.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}
