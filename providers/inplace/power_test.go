package inplace

import (
	"context"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// Powering through the host, a reboot (soft, or hard when forced, as the
// reset that applies a staged NIC flash is) is baremetal-operator's
// reboot annotation on the machine's BareMetalHost,
// and the BMC is never dialled: the host names a BMC whose credentials
// do not exist, so a dial would fail.
func TestARebootThroughTheHostIsBMOsAnnotation(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = infrav1.AddToScheme(scheme)
	_ = metal3.AddToScheme(scheme)
	host := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "node-0"},
		Spec: metal3.BareMetalHostSpec{BMC: metal3.BMCDetails{Address: "redfish-virtualmedia+https://127.0.0.1:1/redfish/v1/Systems/x", CredentialsName: "missing"}}}
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}, Status: infrav1.BareMetalMachineStatus{Host: "node-0"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(host, bmm, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}).Build()
	ctx := context.Background()
	if err := (&Updater{Client: c}).reboot(ctx, bmm, nil, false); err == nil {
		t.Fatal("a reboot through the BMC found credentials that do not exist")
	}
	u := &Updater{Client: c, PowerThroughHost: true}
	for _, c2 := range []struct {
		force bool
		want  string
	}{{false, `{"mode":"soft"}`}, {true, `{"mode":"hard"}`}} {
		if err := u.reboot(ctx, bmm, nil, c2.force); err != nil {
			t.Fatal(err)
		}
		got := &metal3.BareMetalHost{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(host), got); err != nil {
			t.Fatal(err)
		}
		if a := got.Annotations[metal3.RebootAnnotationPrefix]; a != c2.want {
			t.Errorf("force %v: reboot annotation %q, want %s", c2.force, a, c2.want)
		}
	}
}
