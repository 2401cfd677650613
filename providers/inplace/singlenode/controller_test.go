package singlenode

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// KCP wrote a status (availableReplicas 0: its Machine was unavailable a
// moment ago) after this controller read it: pausing on the stale read
// must fail, not freeze the KCP with that status.
func TestPauseRefusesAKCPThatChangedSinceItWasRead(t *testing.T) {
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
	if err := r.pause(ctx, read); !apierrors.IsConflict(err) {
		t.Fatalf("pausing a KCP read before its last status write: got %v, want a Conflict", err)
	}
	now := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), now); err != nil {
		t.Fatal(err)
	}
	if _, paused := now.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Fatal("the KCP was paused on a stale read")
	}
	if err := r.pause(ctx, now); err != nil {
		t.Fatalf("pausing the KCP as it is: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), now); err != nil {
		t.Fatal(err)
	}
	if _, paused := now.Annotations[clusterv1.PausedAnnotation]; !paused || now.Annotations[PausedByAnnotation] != "true" {
		t.Fatalf("annotations after pause: %v", now.Annotations)
	}
}

// The controller's decision table, row by row: KCP stays unpaused except
// while an update it cannot do for one replica is prepared or runs.
func TestDecide(t *testing.T) {
	steady := facts{optedIn: true, oneMachine: true, upToDate: true, eligible: false}
	for _, tc := range []struct {
		name string
		f    facts
		want action
	}{
		{"not opted in: any pause of ours is lifted", facts{pausedByUs: true}, release},
		{"provisioning (no Machine with a Node yet)", facts{optedIn: true, pausedByUs: true}, release},
		{"steady: KCP runs unpaused", steady, release},
		{"an update runs: hold", facts{optedIn: true, oneMachine: true, updating: true, hookPending: true, pausedByUs: true}, hold},
		{"an update runs although the pause was lifted by hand: no new pause", facts{optedIn: true, oneMachine: true, updating: true, hookPending: true}, hold},
		{"the update finished: release", facts{optedIn: true, oneMachine: true, upToDate: true, pausedByUs: true}, release},
		{"the webhook paused a change that can be made in place", facts{optedIn: true, oneMachine: true, eligible: true, pausedByUs: true}, update},
		{"a change KCP must roll out (rolloutAfter, certificates)", facts{optedIn: true, oneMachine: true, eligible: false, pausedByUs: true}, release},
		{"a change KCP saw unpaused (no webhook): pause late", facts{optedIn: true, oneMachine: true, eligible: true}, pauseLate},
		{"a change the extension declined: KCP rolls it out, no new pause", facts{optedIn: true, oneMachine: true, eligible: true, declined: true}, release},
		{"declined, and paused late before the decline was seen: released", facts{optedIn: true, oneMachine: true, eligible: true, declined: true, pausedByUs: true}, release},
		{"the Machine is marked, its hook not yet: complete the trigger", facts{optedIn: true, oneMachine: true, updating: true, pausedByUs: true, eligible: true}, completeTrigger},
		{"a marked Machine looks up to date (its objects written): still complete", facts{optedIn: true, oneMachine: true, updating: true, pausedByUs: true, upToDate: true}, completeTrigger},
		{"the trigger complete: hold", facts{optedIn: true, oneMachine: true, updating: true, hookPending: true, pausedByUs: true}, hold},
		{"the Cluster is paused (clusterctl move): touch nothing", facts{optedIn: true, oneMachine: true, eligible: true, pausedByUs: true, paused: true}, waitPaused},
		{"paused, with a trigger cut short: not even completed", facts{optedIn: true, oneMachine: true, updating: true, pausedByUs: true, paused: true}, waitPaused},
		{"paused and done: our pause is not lifted while paused", facts{optedIn: true, oneMachine: true, upToDate: true, pausedByUs: true, paused: true}, waitPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.f); got != tc.want {
				t.Fatalf("decide(%+v) = %s, want %s", tc.f, got, tc.want)
			}
		})
	}
}

// The webhook pauses in the same write only a spec change of an opted-in
// one-replica KCP; every other write passes unchanged.
func TestPauseOnChange(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := controlplanev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hook := &PauseOnChange{Decoder: admission.NewDecoder(scheme)}
	base := func() *controlplanev1.KubeadmControlPlane {
		return &controlplanev1.KubeadmControlPlane{
			TypeMeta:   metav1.TypeMeta{APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlane"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp", Annotations: map[string]string{Annotation: "true"}},
			Spec:       controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.35.3"},
		}
	}
	for _, tc := range []struct {
		name      string
		change    func(o, n *controlplanev1.KubeadmControlPlane)
		wantPause bool
	}{
		{"a version bump", func(_, n *controlplanev1.KubeadmControlPlane) { n.Spec.Version = "v1.36.3" }, true},
		{"metadata only", func(_, n *controlplanev1.KubeadmControlPlane) { n.Labels = map[string]string{"a": "b"} }, false},
		{"not opted in", func(o, n *controlplanev1.KubeadmControlPlane) {
			delete(o.Annotations, Annotation)
			delete(n.Annotations, Annotation)
			n.Spec.Version = "v1.36.3"
		}, false},
		{"scaled to three", func(_, n *controlplanev1.KubeadmControlPlane) { n.Spec.Replicas = ptr.To[int32](3) }, false},
		{"already paused by the user", func(o, n *controlplanev1.KubeadmControlPlane) {
			o.Annotations[clusterv1.PausedAnnotation], n.Annotations[clusterv1.PausedAnnotation] = "", ""
			n.Spec.Version = "v1.36.3"
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, n := base(), base()
			tc.change(o, n)
			ob, _ := json.Marshal(o)
			nb, _ := json.Marshal(n)
			resp := hook.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: nb}, OldObject: runtime.RawExtension{Raw: ob}}})
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			paused := false
			for _, p := range resp.Patches {
				if p.Operation == "add" && (p.Path == "/metadata/annotations/cluster.x-k8s.io~1paused") {
					paused = true
				}
			}
			if paused != tc.wantPause {
				t.Fatalf("paused = %v, want %v (patches %+v)", paused, tc.wantPause, resp.Patches)
			}
		})
	}
}

// A KCP no longer opted in has this package's pause lifted even when its
// Cluster is gone; one still opted in is left as it is.
func TestAPauseOfOursIsLiftedWithoutTheCluster(t *testing.T) {
	for _, optedIn := range []bool{false, true} {
		kcp := &controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"},
				Annotations: map[string]string{clusterv1.PausedAnnotation: "", PausedByAnnotation: "true"}},
			Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1)},
		}
		if optedIn {
			kcp.Annotations[Annotation] = "true"
		}
		c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(kcp).Build()
		r := &Reconciler{Client: c}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(kcp)}); err != nil {
			t.Fatal(err)
		}
		got := &controlplanev1.KubeadmControlPlane{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(kcp), got); err != nil {
			t.Fatal(err)
		}
		if _, paused := got.Annotations[clusterv1.PausedAnnotation]; paused == !optedIn {
			t.Errorf("opted in %v: paused %v after a reconcile without the Cluster", optedIn, paused)
		}
	}
}

// A change the extension cannot make in place is handed to KCP with the
// generation it declined, in one write: the decision table then leaves
// that generation unpaused (KCP reconciles an object at most once a
// second; paused again at once, it never rolled the change out), and a
// later spec change is the extension's to judge again.
func TestADeclinedChangeIsNotPausedAgain(t *testing.T) {
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp", Generation: 4,
			Annotations: map[string]string{Annotation: "true", clusterv1.PausedAnnotation: "", PausedByAnnotation: "true"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1)},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(kcp).Build()
	r := &Reconciler{Client: c}
	if err := r.decline(context.Background(), kcp); err != nil {
		t.Fatal(err)
	}
	got := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(kcp), got); err != nil {
		t.Fatal(err)
	}
	if _, paused := got.Annotations[clusterv1.PausedAnnotation]; paused || got.Annotations[DeclinedAnnotation] != "4" {
		t.Fatalf("after decline: annotations %v; want unpaused, declined-generation 4", got.Annotations)
	}
	f := facts{optedIn: true, oneMachine: true, eligible: true, declined: got.Annotations[DeclinedAnnotation] == strconv.FormatInt(got.Generation, 10)}
	if a := decide(f); a != release {
		t.Errorf("the declined generation decides %s, want release (KCP rolls it out)", a)
	}
	f.declined = got.Annotations[DeclinedAnnotation] == strconv.FormatInt(got.Generation+1, 10)
	if a := decide(f); a != pauseLate {
		t.Errorf("the next spec decides %s, want %s (judged again)", a, pauseLate)
	}
}
