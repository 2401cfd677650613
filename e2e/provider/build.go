package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// Process describes a manager that is not one of upgradelab's own to the
// management plane: its executable (built into cacheDir when it comes
// from a module, and only then: a cached build of the same module version
// is reused) and its manifests. repoRoot is this repository, whose go.mod
// pins the module.
func (c *Config) Process(ctx context.Context, m Manager, repoRoot, cacheDir string) (mgmt.Provider, error) {
	p := mgmt.Provider{Name: m.Name, Args: m.Args, FeatureGates: m.FeatureGates, RuntimeExtension: m.RuntimeExtension, ExtensionSettings: m.Settings,
		ExtensionNamespaceLabels: m.NamespaceLabels}
	keys := make([]string, 0, len(m.Env))
	for k := range m.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.Env = append(p.Env, k+"="+m.Env[k])
	}
	base := filepath.Dir(c.path)
	switch {
	case m.Package != "":
		dir, version, err := moduleDir(ctx, repoRoot, m.Module)
		if err != nil {
			return p, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
		}
		bin := filepath.Join(cacheDir, "bin", strings.ReplaceAll(m.Module, "/", "_")+"@"+version, m.Name)
		if err := buildOnce(ctx, repoRoot, m.Module+"/"+m.Package, bin); err != nil {
			return p, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
		}
		p.Binary = bin
		base = dir
	case m.Binary != "":
		p.Binary = c.resolve(m.Binary)
		if _, err := os.Stat(p.Binary); err != nil {
			return p, fmt.Errorf("%s: managers %s: binary: %w", c.path, m.Name, err)
		}
	default:
		return p, fmt.Errorf("%s: managers %s: reference %q is wired by the harness, not started from the config", c.path, m.Name, m.Reference)
	}
	if m.Config != "" {
		p.ConfigDir = m.Config
		if !filepath.IsAbs(p.ConfigDir) {
			p.ConfigDir = filepath.Join(base, m.Config)
		}
		if _, err := os.Stat(filepath.Join(p.ConfigDir, "crd", "bases")); err != nil {
			return p, fmt.Errorf("%s: managers %s: config: %s has no crd/bases", c.path, m.Name, p.ConfigDir)
		}
	}
	return p, nil
}

// moduleDir is where the Go module cache holds the version of module that
// repoRoot's go.mod pins, downloading it first when it is not there yet.
func moduleDir(ctx context.Context, repoRoot, module string) (dir, version string, err error) {
	for attempt := 0; ; attempt++ {
		cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}\t{{.Version}}", module)
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", "", fmt.Errorf("module %s is not required by %s/go.mod: %s", module, repoRoot, strings.TrimSpace(string(out)))
		}
		fields := strings.Split(strings.TrimSpace(string(out)), "\t")
		if len(fields) == 2 && fields[0] != "" {
			return fields[0], fields[1], nil
		}
		if attempt > 0 {
			return "", "", fmt.Errorf("module %s: go list names no folder after downloading it", module)
		}
		dl := exec.CommandContext(ctx, "go", "mod", "download", module)
		dl.Dir = repoRoot
		if msg, err := dl.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("downloading %s: %s", module, msg)
		}
	}
}

// buildOnce builds pkg into out unless out exists. Builders of the same
// out (a parallel suite's processes, a build started in the background
// and a run that needs it) take turns on a lock beside it, so the
// second finds the first's binary instead of building it again.
func buildOnce(ctx context.Context, repoRoot, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // closing releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	return build(ctx, repoRoot, pkg, out)
}

func build(ctx context.Context, repoRoot, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out+".tmp"+strconv.Itoa(os.Getpid()), pkg)
	cmd.Dir = repoRoot
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, msg)
	}
	return os.Rename(out+".tmp"+strconv.Itoa(os.Getpid()), out)
}
