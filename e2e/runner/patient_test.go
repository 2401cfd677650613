package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A loaded API server's answers are ridden through; a create the server
// stored before it timed out is the create's success; anything else, or
// a server that never recovers, reaches the caller.
func TestTheRunsClientRidesThroughALoadedAPIServer(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	timedOut := apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
	tooMany := apierrors.NewTooManyRequests("the server has received too many requests", 1)
	for _, tc := range []struct {
		name string
		// answers are what the server says to each create in turn; store
		// is whether it stored the object on the first.
		answers []error
		store   bool
		// fails says which error the caller must get (nil: none).
		fails func(error) bool
		tries int
	}{
		{name: "timed out, then created", answers: []error{timedOut, nil}, tries: 2},
		{name: "throttled twice, then created", answers: []error{tooMany, tooMany, nil}, tries: 3},
		{name: "stored before it timed out", answers: []error{timedOut}, store: true, tries: 2},
		{name: "a conflict is the caller's", answers: []error{apierrors.NewConflict(gr, "cm", errors.New("changed"))}, fails: apierrors.IsConflict, tries: 1},
		{name: "never recovers", answers: []error{timedOut, timedOut, timedOut, timedOut}, fails: apierrors.IsTimeout, tries: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			base := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					tries++
					answer := tc.answers[min(tries, len(tc.answers))-1]
					if tries > len(tc.answers) && tc.store {
						return c.Create(ctx, obj, opts...) // AlreadyExists: the first try stored it
					}
					if tries == 1 && tc.store { // stored, and the answer lost: obj is as sent
						if err := c.Create(ctx, obj.DeepCopyObject().(client.Object), opts...); err != nil {
							return err
						}
						return answer
					}
					if answer == nil {
						return c.Create(ctx, obj, opts...)
					}
					return answer
				},
			}).Build()
			pc := &patientClient{Client: base, backoff: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "v"}}
			err := pc.Create(context.Background(), cm)
			switch {
			case tc.fails == nil && err != nil:
				t.Fatalf("Create: %v; want success", err)
			case tc.fails != nil && !tc.fails(err):
				t.Fatalf("Create: %v; want the server's last answer", err)
			}
			if tries != tc.tries {
				t.Errorf("%d tries; want %d", tries, tc.tries)
			}
			if tc.fails == nil && (cm.ResourceVersion == "" || cm.Data["k"] != "v") {
				t.Errorf("created object not read back: %+v", cm)
			}
		})
	}
}
