//go:build integration

// A real plane (kube-apiserver, etcd, CAPI's managers: make tools) runs
// these tests; make test-integration runs them, make test does not.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/runner"
)

// A user's sandbox with `upgradelab up`: the sandbox comes up, kubectl
// applies the rendered cluster and, once it is up, the rendered upgrade;
// Ctrl-C (the context's end) stops the sandbox; `upgradelab check` judges
// what was recorded. The upgrade step was recorded by the sandbox
// itself, so the rules that follow the upgrade judged it: same-machines
// passes (an in-place upgrade), and a timeline from a sandbox stopped
// before any upgrade leaves them not exercised.
// Both forms: the plain cluster (kubectl creates the KubeadmControlPlane)
// and the ClusterClass one (kubectl creates the class and a Cluster with
// a topology; the upgrade is its version bump).
func TestUpSandboxDrivenByKubectlIsJudgedByCheck(t *testing.T) {
	for _, c := range []struct{ form, created string }{
		{"plain", "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/sc-cp created"},
		{"clusterclass", "clusterclass.cluster.x-k8s.io/"},
	} {
		t.Run(c.form, func(t *testing.T) {
			t.Parallel()
			testUpSandbox(t, c.form, c.created)
		})
	}
}

func testUpSandbox(t *testing.T, form, created string) {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl: %v (make tools builds it into KUBEBUILDER_ASSETS)", err)
	}
	dir := t.TempDir()
	upCtx, stop := context.WithCancel(context.Background())
	defer stop()
	out := &lockedWriter{w: &bytes.Buffer{}}
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand()
		cmd.SetOut(out)
		cmd.SetErr(out)
		cmd.SetArgs([]string{"up", "../../scenarios/single-node-in-place.yaml", "--form", form, "--artifacts", dir})
		done <- cmd.ExecuteContext(upCtx)
	}()
	// A cold build of the provider and the extension beside the other
	// packages' tests can take minutes on two cores; the sandbox's five
	// minutes count from when the binaries are there.
	build, cancelBuild := context.WithTimeout(upCtx, 15*time.Minute)
	defer cancelBuild()
	waitOutput(t, build, out, referenceReady, done)
	ctx, cancel := context.WithTimeout(upCtx, 5*time.Minute)
	defer cancel()
	var sb runner.Sandbox
	for {
		if data, err := os.ReadFile(filepath.Join(dir, runner.SandboxFile)); err == nil && json.Unmarshal(data, &sb) == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("upgradelab up ended: %v\n%s", err, out)
		case <-ctx.Done():
			t.Fatalf("no %s: %s", runner.SandboxFile, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, want := range []string{"export KUBECONFIG=" + sb.Kubeconfig, "kubectl apply -f " + sb.ClusterFile, "upgradelab check " + dir} {
		waitOutput(t, ctx, out, want, nil)
	}
	kube := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, kubectl, args...)
		c.Env = append(os.Environ(), "KUBECONFIG="+sb.Kubeconfig)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	c := sandboxClient(t, sb.Kubeconfig)

	if got := kube("apply", "-f", sb.ClusterFile); !strings.Contains(got, created) {
		t.Fatalf("kubectl apply of the %s cluster: want %q in %s", form, created, got)
	}
	waitMachines(t, ctx, c, sb, sb.From)
	if got := kube("get", "machines", "-n", sb.Namespace); !strings.Contains(got, sb.From) {
		t.Fatalf("kubectl get machines: %s", got)
	}
	kube("apply", "-f", sb.UpgradeFile)
	waitMachines(t, ctx, c, sb, sb.To)
	waitOutput(t, ctx, out, "upgrade step recorded", nil)
	waitOutput(t, ctx, out, "upgrade done: every Machine up to date at "+sb.To, nil)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("upgradelab up: %v\n%s", err, out)
	}

	verdict, err := runCLI(t, "check", dir)
	if err != nil {
		t.Fatalf("check of the sandbox: %v\n%s", err, verdict)
	}
	for _, rule := range []string{"same-machines", "end-machines-up-to-date", "end-etcd", "end-coredns", "rbac-sufficient", "capi-agrees"} {
		if !regexp.MustCompile(`(?m)^` + rule + ` +pass `).MatchString(verdict) {
			t.Errorf("%s did not pass on the sandbox's timeline:\n%s", rule, verdict)
		}
	}
}

func sandboxClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: reference.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitMachines waits until the cluster has Machines, every one at
// version, up to date, with no update in progress and its Node's kubelet
// at version.
func waitMachines(t *testing.T, ctx context.Context, c client.Client, sb runner.Sandbox, version string) {
	t.Helper()
	last := ""
	for {
		ms := &clusterv1.MachineList{}
		if err := c.List(ctx, ms, client.InNamespace(sb.Namespace)); err == nil {
			ok := len(ms.Items) > 0
			var states []string
			for _, m := range ms.Items {
				up := false
				for _, cond := range m.Status.Conditions {
					if cond.Type == clusterv1.MachineUpToDateCondition && cond.Status == "True" {
						up = true
					}
				}
				updating := false
				for _, cond := range m.Status.Conditions {
					if cond.Type == clusterv1.MachineUpdatingCondition && cond.Status == "True" {
						updating = true
					}
				}
				kubelet := ""
				if m.Status.NodeInfo != nil {
					kubelet = m.Status.NodeInfo.KubeletVersion
				}
				ok = ok && m.Spec.Version == version && up && !updating && kubelet == version
				states = append(states, fmt.Sprintf("%s %s upToDate=%v updating=%v kubelet=%s", m.Name, m.Spec.Version, up, updating, kubelet))
			}
			if ok {
				return
			}
			last = strings.Join(states, "; ")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("machines at %s: %s", version, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitOutput waits until up has printed want, failing at ctx's end or
// when up ends first (on done, when given).
func waitOutput(t *testing.T, ctx context.Context, out *lockedWriter, want string, done <-chan error) {
	t.Helper()
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("upgradelab up ended before it printed %q: %v\n%s", want, err, out)
		case <-ctx.Done():
			t.Fatalf("upgradelab up never printed %q:\n%s", want, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
