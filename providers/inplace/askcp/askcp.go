// Package askcp does KCP's writes in KCP's place, with KCP v1.14's own
// functions (sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg): whether a
// Machine is up to date and what its desired objects are, those objects
// written as KCP's in-place trigger writes them, and the workload
// cluster's kubeadm-config moved as KCP moves it before it rolls a
// Machine.
//
// Two callers act for KCP. The single-node controller starts an update
// while KCP is paused. The updater, when a failed update's KCP now asks
// for something else, points the update at what KCP asks, so that the
// Machine never ends its update saying one version while its host runs
// another.
package askcp

import (
	"context"
	"fmt"

	"github.com/blang/semver/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is KCP's own field manager (kcpManagerName in KCP's
// controllers), under which the desired objects of an in-place update are
// written: this is KCP's work done in KCP's place, so the fields stay
// KCP's alone. Under a manager of its own, every field KCP's syncMachines
// manages would become co-owned, and a later removal through the KCP's
// machineTemplate (a label, an annotation, a feature gate) would no
// longer apply. Annotations and events say who acted.
const FieldManager = "capi-kubeadmcontrolplane"

// UpToDate asks KCP's own package whether m matches the KCP's spec, and
// what the desired objects are. c must map the Machine's infrastructure
// kind (its RESTMapper).
func UpToDate(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane, m *clusterv1.Machine) (bool, *pkg.UpToDateResult, error) {
	mapping, err := c.RESTMapper().RESTMapping(m.Spec.InfrastructureRef.GroupKind())
	if err != nil {
		return false, nil, fmt.Errorf("machine %s: infrastructure kind: %w", m.Name, err)
	}
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, infra); err != nil {
		return false, nil, err
	}
	kc := &bootstrapv1.KubeadmConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, kc); err != nil {
		return false, nil, err
	}
	now := metav1.Now()
	return pkg.UpToDate(ctx, c, cluster, m, kcp, &now,
		map[string]*unstructured.Unstructured{m.Name: infra}, map[string]*bootstrapv1.KubeadmConfig{m.Name: kc})
}

// ApplyDesired writes the desired InfraMachine, KubeadmConfig and Machine
// of an in-place update as KCP's trigger does (inplace_trigger.go), each
// marked update-in-progress where CAPI's Machine controller looks for it,
// without the labels and annotations KCP's syncMachines keeps.
func ApplyDesired(ctx context.Context, c client.Client, m *clusterv1.Machine, res *pkg.UpToDateResult) error {
	if res.DesiredMachine == nil || res.DesiredInfraMachine == nil || res.DesiredKubeadmConfig == nil {
		return fmt.Errorf("machine %s: KCP's UpToDate gave no desired Machine, InfraMachine or KubeadmConfig", m.Name)
	}
	infra := res.DesiredInfraMachine.DeepCopy()
	infra.SetLabels(nil)
	infra.SetAnnotations(map[string]string{
		clusterv1.TemplateClonedFromNameAnnotation:      infra.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation],
		clusterv1.TemplateClonedFromGroupKindAnnotation: infra.GetAnnotations()[clusterv1.TemplateClonedFromGroupKindAnnotation],
		clusterv1.UpdateInProgressAnnotation:            "",
	})
	if err := Apply(ctx, c, infra); err != nil {
		return fmt.Errorf("machine %s: infrastructure machine: %w", m.Name, err)
	}
	kc := res.DesiredKubeadmConfig.DeepCopy()
	kc.SetGroupVersionKind(bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))
	kc.Labels = nil
	kc.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	if err := Apply(ctx, c, kc); err != nil {
		return fmt.Errorf("machine %s: KubeadmConfig: %w", m.Name, err)
	}
	if kc.Spec.InitConfiguration.IsDefined() {
		// The apply removes only what KCP's manager owns; an
		// initConfiguration nobody owns (written by an older KCP) goes
		// with a patch, as KCP removes it.
		before := kc.DeepCopy()
		kc.Spec.InitConfiguration = bootstrapv1.InitConfiguration{}
		if err := c.Patch(ctx, kc, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("machine %s: KubeadmConfig: removing initConfiguration: %w", m.Name, err)
		}
	}
	desired := res.DesiredMachine.DeepCopy()
	desired.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Machine"))
	if err := Apply(ctx, c, desired); err != nil {
		return fmt.Errorf("machine %s: %w", m.Name, err)
	}
	return nil
}

// Apply writes obj by server-side apply as KCP's field manager, taking
// the fields it sets.
func Apply(ctx context.Context, c client.Client, obj client.Object) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return c.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership) //nolint:staticcheck // typed apply configurations do not exist for CAPI's kinds
}

// MoveKubeadmConfig is what KCP's updateControlPlane does in the workload
// cluster (wl) before it rolls a Machine (KCP v1.14,
// reconcilers/kubeadmcontrolplane/update.go), with the same functions of
// KCP's package: the ClusterRoles and bindings kubeadm of the KCP's
// version needs, and the kubeadm-config ClusterConfiguration (version,
// image repository, feature gates, API server, controller manager,
// scheduler, certificate validity, encryption algorithm, etcd), which a
// host's `kubeadm upgrade node` reads. Both are idempotent.
func MoveKubeadmConfig(ctx context.Context, wl client.Client, kcp *controlplanev1.KubeadmControlPlane) error {
	w := &pkg.Workload{Client: wl}
	version, err := semver.ParseTolerant(kcp.Spec.Version)
	if err != nil {
		return fmt.Errorf("KubeadmControlPlane %s: spec.version: %w", kcp.Name, err)
	}
	if err := w.EnsureKubeadmPermissions(ctx, version); err != nil {
		return err
	}
	var mutators []func(*bootstrapv1.ClusterConfiguration)
	if cc := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration; cc.IsDefined() {
		mutators = append(mutators,
			w.UpdateImageRepositoryInKubeadmConfigMap(pkg.ImageRepositoryFromClusterConfig(cc)),
			w.UpdateFeatureGatesInKubeadmConfigMap(kcp.Spec.KubeadmConfigSpec, version),
			w.UpdateAPIServerInKubeadmConfigMap(cc.APIServer),
			w.UpdateControllerManagerInKubeadmConfigMap(cc.ControllerManager),
			w.UpdateSchedulerInKubeadmConfigMap(cc.Scheduler),
			w.UpdateCertificateValidityPeriodDays(cc.CertificateValidityPeriodDays),
			w.UpdateEncryptionAlgorithm(cc.EncryptionAlgorithm))
		if cc.Etcd.External.IsDefined() {
			mutators = append(mutators, w.UpdateEtcdExternalInKubeadmConfigMap(cc.Etcd.External))
		} else {
			mutators = append(mutators, w.UpdateEtcdLocalInKubeadmConfigMap(cc.Etcd.Local))
		}
	}
	return w.UpdateClusterConfiguration(ctx, version, mutators...)
}
