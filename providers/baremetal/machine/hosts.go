package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// boundHost is the host whose consumerRef names this machine, read from
// the API server (a cache a moment behind would miss a host this machine
// has just claimed, and the machine would claim a second one). The host
// the machine's status names is read alone, from the cache and then from
// the API server; only when there is none, or it is not bound to this
// machine, are all the namespace's hosts listed,
// so a machine that is only waiting for its host costs one small read,
// not the whole inventory (a fleet's namespace holds every host).
func (r *Reconciler) boundHost(ctx context.Context, bmm *infrav1.BareMetalMachine) (*metal3.BareMetalHost, error) {
	if bmm.Status.Host != "" {
		// The cache first: a host it shows bound to this machine is
		// bound (no one else writes this machine's UID into a
		// consumerRef), and reading it costs the API server nothing.
		for _, read := range []client.Reader{r.Client, r.Reader} {
			host := &metal3.BareMetalHost{}
			err := read.Get(ctx, client.ObjectKey{Namespace: bmm.Namespace, Name: bmm.Status.Host}, host)
			if err == nil && boundTo(host, bmm) {
				return host, nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
	}
	hosts := &metal3.BareMetalHostList{}
	if err := r.Reader.List(ctx, hosts, client.InNamespace(bmm.Namespace)); err != nil {
		return nil, err
	}
	for i := range hosts.Items {
		if boundTo(&hosts.Items[i], bmm) {
			return &hosts.Items[i], nil
		}
	}
	return nil, nil
}

func boundTo(host *metal3.BareMetalHost, bmm *infrav1.BareMetalMachine) bool {
	ref := host.Spec.ConsumerRef
	return ref != nil && ref.Kind == "BareMetalMachine" && ref.Name == bmm.Name && ref.UID == bmm.UID
}

// owner is the KubeadmControlPlane or MachineDeployment a machine belongs
// to, the key of node reuse.
func owner(m *clusterv1.Machine) string {
	if n := m.Labels[clusterv1.MachineControlPlaneNameLabel]; n != "" {
		return n
	}
	return m.Labels[clusterv1.MachineDeploymentNameLabel]
}

// rank orders candidates: a host reserved for this owner first, then
// ordinary free hosts, spares last. A spare is kept in reserve, so it is
// what a rollout's surge machine gets once every other host carries a
// machine, and not what a first provisioning takes while an ordinary
// host is still entering service (enteringService).
func rank(host *metal3.BareMetalHost, ownerName string) int {
	switch {
	case ownerName != "" && host.Labels[infrav1.NodeReuseLabel] == ownerName:
		return 0
	case host.Labels[infrav1.SpareLabel] != "":
		return 2
	}
	return 1
}

// enteringService names a free, ordinary host (no spare, not reserved for
// another owner) still on its way to available for the first time
// (registering, inspecting, preparing) without an error, "" when there is
// none: a machine waits for it rather than take a spare, which
// inventories that inspect hosts one by one (baremetal-operator) would
// otherwise hand out first.
func enteringService(hosts []metal3.BareMetalHost, ownerName string) string {
	for i := range hosts {
		h := &hosts[i]
		reserved := h.Labels[infrav1.NodeReuseLabel]
		if h.Spec.ConsumerRef != nil || !h.DeletionTimestamp.IsZero() || h.Status.ErrorType != "" || rank(h, ownerName) == 2 || (reserved != "" && reserved != ownerName) {
			continue
		}
		switch h.Status.Provisioning.State {
		case metal3.StateNone, metal3.StateRegistering, metal3.StateInspecting, metal3.StatePreparing:
			return h.Name
		}
	}
	return ""
}

// errClaimLost: someone changed the chosen host between the read and the
// claim (another machine took it); the caller looks again soon.
var errClaimLost = errors.New("the host changed before it was claimed")

// claim binds one available host matching the selector. The write is an
// update at the resourceVersion read, so two claimants of one host can
// never both win: the loser gets a conflict and looks again.
func (r *Reconciler) claim(ctx context.Context, bmm *infrav1.BareMetalMachine, machine *clusterv1.Machine) (*metal3.BareMetalHost, error) {
	selector, err := metav1.LabelSelectorAsSelector(&bmm.Spec.HostSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.hostSelector: %w", err)
	}
	// A Machine placed in a failure domain (by KCP, or by its
	// MachineDeployment's template) gets a host of that domain only, as
	// CAPM3 does: a host elsewhere would defeat the spread.
	if fd := machine.Spec.FailureDomain; fd != "" {
		req, err := labels.NewRequirement(infrav1.FailureDomainLabel, selection.Equals, []string{fd})
		if err != nil {
			return nil, fmt.Errorf("failure domain %q: %w", fd, err)
		}
		selector = selector.Add(*req)
	}
	hosts := &metal3.BareMetalHostList{}
	if err := r.Reader.List(ctx, hosts, client.InNamespace(bmm.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	ownerName := owner(machine)
	var candidates []*metal3.BareMetalHost
	for i := range hosts.Items {
		h := &hosts.Items[i]
		reserved := h.Labels[infrav1.NodeReuseLabel]
		if h.Spec.ConsumerRef != nil || !h.DeletionTimestamp.IsZero() || h.Status.Provisioning.State != metal3.StateAvailable ||
			(reserved != "" && reserved != ownerName) {
			continue
		}
		candidates = append(candidates, h)
	}
	if len(candidates) == 0 {
		setCondition(bmm, infrav1.HostAssociatedCondition, false, infrav1.WaitingForHostReason,
			fmt.Sprintf("no available BareMetalHost matches %q (%d hosts match, none free)", selector, len(hosts.Items)))
		return nil, nil
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		ri, rj := rank(candidates[i], ownerName), rank(candidates[j], ownerName)
		if ri != rj {
			return ri < rj
		}
		return candidates[i].Name < candidates[j].Name
	})
	host := candidates[0]
	if coming := enteringService(hosts.Items, ownerName); rank(host, ownerName) == 2 && coming != "" {
		setCondition(bmm, infrav1.HostAssociatedCondition, false, infrav1.WaitingForHostReason,
			fmt.Sprintf("BareMetalHost %s is still entering service; the spare %s is kept in reserve", coming, host.Name))
		return nil, nil
	}
	how := map[int]string{0: "reserved for " + ownerName, 1: "free", 2: "spare"}[rank(host, ownerName)]
	userData, metaData, err := r.configDriveSecrets(ctx, bmm, machine, host)
	if err != nil {
		return nil, err
	}
	host.Spec.ConsumerRef = &corev1.ObjectReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: "BareMetalMachine",
		Namespace: bmm.Namespace, Name: bmm.Name, UID: bmm.UID,
	}
	host.Spec.Image = &metal3.Image{URL: bmm.Spec.Image.URL, Checksum: bmm.Spec.Image.Checksum, ChecksumType: metal3.SHA256}
	host.Spec.UserData = &corev1.SecretReference{Namespace: bmm.Namespace, Name: userData}
	host.Spec.MetaData = &corev1.SecretReference{Namespace: bmm.Namespace, Name: metaData}
	host.Spec.Online = true
	delete(host.Labels, infrav1.SpareLabel)
	delete(host.Labels, infrav1.NodeReuseLabel)
	if err := r.Client.Update(ctx, host); err != nil {
		if apierrors.IsConflict(err) {
			return nil, errClaimLost
		}
		return nil, err
	}
	log.FromContext(ctx).Info("claimed host", "host", host.Name, "as", how)
	return host, nil
}

// configDriveSecrets writes what the host's config drive gets, in the
// secrets baremetal-operator reads, owned by the BareMetalMachine: the
// Machine's bootstrap data (key userData) and the meta data (key
// metaData) naming the node after the machine, as CAPM3 does, with the
// machine's provider ID.
func (r *Reconciler) configDriveSecrets(ctx context.Context, bmm *infrav1.BareMetalMachine, machine *clusterv1.Machine, host *metal3.BareMetalHost) (userData, metaData string, err error) {
	src := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, src); err != nil {
		return "", "", fmt.Errorf("bootstrap data secret: %w", err)
	}
	meta, err := json.Marshal(map[string]string{"local-hostname": bmm.Name, "provider-id": providerID(host, bmm)})
	if err != nil {
		return "", "", err
	}
	for name, data := range map[string]map[string][]byte{
		bmm.Name + "-user-data": {"userData": src.Data["value"]},
		bmm.Name + "-metadata":  {"metaData": meta},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bmm.Namespace, Name: name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, s, func() error {
			s.Data = data
			return controllerutil.SetOwnerReference(bmm, s, r.Client.Scheme())
		}); err != nil {
			return "", "", err
		}
	}
	return bmm.Name + "-user-data", bmm.Name + "-metadata", nil
}

// reconcileDelete releases the host and waits until it is deprovisioned
// (available again, or gone when a reset replaced it), so the Machine's
// deletion (and its etcd member's removal before it) completes only once
// nothing of it runs on the host.
func (r *Reconciler) reconcileDelete(ctx context.Context, bmm *infrav1.BareMetalMachine, machine *clusterv1.Machine) (ctrl.Result, error) {
	setCondition(bmm, infrav1.HostProvisionedCondition, false, infrav1.DeletingReason, "releasing the host")
	bmm.Status.Initialization.Provisioned = ptrTo(false)
	if bmm.Status.Host != "" {
		host := &metal3.BareMetalHost{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: bmm.Namespace, Name: bmm.Status.Host}, host)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return ctrl.Result{}, err
		case boundTo(host, bmm):
			if err := r.release(ctx, bmm, machine, host); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: r.Poll}, nil
		case host.Spec.ConsumerRef == nil && host.Status.Provisioning.State != metal3.StateAvailable:
			setCondition(bmm, infrav1.HostProvisionedCondition, false, infrav1.DeletingReason, "BareMetalHost "+host.Name+" is "+orNone(host.Status.Provisioning.State))
			return ctrl.Result{RequeueAfter: r.Poll}, nil
		}
	} else if host, err := r.boundHost(ctx, bmm); err != nil || host != nil {
		// Bound but the status write was lost: release it first.
		if err == nil {
			bmm.Status.Host = host.Name
		}
		return ctrl.Result{RequeueAfter: r.Poll}, err
	}
	patch := client.MergeFrom(bmm.DeepCopy())
	controllerutil.RemoveFinalizer(bmm, Finalizer)
	return ctrl.Result{}, r.Client.Patch(ctx, bmm, patch)
}

// release hands the host back: node reuse reserves it for the same owner,
// otherwise it becomes a spare.
func (r *Reconciler) release(ctx context.Context, bmm *infrav1.BareMetalMachine, machine *clusterv1.Machine, host *metal3.BareMetalHost) error {
	reuse, err := r.nodeReuse(ctx, bmm)
	if err != nil {
		return err
	}
	host.Spec.ConsumerRef, host.Spec.Image, host.Spec.UserData, host.Spec.MetaData, host.Spec.Online = nil, nil, nil, nil, false
	if host.Labels == nil {
		host.Labels = map[string]string{}
	}
	if o := owner(machine); reuse && o != "" {
		host.Labels[infrav1.NodeReuseLabel] = o
	} else {
		host.Labels[infrav1.SpareLabel] = "true"
	}
	if err := r.Client.Update(ctx, host); err != nil {
		return client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("released host", "host", host.Name, "nodeReuse", reuse)
	return nil
}

// nodeReuse reads the template the machine was cloned from.
func (r *Reconciler) nodeReuse(ctx context.Context, bmm *infrav1.BareMetalMachine) (bool, error) {
	name := bmm.Annotations[infrav1.ClonedFromAnnotation]
	if name == "" {
		return false, nil
	}
	t := &infrav1.BareMetalMachineTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bmm.Namespace, Name: name}, t); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return t.Spec.NodeReuse, nil
}
