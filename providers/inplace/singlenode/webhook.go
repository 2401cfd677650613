package singlenode

import (
	"context"
	"encoding/json"
	"net/http"

	"k8s.io/apimachinery/pkg/api/equality"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// WebhookPath is where the extension's webhook server serves PauseOnChange.
const WebhookPath = "/mutate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane-single-node"

// PauseOnChange is a mutating webhook on KubeadmControlPlane updates: an
// opted-in one-replica KCP (before and after the write) whose spec
// changes is paused in that same write (cluster.x-k8s.io/paused, marked
// as this package's), so KCP never reconciles the new spec unpaused and
// never creates a surge Machine. The controller lifts the pause once the
// Machine matches the new spec, or hands the change back to KCP. Every
// other write passes unchanged, so KCP runs unpaused the rest of the time.
type PauseOnChange struct {
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (w *PauseOnChange) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != "UPDATE" {
		return admission.Allowed("")
	}
	oldKCP, newKCP := &controlplanev1.KubeadmControlPlane{}, &controlplanev1.KubeadmControlPlane{}
	if err := w.Decoder.DecodeRaw(req.OldObject, oldKCP); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := w.Decoder.DecodeRaw(req.Object, newKCP); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !pauseOnChange(oldKCP, newKCP) {
		return admission.Allowed("")
	}
	paused := newKCP.DeepCopy()
	if paused.Annotations == nil {
		paused.Annotations = map[string]string{}
	}
	paused.Annotations[clusterv1.PausedAnnotation] = ""
	paused.Annotations[PausedByAnnotation] = "true"
	b, err := json.Marshal(paused)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, b)
}

// pauseOnChange: the write changes the spec of a KCP that is opted in
// and has one replica before and after, and is not paused yet.
func pauseOnChange(oldKCP, newKCP *controlplanev1.KubeadmControlPlane) bool {
	if !OptedIn(oldKCP) || !OptedIn(newKCP) || !newKCP.DeletionTimestamp.IsZero() {
		return false
	}
	if _, paused := newKCP.Annotations[clusterv1.PausedAnnotation]; paused {
		return false
	}
	return !equality.Semantic.DeepEqual(oldKCP.Spec, newKCP.Spec)
}
