package singlenode

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/inplace/askcp"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// A trigger cut short after its first write (the Machine marked
// update-in-progress, as a crash there leaves it) is completed by the
// next one: the desired objects written and marked, the hook pending,
// the mark not written twice.
func TestATriggerCutShortIsCompleted(t *testing.T) {
	ctx := context.Background()
	oldImage := infrav1.Image{URL: "http://images/old", Checksum: strings.Repeat("a", 64)}
	newImage := infrav1.Image{URL: "http://images/new", Checksum: strings.Repeat("b", 64)}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0",
			Annotations: map[string]string{clusterv1.UpdateInProgressAnnotation: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: "c", Version: "v1.35.3"},
	}
	bmm := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0"}, Spec: infrav1.BareMetalMachineSpec{Image: oldImage}}
	kc := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(machine, bmm, kc).WithReturnManagedFields().Build()

	desiredMachine := machine.DeepCopy()
	desiredMachine.Annotations = nil
	desiredMachine.Spec.Version = "v1.36.3"
	desiredInfra := &unstructured.Unstructured{}
	desiredInfra.SetGroupVersionKind(infrav1.GroupVersion.WithKind("BareMetalMachine"))
	desiredInfra.SetNamespace("ns")
	desiredInfra.SetName("cp-0")
	if err := unstructured.SetNestedStringMap(desiredInfra.Object, map[string]string{"url": newImage.URL, "checksum": newImage.Checksum}, "spec", "image"); err != nil {
		t.Fatal(err)
	}
	desiredKC := kc.DeepCopy()
	desiredKC.Spec.ClusterConfiguration.FeatureGates = map[string]bool{"A": true}
	res := &pkg.UpToDateResult{DesiredMachine: desiredMachine, DesiredInfraMachine: desiredInfra, DesiredKubeadmConfig: desiredKC}

	r := &Reconciler{Client: c}
	stored := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(machine), stored); err != nil {
		t.Fatal(err)
	}
	if !(decide(facts{optedIn: true, oneMachine: true, pausedByUs: true, updating: true, hookPending: hookPending(stored)}) == completeTrigger) {
		t.Fatal("a marked Machine without its hook pending is not taken for a trigger cut short")
	}
	if err := r.trigger(ctx, stored, res); err != nil {
		t.Fatal(err)
	}

	if err := c.Get(ctx, client.ObjectKeyFromObject(machine), stored); err != nil {
		t.Fatal(err)
	}
	if !hookPending(stored) || stored.Annotations[runtimev1.PendingHooksAnnotation] != "UpdateMachine" {
		t.Errorf("pending hooks %q, want UpdateMachine", stored.Annotations[runtimev1.PendingHooksAnnotation])
	}
	if _, ok := stored.Annotations[clusterv1.UpdateInProgressAnnotation]; !ok || stored.Spec.Version != "v1.36.3" {
		t.Errorf("Machine: annotations %v, version %s", stored.Annotations, stored.Spec.Version)
	}
	gotBMM := &infrav1.BareMetalMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bmm), gotBMM); err != nil {
		t.Fatal(err)
	}
	if _, ok := gotBMM.Annotations[clusterv1.UpdateInProgressAnnotation]; !ok || gotBMM.Spec.Image != newImage {
		t.Errorf("BareMetalMachine: annotations %v, image %v", gotBMM.Annotations, gotBMM.Spec.Image)
	}
	gotKC := &bootstrapv1.KubeadmConfig{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kc), gotKC); err != nil {
		t.Fatal(err)
	}
	if _, ok := gotKC.Annotations[clusterv1.UpdateInProgressAnnotation]; !ok || !gotKC.Spec.ClusterConfiguration.FeatureGates["A"] {
		t.Errorf("KubeadmConfig: annotations %v, feature gates %v", gotKC.Annotations, gotKC.Spec.ClusterConfiguration.FeatureGates)
	}
	appliedByKCPAlone(t, stored, gotBMM, gotKC)

	// Again: nothing is marked twice.
	if err := r.trigger(ctx, stored, res); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(machine), stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.Annotations[runtimev1.PendingHooksAnnotation]; got != "UpdateMachine" {
		t.Errorf("after a second trigger, pending hooks %q", got)
	}
}

// appliedByKCPAlone fails t unless each object was applied by KCP's
// field manager and no other.
func appliedByKCPAlone(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		var appliers []string
		for _, mf := range o.GetManagedFields() {
			if mf.Operation == metav1.ManagedFieldsOperationApply {
				appliers = append(appliers, mf.Manager)
			}
		}
		if len(appliers) != 1 || appliers[0] != askcp.FieldManager {
			t.Errorf("%T %s applied by %v, want KCP's manager alone: the fields KCP manages would become co-owned", o, o.GetName(), appliers)
		}
	}
}

// The preflight check passes a Machine whose node runs its static pods
// Ready, and names what fails otherwise: a pod not ready, a Machine a
// health check found unhealthy, one being deleted.
func TestPreflightIsKCPs(t *testing.T) {
	ctx := context.Background()
	scheme := testScheme(t)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	pod := func(component string, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: component + "-n0"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp"}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	healthy := func() *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0"},
			Status:     clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "n0"}},
		}
	}
	for _, tc := range []struct {
		name       string
		apiserver  corev1.ConditionStatus
		machine    func(*clusterv1.Machine)
		wantFailed string
	}{
		{"healthy", corev1.ConditionTrue, nil, ""},
		{"API server pod not ready", corev1.ConditionFalse, nil, "APIServerPodHealthy"},
		{"unhealthy by a MachineHealthCheck", corev1.ConditionTrue, func(m *clusterv1.Machine) {
			m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse, Reason: "UnhealthyNode", Message: "NotReady 5m"}}
		}, "is unhealthy (UnhealthyNode"},
		{"being deleted", corev1.ConditionTrue, func(m *clusterv1.Machine) {
			now := metav1.Now()
			m.DeletionTimestamp = &now
		}, "is being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node,
				pod("kube-apiserver", tc.apiserver), pod("kube-controller-manager", corev1.ConditionTrue),
				pod("kube-scheduler", corev1.ConditionTrue), pod("etcd", corev1.ConditionTrue)).Build()
			r := &Reconciler{Workloads: oneWorkload{wl}}
			m := healthy()
			if tc.machine != nil {
				tc.machine(m)
			}
			failed, err := r.preflight(ctx, cluster, kcp, m)
			if err != nil {
				t.Fatal(err)
			}
			if (tc.wantFailed == "") != (failed == "") || !strings.Contains(failed, tc.wantFailed) {
				t.Fatalf("preflight failed with %q, want %q", failed, tc.wantFailed)
			}
		})
	}
}

type oneWorkload struct{ c client.Client }

func (w oneWorkload) Client(context.Context, string, string) (client.Client, error) { return w.c, nil }
