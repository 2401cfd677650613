//go:build integration

// A real plane (kube-apiserver, etcd, CAPI's managers: make tools) runs
// these tests; make test-integration runs them, make test does not.

package mgmt

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests run the real plane: kube-apiserver, etcd and the three CAPI
// managers. `make test-integration` builds what they need first (`make
// tools`).

func startPlane(t *testing.T) *Plane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	p, err := Start(ctx, Options{ArtifactsDir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatalf("starting the management plane: %v\n%s", err, progress.String())
	}
	t.Cleanup(p.Stop)
	return p
}

func TestPlaneRunsCAPIWebhooksAndControllers(t *testing.T) {
	p := startPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := p.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plane-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	t.Run("CAPI's managers run without their reconcile rate limit unless asked", func(t *testing.T) {
		checkNoRateLimit(t, p)
	})

	t.Run("KCP validation refuses maxSurge 0 with one replica", func(t *testing.T) {
		kcp := newKCP(ns.Name, "single", 1)
		kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		err := c.Create(ctx, kcp)
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create KCP with replicas 1, maxSurge 0: got %v, want KCP's Invalid error", err)
		}
		const want = "when KubeadmControlPlane is configured to scale-in, replica count needs to be at least 3"
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not carry KCP's message %q", err, want)
		}
	})

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "plane"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "plane-cp",
			},
		},
	}
	kcp := newKCP(ns.Name, "plane-cp", 3)
	kcp.Spec.Version = "1.36.0" // KCP's defaulting adds the "v"

	t.Run("a Cluster with a KubeadmControlPlane is accepted and defaulted", func(t *testing.T) {
		checkKCPDefaulted(t, ctx, c, kcp, cluster)
	})

	t.Run("the core controller reconciles the Cluster", func(t *testing.T) {
		checkClusterReconciled(t, ctx, c, cluster)
	})

	t.Run("the conversion webhook serves v1beta1", func(t *testing.T) {
		old := &unstructured.Unstructured{}
		old.SetAPIVersion("cluster.x-k8s.io/v1beta1")
		old.SetKind("Cluster")
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), old); err != nil {
			t.Fatalf("read the Cluster as v1beta1 (through the core manager's /convert): %v", err)
		}
		kind, _, _ := unstructured.NestedString(old.Object, "spec", "controlPlaneRef", "kind")
		if kind != "KubeadmControlPlane" {
			t.Fatalf("v1beta1 spec.controlPlaneRef.kind = %q, want KubeadmControlPlane", kind)
		}
	})

	t.Run("CPU names each process of this plane with the time it used", func(t *testing.T) {
		got := map[string]time.Duration{}
		for _, pc := range p.CPU() {
			got[pc.Name] = pc.CPU
		}
		for _, name := range []string{"kube-apiserver", "etcd", "capi", "kcp", "cabpk"} {
			if got[name] <= 0 {
				t.Errorf("CPU() = %v: no time for %s", got, name)
			}
		}
	})

	t.Run("after a kube-apiserver crash and restart, objects stay and the managers work on", func(t *testing.T) {
		checkRestartKeepsObjects(t, ctx, p, cluster)
	})

	t.Run("a kube-apiserver that crashes on its own is started again, as the kubelet restarts a static Pod", func(t *testing.T) {
		checkCrashRestarted(t, ctx, p, ns.Name)
	})
}

// checkNoRateLimit reads CAPI's managers' command lines: each runs with
// ReconcilerRateLimiting=false, as the plane was started.
func checkNoRateLimit(t *testing.T, p *Plane) {
	t.Helper()
	for _, child := range p.procs[:3] { // capi, kcp, cabpk
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child.PID()))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cmdline), "ReconcilerRateLimiting=false") {
			t.Errorf("%s runs with %q; want ReconcilerRateLimiting=false among its --feature-gates", child.Name, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// checkKCPDefaulted creates kcp and cluster: accepted, and KCP's
// defaulting fills the version's "v" and the rollout strategy.
func checkKCPDefaulted(t *testing.T, ctx context.Context, c client.Client, kcp *controlplanev1.KubeadmControlPlane, cluster *clusterv1.Cluster) {
	t.Helper()
	if err := c.Create(ctx, kcp); err != nil {
		t.Fatalf("create KCP: %v", err)
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatalf("create Cluster: %v", err)
	}
	got := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kcp), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Version != "v1.36.0" {
		t.Errorf("spec.version = %q, want KCP's defaulting to make it v1.36.0", got.Spec.Version)
	}
	if ms := got.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; ms == nil || ms.IntValue() != 1 {
		t.Errorf("spec.rollout.strategy.rollingUpdate.maxSurge = %v, want the default 1", ms)
	}
	if got.Spec.Rollout.Strategy.Type != controlplanev1.RollingUpdateStrategyType {
		t.Errorf("spec.rollout.strategy.type = %q, want RollingUpdate", got.Spec.Rollout.Strategy.Type)
	}
}

// checkClusterReconciled waits for the core controller's finalizer and
// v1beta2 conditions on cluster.
func checkClusterReconciled(t *testing.T, ctx context.Context, c client.Client, cluster *clusterv1.Cluster) {
	t.Helper()
	var got clusterv1.Cluster
	waitFor(t, ctx, "Cluster finalizer and v1beta2 conditions", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &got); err != nil {
			return false, err.Error()
		}
		hasFinalizer := false
		for _, f := range got.Finalizers {
			hasFinalizer = hasFinalizer || f == clusterv1.ClusterFinalizer
		}
		types := map[string]bool{}
		for _, cond := range got.Status.Conditions {
			types[cond.Type] = cond.Reason != ""
		}
		ok := hasFinalizer && types[clusterv1.AvailableCondition] && types[clusterv1.ClusterControlPlaneAvailableCondition]
		return ok, "finalizers " + strings.Join(got.Finalizers, ",") + ", conditions " + conditionSummary(got.Status.Conditions)
	})
}

// checkRestartKeepsObjects restarts kube-apiserver on its port: cluster
// is still there, and a new Cluster and KCP go through the webhooks and
// get reconciled; the restart asked for is no crash.
func checkRestartKeepsObjects(t *testing.T, ctx context.Context, p *Plane, cluster *clusterv1.Cluster) {
	t.Helper()
	c := p.Client
	// The restarted server binds the same port again: one outside the
	// ephemeral range, which a connection's source port cannot take.
	u, err := url.Parse(p.RESTConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	if port, _ := strconv.Atoi(u.Port()); port >= 32768 {
		t.Fatalf("kube-apiserver listens on %s, in the ephemeral range", u.Host)
	}
	before := p.apiServerPID()
	if err := p.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	after := p.apiServerPID()
	if after == before {
		t.Fatalf("kube-apiserver pid %d before and after the restart", before)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}); err != nil {
		t.Fatalf("the Cluster after the restart: %v", err)
	}
	second := cluster.DeepCopy()
	second.ResourceVersion, second.UID, second.Name = "", "", "plane-2"
	second.Spec.ControlPlaneRef.Name = "plane-2-cp"
	kcp2 := newKCP(cluster.Namespace, "plane-2-cp", 3)
	kcp2.Spec.Version = "v1.36.0"
	if err := c.Create(ctx, kcp2); err != nil {
		t.Fatalf("create KCP after the restart (KCP's webhooks): %v", err)
	}
	if err := c.Create(ctx, second); err != nil {
		t.Fatalf("create Cluster after the restart: %v", err)
	}
	waitFor(t, ctx, "the core controller's finalizer on a Cluster created after the restart", func() (bool, string) {
		got := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(second), got); err != nil {
			return false, err.Error()
		}
		return slices.Contains(got.Finalizers, clusterv1.ClusterFinalizer), strings.Join(got.Finalizers, ",")
	})
	if got := p.APIServerCrashes(); len(got) != 0 {
		t.Errorf("the restart the harness asked for counted as a crash: %v", got)
	}
}

// checkCrashRestarted aborts kube-apiserver: the crash is reported with
// the runtime's line, the server is started again and serves KCP's
// webhooks.
func checkCrashRestarted(t *testing.T, ctx context.Context, p *Plane, ns string) {
	t.Helper()
	seen := make(chan APIServerCrash, 1)
	defer p.OnAPIServerCrash(func(c APIServerCrash) { seen <- c })()
	pid := p.apiServerPID()
	// SIGABRT: the Go runtime prints "SIGABRT: abort" and every
	// goroutine, and exits 2, as it does on a panic; nobody in the
	// plane asked for it.
	if err := syscall.Kill(pid, syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	var c APIServerCrash
	select {
	case c = <-seen:
	case <-ctx.Done():
		t.Fatalf("no crash reported after kube-apiserver (pid %d) aborted: %v", pid, ctx.Err())
	}
	if c.PID != pid || c.RestartedPID == 0 || c.RestartedPID == pid || c.Err != "" || !strings.HasPrefix(c.Reason, "SIGABRT: abort") {
		t.Fatalf("crash of pid %d reported as %+v", pid, c)
	}
	if got := p.APIServerCrashes(); len(got) != 1 || got[0].PID != pid {
		t.Fatalf("crashes recorded: %+v", got)
	}
	kcp3 := newKCP(ns, "plane-3-cp", 3)
	kcp3.Spec.Version = "v1.36.0"
	waitFor(t, ctx, "a KCP created through the restarted API server and KCP's webhooks", func() (bool, string) {
		err := callWithin5s(ctx, func(ctx context.Context) error { return p.Client.Create(ctx, kcp3) })
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
	})
	if got := p.Processes(); len(got) == 0 || got[0].Name != "kube-apiserver" || got[0].PID != c.RestartedPID {
		t.Errorf("the plane's processes after the restart: %+v (want kube-apiserver pid %d first)", got, c.RestartedPID)
	}
}

// callWithin5s is one call with its own short deadline, so a wait loop goes on
// while the API server is still coming back.
func callWithin5s(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return call(ctx)
}

func TestPlaneStopLeavesNoProcessAndRestarts(t *testing.T) {
	for round := 1; round <= 2; round++ {
		p := startPlane(t)
		pids := proc.ChildrenOf(os.Getpid())
		if len(pids) < 5 {
			t.Fatalf("round %d: expected kube-apiserver, etcd and three managers as children, found pids %v", round, pids)
		}
		p.Stop()
		for _, pid := range pids {
			if proc.Alive(pid) {
				t.Errorf("round %d: pid %d (%s) still running after Stop", round, pid, proc.Exe(pid))
			}
		}
	}
}

func newKCP(ns, name string, replicas int32) *controlplanev1.KubeadmControlPlane {
	return &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(replicas),
			Version:  "v1.36.0",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.upgradelab.dev", Kind: "BareMetalMachineTemplate", Name: "cp",
					},
				},
			},
		},
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last seen: %s", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func conditionSummary(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+"("+c.Reason+")")
	}
	return strings.Join(parts, " ")
}

// An existing cluster: the plane installs CAPI into it, runs the managers
// against it, and on Stop removes only the webhook configurations that
// would point at managers no longer running.
func TestPlaneOnAnExistingCluster(t *testing.T) {
	bare, err := StartBare(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bare.Stop)
	kubeconfig := bare.Kubeconfig
	target, err := ParseTarget("kubeconfig=" + kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := Start(ctx, Options{Target: target, ArtifactsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if p.Kubeconfig != kubeconfig {
		t.Errorf("plane kubeconfig = %s, want the user's %s", p.Kubeconfig, kubeconfig)
	}
	kcp := newKCP("default", "existing", 1)
	kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
	if err := p.Client.Create(ctx, kcp); !apierrors.IsInvalid(err) {
		t.Fatalf("KCP webhook on the existing cluster: got %v, want Invalid", err)
	}

	// Each manager acts as its ServiceAccount: CAPI's core manager may
	// read Clusters, and may not create a Namespace (its role has no such
	// rule).
	capi, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.LogDir, "kubeconfig-capi"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.New(capi, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.List(ctx, &clusterv1.ClusterList{}); err != nil {
		t.Errorf("CAPI's manager listing Clusters: %v", err)
	}
	if err := cc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-capis"}}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:capi-system:capi-manager"`) {
		t.Errorf("CAPI's manager creating a Namespace: %v; want Forbidden for its ServiceAccount", err)
	}
	// The authorizer's word on each, as Forbidden asks it of a refusal.
	capiSpec := p.managers[0]
	if !p.allowed(ctx, capiSpec, authorizationv1.ResourceAttributes{Verb: "watch", Group: "cluster.x-k8s.io", Resource: "clusters"}) ||
		p.allowed(ctx, capiSpec, authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}) {
		t.Errorf("SubjectAccessReviews for %s: watch clusters must be allowed, create namespaces not", capiSpec.user)
	}

	p.Stop()
	var hooks admissionv1.ValidatingWebhookConfigurationList
	if err := p.Client.List(ctx, &hooks); err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks.Items {
		t.Errorf("webhook configuration %s left behind after Stop", h.Name)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd); err != nil {
		t.Errorf("the Cluster CRD must stay on the existing cluster after Stop: %v", err)
	}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: "capi-manager-role"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("CAPI's manager role left on the existing cluster after Stop: %v", err)
	}
}
