package inplace

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// A failed update whose owner now asks for something else (the image, or
// the NIC firmware alone) gets its BareMetalMachine marked with what the
// owner asks, once, so CAPI's Machine controller calls the hook at once;
// one whose owner still asks for what failed is left alone.
func TestARevertOfAFailedUpdateIsToldToCAPIAtOnce(t *testing.T) {
	newImage := infrav1.Image{URL: "http://images/v1.36.3", Checksum: "bb"}
	oldImage := infrav1.Image{URL: "http://images/v1.35.3", Checksum: "aa"}
	fw := &infrav1.FirmwarePackage{URL: "http://firmware/nvm-9.50.json"}
	for _, tc := range []struct {
		name     string
		failed   string
		template infrav1.BareMetalMachineSpec
		want     string
	}{
		{"the image reverted", updateKey(newImage, nil), infrav1.BareMetalMachineSpec{Image: oldImage}, updateKey(oldImage, nil)},
		{"the firmware alone reverted", updateKey(newImage, fw), infrav1.BareMetalMachineSpec{Image: newImage}, updateKey(newImage, nil)},
		{"still asking for what failed", updateKey(newImage, fw), infrav1.BareMetalMachineSpec{Image: newImage, NICFirmware: fw}, ""},
		{"no failure", "", infrav1.BareMetalMachineSpec{Image: oldImage}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, controlplanev1.AddToScheme, infrav1.AddToScheme} {
				if err := add(scheme); err != nil {
					t.Fatal(err)
				}
			}
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0",
				Labels:      map[string]string{clusterv1.MachineControlPlaneNameLabel: "c-cp"},
				Annotations: map[string]string{clusterv1.UpdateInProgressAnnotation: ""}}}
			m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "BareMetalMachine", Name: "cp-0"}
			bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0"}}
			if tc.failed != "" {
				bmm.Annotations = map[string]string{FailedAnnotation: tc.failed + " health check failed"}
			}
			tmpl := &infrav1.BareMetalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp-now"},
				Spec: infrav1.BareMetalMachineTemplateSpec{Template: infrav1.BareMetalMachineTemplateResource{Spec: tc.template}}}
			kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp"}}
			kcp.Spec.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "BareMetalMachineTemplate", Name: "c-cp-now"}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(m, bmm, tmpl, kcp).Build()
			w := &RevertWatcher{Client: c, Updater: &Updater{Client: c}}
			if reqs := w.machinesOf(clusterv1.MachineControlPlaneNameLabel)(context.Background(), kcp); len(reqs) != 1 || reqs[0].Name != "cp-0" {
				t.Fatalf("the KCP's change maps to %v; want its updating Machine", reqs)
			}
			for range 2 {
				if _, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)}); err != nil {
					t.Fatal(err)
				}
			}
			got := &infrav1.BareMetalMachine{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(bmm), got); err != nil {
				t.Fatal(err)
			}
			if got.Annotations[OwnerAsksAnnotation] != tc.want {
				t.Fatalf("%s = %q, want %q", OwnerAsksAnnotation, got.Annotations[OwnerAsksAnnotation], tc.want)
			}
		})
	}
}
