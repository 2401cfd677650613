package runner

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patientClient is the run's client to the management plane: its reads
// and writes ride through the answers a loaded API server gives for a
// while (a request it timed out, 429 Too Many Requests from its
// priority and fairness, 503), as CAPI's own e2e framework retries its
// creates. A fleet's plane gives them under load: a cluster's creation
// failed on one timed-out PATCH. Anything else is the caller's.
type patientClient struct {
	client.Client
	backoff []time.Duration // waits between tries; their number is the retries
}

// patience is the default backoff: six tries over about half a minute.
var patience = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}

func patient(c client.Client) client.Client { return &patientClient{Client: c, backoff: patience} }

// transient says the API server gave up on the request for now, and the
// same request may succeed later.
func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}

// try runs do until it returns something other than a transient error,
// or the backoff or ctx ends.
func (c *patientClient) try(ctx context.Context, do func(retry bool) error) error {
	err := do(false)
	for _, wait := range c.backoff {
		if !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		err = do(true)
	}
	return err
}

func (c *patientClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.try(ctx, func(bool) error { return c.Client.Get(ctx, key, obj, opts...) })
}

// Create is tried again after a transient error; the API server may have
// stored the object before it gave up, so AlreadyExists on a retry of a
// named object is the first try's success, read back into obj.
func (c *patientClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.try(ctx, func(retry bool) error {
		err := c.Client.Create(ctx, obj, opts...)
		if retry && apierrors.IsAlreadyExists(err) && obj.GetName() != "" {
			return c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		return err
	})
}

func (c *patientClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.try(ctx, func(bool) error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c *patientClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.try(ctx, func(bool) error { return c.Client.Update(ctx, obj, opts...) })
}
