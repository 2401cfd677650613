package machine

import (
	"context"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// A machine whose status names its host reads that host alone; the
// namespace's whole inventory is listed only when the name is missing or
// wrong (its status write was lost, or the host went to another machine).
func TestTheBoundHostIsReadByNameBeforeTheInventoryIsListed(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metal3.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "sn-1-cp-x", UID: types.UID("uid-1")}}
	host := func(name string, consumer string, uid string) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		if consumer != "" {
			h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "BareMetalMachine", Name: consumer, UID: types.UID(uid)}
		}
		return h
	}
	var lists int
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		host("host-0", "other", "uid-0"), host("host-1", bmm.Name, string(bmm.UID)), host("host-2", "", ""),
	).WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		lists++
		return c.List(ctx, l, o...)
	}}).Build()
	r := &Reconciler{Client: c, Reader: c}

	for _, tc := range []struct {
		statusHost string
		wantLists  int
	}{
		{statusHost: "host-1", wantLists: 0}, // named and bound: one Get
		{statusHost: "", wantLists: 1},       // the status write was lost
		{statusHost: "host-0", wantLists: 1}, // named, but bound to another machine
		{statusHost: "gone", wantLists: 1},   // named, but deleted
	} {
		lists = 0
		bmm.Status.Host = tc.statusHost
		got, err := r.boundHost(context.Background(), bmm)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Name != "host-1" || lists != tc.wantLists {
			name := "none"
			if got != nil {
				name = got.Name
			}
			t.Errorf("status.host %q: bound host %s after %d lists; want host-1 after %d", tc.statusHost, name, lists, tc.wantLists)
		}
	}
}
