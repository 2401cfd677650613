package monitor

import (
	"context"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What wakes the recorder. A poll reads every kind in causal order from
// the API (recorder.go), and that order is what keeps a poll from seeing
// an effect without its cause; watch-fed caches of each kind would each
// lag on their own and lose it. So the watches do not feed the reads:
// they say when to read. A poll follows a change by Interval at most,
// as every 100 ms poll did, and nothing is read while nothing changes.
// The triggers:
//   - the management cache's informers, for the run's namespace;
//   - watches on the workload cluster of every kind the recorder reads
//     there (a watch that breaks, as every one does when the VIP closes,
//     wakes it too);
//   - Wake, which the runner calls for each of the lab's and the workload
//     cluster's events (a host powered off, an API server stopped, etcd's
//     quorum lost) — what changes the workload API's answer without
//     changing an object;
//   - while the workload API did not answer the last poll, every
//     Interval, as before;
//   - otherwise at least every Idle: the resolution left for a change
//     none of the above announces (a provider without the lab, whose
//     workload API may go down with no event the harness sees), and how
//     soon the recorder connects once CAPI has written the workload
//     kubeconfig (a Secret, read from the management cache, whose
//     changes the recorder does not listen to) when no other change
//     wakes it first.

// DefaultIdle is the longest the recorder goes without a poll.
const DefaultIdle = time.Second

// Wake makes the recorder poll within Interval (it never blocks).
func (r *Recorder) Wake() {
	select {
	case r.wakeCh() <- struct{}{}:
	default:
	}
}

func (r *Recorder) wakeCh() chan struct{} {
	r.wakeOnce.Do(func() { r.wake = make(chan struct{}, 1) })
	return r.wake
}

// informers is what a watch-fed cache offers (controller-runtime's cache).
type informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// watchManagement wakes the recorder on every change the management cache
// sees in the run's namespace, until ctx ends. A Management reader that
// is no cache wakes nothing (the Idle poll reads it).
func (r *Recorder) watchManagement(ctx context.Context) {
	inf, ok := r.Management.(informers)
	if !ok {
		return
	}
	objs := []client.Object{&clusterv1.Cluster{}, &controlplanev1.KubeadmControlPlane{}, &clusterv1.MachineDeployment{},
		&clusterv1.MachineSet{}, &clusterv1.Machine{}}
	if r.Hosts {
		objs = append(objs, &metal3.BareMetalHost{})
	}
	mine := func(obj any) {
		if o, ok := obj.(metav1.Object); !ok || o.GetNamespace() == r.Namespace {
			r.Wake() // a tombstone (no namespace) wakes every recorder
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{AddFunc: mine, DeleteFunc: mine,
		UpdateFunc: func(_, obj any) { mine(obj) }}
	for _, obj := range objs {
		i, err := inf.GetInformer(ctx, obj)
		if err != nil {
			continue
		}
		reg, err := i.AddEventHandler(handler)
		if err != nil {
			continue
		}
		go func() {
			<-ctx.Done()
			_ = i.RemoveEventHandler(reg)
		}()
	}
}

// watchWorkload wakes the recorder on every change of what it reads in
// the workload cluster, until ctx ends: one watch per kind, opened again
// after it ends (the VIP closed, the server ended it).
func (r *Recorder) watchWorkload(ctx context.Context, c client.WithWatch) {
	for _, w := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{&corev1.NodeList{}, nil},
		{&corev1.PodList{}, nil}, // etcd's members in kube-system, the application's pods
		{&policyv1.PodDisruptionBudgetList{}, []client.ListOption{client.InNamespace(AppNamespace)}},
		{&appsv1.DeploymentList{}, nil}, // CoreDNS, the application
		{&appsv1.DaemonSetList{}, []client.ListOption{client.InNamespace(metav1.NamespaceSystem)}},
		{&corev1.ConfigMapList{}, []client.ListOption{client.InNamespace(metav1.NamespaceSystem)}},
	} {
		go r.rewatch(ctx, c, w.list, w.opts)
	}
}

func (r *Recorder) rewatch(ctx context.Context, c client.WithWatch, list client.ObjectList, opts []client.ListOption) {
	backoff := r.interval()
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), opts...)
		if err == nil {
			backoff = r.interval()
			for range w.ResultChan() {
				r.Wake()
			}
			w.Stop()
		}
		r.Wake() // the watch ended or could not open: the API may be down
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, r.idle())
	}
}

func (r *Recorder) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return 100 * time.Millisecond
}

func (r *Recorder) idle() time.Duration {
	if r.Idle > 0 {
		return r.Idle
	}
	return DefaultIdle
}
