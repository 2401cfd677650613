package singlenode

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cut* functions keep what KCP's CanUpdateMachine request carries of
// each object: type, name, namespace, labels, annotations and spec.

func cutMachine(m *clusterv1.Machine) clusterv1.Machine {
	return clusterv1.Machine{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations},
		Spec:       *m.Spec.DeepCopy(),
	}
}

func cutKubeadmConfig(kc *bootstrapv1.KubeadmConfig) client.Object {
	return &bootstrapv1.KubeadmConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: kc.Name, Namespace: kc.Namespace, Labels: kc.Labels, Annotations: kc.Annotations},
		Spec:       *kc.Spec.DeepCopy(),
	}
}

func cutUnstructured(u *unstructured.Unstructured) client.Object {
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "spec": u.Object["spec"],
	}}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetLabels(u.GetLabels())
	out.SetAnnotations(u.GetAnnotations())
	return out
}

func toRaw(obj client.Object) (runtime.RawExtension, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return runtime.RawExtension{}, err
	}
	return runtime.RawExtension{Raw: b}, nil
}
