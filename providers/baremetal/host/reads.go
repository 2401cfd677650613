package host

import (
	"context"
	"sync"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWrites remembers the resourceVersion of this reconciler's last write
// of each host until the manager's cache has caught up with it: the
// expectations CAPI's stale-cache guard keeps (util/controller's
// consistency store, which compares resourceVersions the same way).
type ownWrites struct {
	mu      sync.Mutex
	written map[types.NamespacedName]string
}

// recording is c with every write of a host remembered.
func (w *ownWrites) recording(c client.Client) client.Client {
	return recordingClient{Client: c, writes: w}
}

type recordingClient struct {
	client.Client
	writes *ownWrites
}

func (c recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.writes.after(obj, c.Client.Update(ctx, obj, opts...))
}

func (c recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.writes.after(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c recordingClient) Status() client.SubResourceWriter {
	return recordingStatus{SubResourceWriter: c.Client.Status(), writes: c.writes}
}

type recordingStatus struct {
	client.SubResourceWriter
	writes *ownWrites
}

func (s recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.writes.after(obj, s.SubResourceWriter.Update(ctx, obj, opts...))
}

func (s recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.writes.after(obj, s.SubResourceWriter.Patch(ctx, obj, patch, opts...))
}

// after records a host's new resourceVersion once its write succeeded.
func (w *ownWrites) after(obj client.Object, err error) error {
	if _, isHost := obj.(*metal3.BareMetalHost); isHost && err == nil {
		w.mu.Lock()
		w.written[client.ObjectKeyFromObject(obj)] = obj.GetResourceVersion()
		w.mu.Unlock()
	}
	return err
}

// behind says whether cached, read from the cache, is older than this
// reconciler's last write of it. Once the cache has caught up the record
// goes. A resourceVersion that does not compare (not etcd's) counts as
// behind: the API server is asked.
func (w *ownWrites) behind(cached client.Object) bool {
	key := client.ObjectKeyFromObject(cached)
	w.mu.Lock()
	defer w.mu.Unlock()
	wrote, ok := w.written[key]
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), wrote)
	if err == nil && cmp >= 0 {
		delete(w.written, key)
		return false
	}
	return true
}

func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.written, key)
	w.mu.Unlock()
}

// readHost reads a host from the cache, or from the API server
// (Reconciler.Reader) when the cache has not yet seen this reconciler's
// last write of it: a phase acts on the hardware before it writes the
// state it reached, and a reconcile that read an older state would act
// twice (boot a just-cleaned host into the deploy ramdisk again).
func (r *Reconciler) readHost(ctx context.Context, key types.NamespacedName, host *metal3.BareMetalHost) error {
	err := r.Client.Get(ctx, key, host)
	if apierrors.IsNotFound(err) {
		r.writes.forget(key)
	}
	if err != nil || r.Reader == nil || !r.writes.behind(host) {
		return err
	}
	return r.Reader.Get(ctx, key, host)
}
