package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// A manager built from source takes minutes to build cold. A run that
// needs one waits for it before its scenario's clock starts: here the
// build is held (as by another process building the same binary) twice
// as long as the scenario's whole timeout, and the run must still reach
// its first step with its clock intact. What stops it then is the
// manager's config, which has no RBAC on purpose, so no plane starts.
func TestABuildDoesNotCountAgainstTheScenarioTimeout(t *testing.T) {
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPGRADELAB_CACHE", t.TempDir())
	cfg, m := idleProvider(t)
	s, def, err := plan.Load(filepath.Join(root, "scenarios", "three-node-scale-in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.Timeout.Duration = 2 * time.Second

	exe, err := cfg.Executable(t.Context(), m, root, os.Getenv("UPGRADELAB_CACHE"))
	if err != nil {
		t.Fatal(err)
	}
	held := holdBuild(t, exe, 2*s.Timeout.Duration)

	var progress strings.Builder
	start := time.Now()
	res := Run(context.Background(), s, def, scenario.Plain, Options{RepoRoot: root, Dir: labtest.Dir(t), Scale: timescale.Scale(0.01),
		Progress: &progress, Provider: cfg})
	waited := time.Since(start)
	<-held
	if waited < 2*s.Timeout.Duration-100*time.Millisecond {
		t.Fatalf("the run ended after %s, before the build it needed was let go", waited)
	}
	if strings.Contains(res.Error, "ran out") || !strings.Contains(res.Error, "has no rbac/") {
		t.Fatalf("the run stopped with %q, want it past the build and stopped by the manager's config (progress:\n%s)", res.Error, progress.String())
	}
	lines := progress.String()
	if b, s1 := strings.Index(lines, "building idle's manager idle"), strings.Index(lines, "step 1/6"); b < 0 || s1 < 0 || b > s1 {
		t.Errorf("want the build announced before step 1, got:\n%s", lines)
	}
}

// idleProvider is a provider config without the lab whose one manager is
// built from a local checkout and has a config folder without RBAC.
func idleProvider(t *testing.T) (*provider.Config, provider.Manager) {
	dir := t.TempDir()
	files := map[string]string{
		"idle/go.mod":  "module example.test/idle\n\ngo 1.22\n",
		"idle/main.go": "package main\n\nfunc main() {}\n",
		"idle.yaml": `name: idle
lab: false
managers:
- name: idle
  checkout: idle
  package: .
  config: config
clusterTemplates: templates
strategies: [scale-in]
`,
	}
	for _, f := range provider.TemplateFiles {
		files["templates/"+f] = ""
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "idle", "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := provider.Load(filepath.Join(dir, "idle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cfg.Managers[0]
}

// holdBuild takes the lock builders of exe take turns on, as another
// process building it would, and lets it go after d; the channel closes
// then.
func holdBuild(t *testing.T, exe string, d time.Duration) <-chan struct{} {
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(exe+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(d)
		lock.Close()
	}()
	return done
}
