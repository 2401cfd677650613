package singlenode

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// KCP wrote a status (availableReplicas 0: its Machine was unavailable a
// moment ago) after this controller read it steady: holding the stale
// read must fail, not freeze the KCP with that status.
func TestHoldRefusesAKCPThatChangedSinceItWasRead(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := controlplanev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp", Annotations: map[string]string{Annotation: "true"}},
		Spec:       controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.36.3"},
		Status:     controlplanev1.KubeadmControlPlaneStatus{AvailableReplicas: ptr.To[int32](1)},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(kcp).WithStatusSubresource(kcp).Build()
	ctx := context.Background()
	read := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), read); err != nil {
		t.Fatal(err)
	}
	written := read.DeepCopy()
	written.Status.AvailableReplicas = ptr.To[int32](0)
	if err := c.Status().Update(ctx, written); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c}
	if err := r.hold(ctx, read); !apierrors.IsConflict(err) {
		t.Fatalf("holding a KCP read before its last status write: got %v, want a Conflict", err)
	}
	now := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), now); err != nil {
		t.Fatal(err)
	}
	if _, paused := now.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Fatal("the KCP was paused on a stale read")
	}
	if err := r.hold(ctx, now); err != nil {
		t.Fatalf("holding the KCP as it is: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), now); err != nil {
		t.Fatal(err)
	}
	if _, paused := now.Annotations[clusterv1.PausedAnnotation]; !paused || now.Annotations[PausedByAnnotation] != "true" {
		t.Fatalf("annotations after hold: %v", now.Annotations)
	}
}
