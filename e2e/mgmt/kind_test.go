package mgmt

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without a container engine the kind target fails at its first step,
// naming the step, what to do and the log kind wrote to.
func TestKindWithoutAnEngineNamesTheStepAndItsLog(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no docker to find
	dir := t.TempDir()
	logPath := filepath.Join(dir, "kind.log")
	_, err := startKind(Target{Kind: KindCluster, Cluster: "upgradelab-test"}, "", filepath.Join(dir, "kubeconfig"), logPath, io.Discard)
	if err == nil {
		t.Fatal("startKind succeeded without a container engine")
	}
	for _, want := range []string{"kind cluster upgradelab-test", `step "list clusters`, "scripts/container-runtime.sh", "log: " + logPath} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A kubeconfig whose context is not kind's is no kind cluster.
func TestKindOfIgnoresOtherContexts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, path, "admin@prod")
	if name, ok := kindOf(path); ok {
		t.Errorf("kindOf = %q for context admin@prod", name)
	}
	t.Setenv("PATH", t.TempDir())
	writeKubeconfig(t, path, "kind-gone")
	if name, ok := kindOf(path); ok {
		t.Errorf("kindOf = %q for a kind context whose cluster kind cannot list", name)
	}
}

func writeKubeconfig(t *testing.T, path, context string) {
	t.Helper()
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: x}
contexts:
- name: ` + context + `
  context: {cluster: c, user: u}
current-context: ` + context + "\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
