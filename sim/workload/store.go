package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

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

// Patch applies a patch as kube-apiserver does: to the stored object,
// into a fresh one, written back under the stored resourceVersion (or
// the one the patch names, an optimistic lock). CAPI's store does it
// differently in two ways that broke clients: it decodes the patched
// JSON into the object it was given, so a field the patch removes (a
// merge patch's null: kubectl uncordon, the extension's uncordon) kept
// its old value; and its API handler patches an Unstructured object that
// the store then kept, after which every typed read of that kind failed
// ("can't assign or convert unstructured.Unstructured"). A strategic
// merge patch is applied with the kind's patch strategy (CAPI's store
// treats it as a merge patch).
func (c unconditionalClient) Patch(ctx context.Context, obj client.Object, patch client.Patch) error {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	newTyped := func() (client.Object, error) {
		o, err := c.scheme.New(gvk)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return o.(client.Object), nil
	}
	current, err := newTyped()
	if err != nil {
		return err
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	orig, err := json.Marshal(current)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var patched []byte
	switch patch.Type() {
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(orig, data)
	case types.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(orig, data, current)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			patched, err = p.Apply(orig)
		}
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("patch of type %s is not supported", patch.Type()))
	}
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	fresh, err := newTyped()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(patched, fresh); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	fresh.GetObjectKind().SetGroupVersionKind(gvk)
	if err := c.Client.Update(ctx, fresh); err != nil {
		return err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fresh)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		u.SetUnstructuredContent(content)
		u.SetGroupVersionKind(gvk)
		return nil
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
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
