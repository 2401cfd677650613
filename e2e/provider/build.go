package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	case m.Checkout != "":
		dir, err := filepath.Abs(c.resolve(m.Checkout))
		if err != nil {
			return p, err
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			return p, fmt.Errorf("%s: managers %s: checkout: %s has no go.mod: %w", c.path, m.Name, dir, err)
		}
		sum := sha256.Sum256([]byte(dir))
		bin := filepath.Join(cacheDir, "bin", "checkout-"+hex.EncodeToString(sum[:6]), m.Name)
		if err := buildLocked(ctx, buildSpec{dir: dir, pkg: "./" + strings.TrimPrefix(m.Package, "./"), out: bin, always: true}); err != nil {
			return p, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
		}
		p.Binary = bin
		base = dir
	case m.Package != "":
		buildDir := repoRoot
		if m.Version != "" {
			wrapper, err := wrapperModule(cacheDir, m.Module, m.Version)
			if err != nil {
				return p, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
			}
			buildDir = wrapper
		}
		dir, version, err := moduleDir(ctx, buildDir, m.Module)
		if err != nil {
			return p, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
		}
		bin := filepath.Join(cacheDir, "bin", strings.ReplaceAll(m.Module, "/", "_")+"@"+version, m.Name)
		if err := buildLocked(ctx, buildSpec{dir: buildDir, pkg: m.Module + "/" + m.Package, out: bin, wrapper: m.Version != ""}); err != nil {
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
		if _, err := os.Stat(filepath.Join(p.ConfigDir, "rbac")); err != nil {
			return p, fmt.Errorf("%s: managers %s: config: %s has no rbac/ (the manager's ServiceAccount and permissions; docs/PROVIDERS.md, \"RBAC\")", c.path, m.Name, p.ConfigDir)
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

// wrapperModule is a module of its own under cacheDir that requires
// module at version and nothing else: building there, the module's own
// go.mod decides its dependencies (with -mod=mod, Go adds what it needs),
// not this repository's, as the kube binaries are built.
func wrapperModule(cacheDir, module, version string) (string, error) {
	dir := filepath.Join(cacheDir, "src", strings.ReplaceAll(module, "/", "_")+"@"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gomod := filepath.Join(dir, "go.mod")
	if _, err := os.Stat(gomod); err == nil {
		return dir, nil
	}
	content := "// Built by upgradelab (e2e/provider): " + module + " at " + version + " with its own dependencies.\nmodule upgradelab.local/wrapper\n\nrequire " + module + " " + version + "\n"
	return dir, os.WriteFile(gomod, []byte(content), 0o644)
}

// buildSpec is one build: pkg from dir into out. always builds even when
// out exists (a checkout may have changed); wrapper is a wrapper module,
// which adds the requirements the build needs to its go.mod.
type buildSpec struct {
	dir, pkg, out   string
	always, wrapper bool
}

// buildLocked runs b. Builders of the same out (a parallel suite's
// processes, a build started in the background and a run that needs it)
// take turns on a lock beside it; unless b.always, the second finds the
// first's binary instead of building it again.
func buildLocked(ctx context.Context, b buildSpec) error {
	if err := os.MkdirAll(filepath.Dir(b.out), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(b.out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // closing releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(b.out); err == nil && !b.always {
		return nil
	}
	return build(ctx, b)
}

func build(ctx context.Context, b buildSpec) error {
	tmp := b.out + ".tmp" + strconv.Itoa(os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, b.pkg)
	cmd.Dir = b.dir
	// GOWORK=off: no workspace of the user's mixes in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b.wrapper {
		cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod")
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s in %s: %v\n%s", b.pkg, b.dir, err, msg)
	}
	return os.Rename(tmp, b.out)
}
