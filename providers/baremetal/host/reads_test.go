package host

import (
	"context"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// lagging reads from cache and writes to the API server: a manager's
// client whose informer has not seen the latest writes yet.
type lagging struct {
	client.Client
	cache client.Reader
}

func (l *lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.cache.Get(ctx, key, obj, opts...)
}

// A host is read from the cache unless the cache has not caught up with
// this reconciler's own last write of it; then from the API server, so a
// phase never acts twice on a state it already moved past.
func TestAHostIsReadFromTheAPIServerOnlyWhileTheCacheLagsItsOwnWrite(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := metal3.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "cp-0"}
	initial := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(initial.DeepCopy()).WithStatusSubresource(&metal3.BareMetalHost{}).Build()
	stale := &metal3.BareMetalHost{}
	if err := api.Get(ctx, key, stale); err != nil {
		t.Fatal(err)
	}
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stale).Build()
	apiReads := 0
	r := &Reconciler{Reader: countingReader{api, &apiReads}}
	r.writes.written = map[types.NamespacedName]string{}
	lag := &lagging{Client: api, cache: cache}
	r.Client = r.writes.recording(lag)

	read := func() *metal3.BareMetalHost {
		t.Helper()
		h := &metal3.BareMetalHost{}
		if err := r.readHost(ctx, key, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if read(); apiReads != 0 {
		t.Fatalf("a host this reconciler never wrote was read from the API server (%d reads); want the cache", apiReads)
	}

	host := read()
	host.Status.Provisioning.State = metal3.StateProvisioning
	if err := r.Client.Status().Update(ctx, host); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Status.Provisioning.State != metal3.StateProvisioning || apiReads != 1 {
		t.Fatalf("after its own write the host reads state %q with %d API reads; want %q from the API server, the cache still older",
			got.Status.Provisioning.State, apiReads, metal3.StateProvisioning)
	}

	// The cache catches up: back to reading it, and the record goes.
	caught := &metal3.BareMetalHost{}
	if err := api.Get(ctx, key, caught); err != nil {
		t.Fatal(err)
	}
	lag.cache = fake.NewClientBuilder().WithScheme(scheme).WithObjects(caught).Build()
	if read(); apiReads != 1 || len(r.writes.written) != 0 {
		t.Fatalf("with the cache caught up: %d API reads, %d writes remembered; want 1 and none", apiReads, len(r.writes.written))
	}
}

type countingReader struct {
	client.Reader
	n *int
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	*c.n++
	return c.Reader.Get(ctx, key, obj, opts...)
}
