package workload

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestARemovedFeatureGateIsRefusedFromItsReleaseOn(t *testing.T) {
	gate := ExtraArgs{"feature-gates": "ServiceTrafficDistribution=true"}
	for _, tc := range []struct {
		version string
		args    ExtraArgs
		want    string // a part of the refusal; "" starts
	}{
		{"v1.35.3", gate, ""},
		{"v1.36.3", gate, "unrecognized feature gate: ServiceTrafficDistribution"},
		{"v1.37.0", gate, "unrecognized feature gate: ServiceTrafficDistribution"},
		// The gate that is gone is named among others still there.
		{"v1.36.3", ExtraArgs{"feature-gates": "MutatingAdmissionPolicy=true, WatchFromStorageWithoutResourceVersion=false"},
			"unrecognized feature gate: WatchFromStorageWithoutResourceVersion"},
		{"v1.36.3", ExtraArgs{"feature-gates": "MutatingAdmissionPolicy=true", "audit-log-maxage": "30"}, ""},
		{"v1.36.3", nil, ""},
	} {
		got := removals.refusal(tc.version, KubeAPIServer, tc.args)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("kube-apiserver %s with %v: refusal %q, want one with %q", tc.version, tc.args, got, tc.want)
		}
	}
}

// A removed flag is refused by its component from its release on, and
// only by it (the shipped table has no flag row: v1.36 removed none).
func TestARemovedFlagIsRefusedByItsComponent(t *testing.T) {
	table := removalTable{"v1.36": {flags: map[string][]string{KubeControllerManager: {"old-flag"}}}}
	args := ExtraArgs{"old-flag": "x", "v": "2"}
	for _, tc := range []struct {
		version, component, want string
	}{
		{"v1.35.3", KubeControllerManager, ""},
		{"v1.36.3", KubeControllerManager, "Error: unknown flag: --old-flag"},
		{"v1.36.3", KubeScheduler, ""},
	} {
		if got := table.refusal(tc.version, tc.component, args); got != tc.want {
			t.Errorf("%s %s with %v: refusal %q, want %q", tc.component, tc.version, args, got, tc.want)
		}
	}
}

func TestExtraArgsAreReadInBothKubeadmForms(t *testing.T) {
	for _, doc := range []string{
		// v1beta4, as CABPK and KCP write it for v1.31 on.
		"apiServer:\n  extraArgs:\n  - name: feature-gates\n    value: ServiceTrafficDistribution=true\n",
		// v1beta3.
		"apiServer:\n  extraArgs:\n    feature-gates: ServiceTrafficDistribution=true\n",
	} {
		cc, err := ParseClusterConfiguration(doc)
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got := cc.Args()[KubeAPIServer]["feature-gates"]; got != "ServiceTrafficDistribution=true" {
			t.Errorf("%q: kube-apiserver's feature-gates %q", doc, got)
		}
	}
	if _, err := ParseClusterConfiguration("apiServer:\n  extraArgs: 3\n"); err == nil || !strings.Contains(err.Error(), "extraArgs") {
		t.Errorf("extraArgs: 3 read with error %v, want one naming extraArgs", err)
	}
}

// An API server whose release removed a feature gate its manifest names
// crash-loops on that node, takes no traffic, and KCP's own judgement
// of the static pods finds it failed, with the binary's words.
func TestAnAPIServerRefusingItsFlagsCrashLoopsAsKCPSeesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, next := Release{Kubernetes: "v1.35.3", Etcd: "3.6.4-0"}, Release{Kubernetes: "v1.36.3", Etcd: "3.6.5-0"}
	args := StaticPodArgs{KubeAPIServer: {"feature-gates": "ServiceTrafficDistribution=true"}}
	c, clusterCA, etcdCA, cs := controlPlaneCluster(t, ctx, old)
	for _, j := range []struct {
		node string
		rel  Release
	}{{"cp-1", old}, {"cp-2", next}} {
		if err := c.JoinControlPlane(ctx, "default/wl", j.node, j.rel, args, clusterCA, etcdCA); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cp-0", "cp-1", "cp-2"} {
		if err := c.SetNode(ctx, "default/wl", NodeInfo{Name: n, ControlPlane: true, KubeletVersion: "v1.35.3", Ready: true}); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	running := c.clusters["default/wl"].runningAPIServers()
	c.mu.Unlock()
	if strings.Join(running, " ") != "cp-0 cp-1" {
		t.Errorf("API servers taking traffic: %v, want cp-0 and cp-1 (cp-2's v1.36.3 refuses the gate)", running)
	}

	cp := kcpJudges(t, ctx, c, "cp-1", "cp-2")
	if c := meta.FindStatusCondition(cp.Machines["m-cp-1"].Status.Conditions, controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("cp-1 (v1.35.3 still has the gate): APIServerPodHealthy %+v", c)
	}
	got := meta.FindStatusCondition(cp.Machines["m-cp-2"].Status.Conditions, controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition)
	if got == nil || got.Status != metav1.ConditionFalse || got.Reason != controlplanev1.KubeadmControlPlaneMachinePodFailedReason || got.Message != "CrashLoopBackOff" {
		t.Errorf("cp-2: KCP's APIServerPodHealthy %+v, want False, PodFailed, CrashLoopBackOff", got)
	}
	if c := meta.FindStatusCondition(cp.Machines["m-cp-2"].Status.Conditions, controlplanev1.KubeadmControlPlaneMachineControllerManagerPodHealthyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("cp-2's controller manager, given no flag: %+v", c)
	}
	pod, err := cs.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-cp-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := pod.Status.ContainerStatuses; len(st) != 1 || st[0].LastTerminationState.Terminated == nil ||
		!strings.Contains(st[0].LastTerminationState.Terminated.Message, "unrecognized feature gate: ServiceTrafficDistribution") {
		t.Errorf("kube-apiserver-cp-2's container statuses %+v, want its last words", st)
	}

	// With the others gone, nothing answers on the VIP: connection
	// refused, not an API error.
	for _, n := range []string{"cp-0", "cp-1"} {
		if err := c.StopNode(ctx, "default/wl", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the API with only cp-2's crash-looping server: %v, want connection refused", err)
	}
}

// kcpJudges runs KCP's UpdateStaticPodConditions over Machines m-<node>
// of the given nodes, through the cluster's VIP.
func kcpJudges(t *testing.T, ctx context.Context, c *Clusters, nodes ...string) *pkg.ControlPlane {
	t.Helper()
	cfg, err := c.AdminConfig("default/wl")
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	wl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var machines []*clusterv1.Machine
	for _, n := range nodes {
		machines = append(machines, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m-" + n},
			Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: n}}})
	}
	cp := &pkg.ControlPlane{KCP: &controlplanev1.KubeadmControlPlane{}, Cluster: &clusterv1.Cluster{}, Machines: collections.FromMachines(machines...)}
	(&pkg.Workload{Client: wl}).UpdateStaticPodConditions(ctx, cp)
	return cp
}
