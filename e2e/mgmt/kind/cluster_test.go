package kind

import (
	"io"
	"os"
	"os/exec"
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
	_, err := Start("upgradelab-test", "", filepath.Join(dir, "kubeconfig"), logPath, io.Discard)
	if err == nil {
		t.Fatal("Start succeeded without a container engine")
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
	if name, ok := Of(path); ok {
		t.Errorf("kindOf = %q for context admin@prod", name)
	}
	t.Setenv("PATH", t.TempDir())
	writeKubeconfig(t, path, "kind-gone")
	if name, ok := Of(path); ok {
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

// The node image script stops at the step that failed and names that
// step and its log: here the container engine, with no Docker and an
// apt-get that fails (fakes on PATH; nothing is installed).
func TestNodeImageScriptNamesTheFailedStepAndItsLog(t *testing.T) {
	fake := t.TempDir()
	for _, name := range []string{"docker", "apt-get"} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\necho \"$0: refused\" >&2\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "..", "..", "scripts", "build-kind-node-image.sh"))
	// No /usr/sbin: no dockerd to start, so the script tries apt-get.
	cmd.Env = append(os.Environ(), "PATH="+fake+":/usr/bin:/bin", "UPGRADELAB_CACHE="+cache)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the script succeeded with no container engine:\n%s", out)
	}
	log := filepath.Join(cache, "kind", "container-runtime.log")
	for _, want := range []string{"step 'container-runtime' failed; log: " + log, "step 'apt-update' failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "apt.log") {
		t.Errorf("%s does not point at apt-get's log: %s", log, b)
	}
}
