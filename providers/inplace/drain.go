package inplace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cordonAndDrain marks the node unschedulable and deletes its pods, as
// `kubectl drain --ignore-daemonsets` does: CAPI does not drain for an
// in-place update, the extension must. Mirror pods (static pods) and
// DaemonSet pods stay: they come back with the node.
func cordonAndDrain(ctx context.Context, wl client.Client, node *corev1.Node) error {
	if !node.Spec.Unschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = true
		if err := wl.Patch(ctx, node, patch); err != nil {
			return fmt.Errorf("cordon %s: %w", node.Name, err)
		}
	}
	pods := &corev1.PodList{}
	if err := wl.List(ctx, pods); err != nil {
		return fmt.Errorf("drain %s: %w", node.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node.Name || isMirror(p) || ownedByDaemonSet(p) {
			continue
		}
		if err := wl.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("drain %s: pod %s/%s: %w", node.Name, p.Namespace, p.Name, err)
		}
	}
	return nil
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
