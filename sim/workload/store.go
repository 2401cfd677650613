package workload

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"

	"k8s.io/apimachinery/pkg/runtime"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	inmemoryresourcegroup "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/resourcegroup"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// store is CAPI's in-memory manager as every workload cluster's etcd:
// each resource group (one per cluster) is reached through a client that
// first asks the cluster's etcd whether it can serve (etcd.go: its
// members' Health and that Health's Behaviour), for every caller alike:
// the API behind the VIP, CAPI's etcd emulation, the hosts' kubelets and
// the lab's controllers. Raw reaches the store without asking, for the
// model's own bookkeeping.
//
// One more difference from CAPI's manager, which a real API server
// needs: an update that carries no resourceVersion replaces the object
// instead of failing with a Conflict. kube-apiserver allows that for its
// built-in kinds (their strategies' AllowUnconditionalUpdate; the
// in-memory server serves only built-in kinds), and KCP relies on it: it
// rewrites the CoreDNS ConfigMap with such an update, and on the
// in-memory server alone every CoreDNS upgrade failed with "the server
// reported a conflict".
type store struct {
	inmemoryruntime.Manager
	etcd etcdGate
}

// etcdGate answers for a cluster's etcd.
type etcdGate interface {
	// behaviour is what the cluster's etcd does now.
	behaviour(cluster string) Behaviour
	// memberRemoved is told when KCP's MemberRemove marked a member's pod.
	memberRemoved(cluster, node string)
}

func (m store) GetResourceGroup(name string) inmemoryresourcegroup.ResourceGroup {
	return gatedGroup{m.Manager.GetResourceGroup(name), m.GetScheme(), name, m.etcd}
}

// raw is the resource group without the etcd gate.
func (m store) raw(name string) inmemoryclient.Client {
	return unconditionalClient{m.Manager.GetResourceGroup(name).GetClient(), m.GetScheme()}
}

type gatedGroup struct {
	inmemoryresourcegroup.ResourceGroup
	scheme  *runtime.Scheme
	cluster string
	etcd    etcdGate
}

func (g gatedGroup) GetClient() inmemoryclient.Client {
	return gatedClient{unconditionalClient{g.ResourceGroup.GetClient(), g.scheme}, g.cluster, g.etcd}
}

// gatedClient serves a request only as the cluster's etcd can.
type gatedClient struct {
	unconditionalClient
	cluster string
	etcd    etcdGate
}

func (c gatedClient) read() error {
	if err := c.etcd.behaviour(c.cluster).Reads; err != nil {
		return apiError(err)
	}
	return nil
}

func (c gatedClient) write() error {
	if err := c.etcd.behaviour(c.cluster).Writes; err != nil {
		return apiError(err)
	}
	return nil
}

func (c gatedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	if err := c.read(); err != nil {
		return err
	}
	return c.unconditionalClient.Get(ctx, key, obj)
}

func (c gatedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.read(); err != nil {
		return err
	}
	return c.unconditionalClient.List(ctx, list, opts...)
}

func (c gatedClient) Create(ctx context.Context, obj client.Object) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.unconditionalClient.Create(ctx, obj)
}

func (c gatedClient) Delete(ctx context.Context, obj client.Object) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.unconditionalClient.Delete(ctx, obj)
}

func (c gatedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch) error {
	if err := c.write(); err != nil {
		return err
	}
	if err := c.unconditionalClient.Patch(ctx, obj, patch); err != nil {
		return err
	}
	c.observe(obj)
	return nil
}

func (c gatedClient) Update(ctx context.Context, obj client.Object) error {
	if err := c.write(); err != nil {
		return err
	}
	if err := c.unconditionalClient.Update(ctx, obj); err != nil {
		return err
	}
	c.observe(obj)
	return nil
}

// observe watches for the one write that changes who votes: CAPI's etcd
// emulation answers MemberRemove by marking the member's pod.
func (c gatedClient) observe(obj client.Object) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Labels["component"] == "etcd" && pod.Namespace == metav1.NamespaceSystem {
		if _, removed := pod.Annotations[cloudv1.EtcdMemberRemoved]; removed {
			c.etcd.memberRemoved(c.cluster, pod.Spec.NodeName)
		}
	}
}

type unconditionalClient struct {
	inmemoryclient.Client
	scheme *runtime.Scheme
}

// Create gives the object a UID, as kube-apiserver does (CAPI's store
// leaves it empty, and owner references match by UID).
func (c unconditionalClient) Create(ctx context.Context, obj client.Object) error {
	if obj.GetUID() == "" {
		obj.SetUID(uuid.NewUUID())
	}
	return c.Client.Create(ctx, obj)
}

// Patch keeps the store typed. CAPI's API handler patches an
// Unstructured object and its store keeps what it is given, so after one
// PATCH over HTTP (a cordon, a label) every typed read of that kind
// failed with "can't assign or convert unstructured.Unstructured". The
// patch is applied to the typed object and the result handed back.
func (c unconditionalClient) Patch(ctx context.Context, obj client.Object, patch client.Patch) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return c.Client.Patch(ctx, obj, patch)
	}
	gvk := u.GroupVersionKind()
	typed, err := c.scheme.New(gvk)
	if err != nil {
		return c.Client.Patch(ctx, obj, patch)
	}
	if err := c.scheme.Convert(u, typed, nil); err != nil {
		return apierrors.NewInternalError(err)
	}
	typed.GetObjectKind().SetGroupVersionKind(gvk)
	if err := c.Client.Patch(ctx, typed.(client.Object), patch); err != nil {
		return err
	}
	return c.scheme.Convert(typed, u, nil)
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
