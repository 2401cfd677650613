package workload

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	inmemoryresourcegroup "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/resourcegroup"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// unconditionalUpdates is CAPI's in-memory manager with one difference the
// workload clusters need to behave like a real API server: an update that
// carries no resourceVersion replaces the object instead of failing with
// a Conflict. kube-apiserver allows that for its built-in kinds (their
// strategies' AllowUnconditionalUpdate; the in-memory server serves only
// built-in kinds), and KCP relies on it: it rewrites the CoreDNS ConfigMap
// with such an update, and on the in-memory server alone every CoreDNS
// upgrade failed with "the server reported a conflict".
type unconditionalUpdates struct {
	inmemoryruntime.Manager
}

func (m unconditionalUpdates) GetResourceGroup(name string) inmemoryresourcegroup.ResourceGroup {
	return unconditionalGroup{m.Manager.GetResourceGroup(name), m.GetScheme()}
}

type unconditionalGroup struct {
	inmemoryresourcegroup.ResourceGroup
	scheme *runtime.Scheme
}

func (g unconditionalGroup) GetClient() inmemoryclient.Client {
	return unconditionalClient{g.ResourceGroup.GetClient(), g.scheme}
}

type unconditionalClient struct {
	inmemoryclient.Client
	scheme *runtime.Scheme
}

// builtInGroups are the API groups of the kinds the workload clusters
// serve; the emulation's own bookkeeping types are not among them.
var builtInGroups = map[string]bool{"": true, "apps": true, "rbac.authorization.k8s.io": true}

// Update gives an update of a built-in kind without a resourceVersion the
// stored object's, so the in-memory tracker's optimistic-concurrency check
// passes as the API server's unconditional update would. An update that
// names a resourceVersion is checked as before.
func (c unconditionalClient) Update(ctx context.Context, obj client.Object) error {
	if gvk, err := apiutil.GVKForObject(obj, c.scheme); err == nil && builtInGroups[gvk.Group] && obj.GetResourceVersion() == "" {
		current := obj.DeepCopyObject().(client.Object)
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err == nil {
			obj.SetResourceVersion(current.GetResourceVersion())
		}
	}
	return c.Client.Update(ctx, obj)
}
