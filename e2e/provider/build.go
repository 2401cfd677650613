package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/sys/unix"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// Process describes a manager that is not one of upgradelab's own to the
// management plane: its executable and its manifests. A manager built
// from source (a module's main package or a local checkout) must have
// been built first ([Config.Build]): Process never builds, so no run's
// clock pays for a build. repoRoot is this repository, whose go.mod pins
// the module.
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
		src, err := c.sourceOf(ctx, m, repoRoot, cacheDir)
		if err != nil {
			return p, err
		}
		if _, err := os.Stat(src.build.out); err != nil {
			return p, fmt.Errorf("%s: managers %s: %s is not built yet (the suite and upgradelab run build it before the first run)", c.path, m.Name, src.what)
		}
		p.Binary, base = src.build.out, src.base
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

// Build makes the executable of m when it is built from source, before
// any run starts it: a cold build takes minutes, and it belongs to no
// scenario's clock. A module version already built is found in cacheDir
// and not built again; a checkout is built on every call (Go's build
// cache makes an unchanged one a link). Each build is announced on
// progress when it starts and when it ends. A manager not built from
// source needs nothing.
func (c *Config) Build(ctx context.Context, m Manager, repoRoot, cacheDir string, progress io.Writer) error {
	if m.Package == "" {
		return nil
	}
	src, err := c.sourceOf(ctx, m, repoRoot, cacheDir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(src.build.out); err == nil && !src.build.always {
		return nil
	}
	hint := "cached per module version; from a cold Go build cache this takes minutes"
	if src.build.always {
		hint = "a checkout: built again by every suite"
	}
	fmt.Fprintf(progress, "building %s's manager %s from %s (%s)\n", c.Name, m.Name, src.what, hint)
	start := time.Now()
	if err := buildLocked(ctx, src.build); err != nil {
		return fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
	}
	fmt.Fprintf(progress, "built %s's manager %s in %s\n", c.Name, m.Name, time.Since(start).Round(time.Second))
	return nil
}

// Executable is where m's executable is built (a manager built from
// source) or found (binary); "" for one of upgradelab's own.
func (c *Config) Executable(ctx context.Context, m Manager, repoRoot, cacheDir string) (string, error) {
	switch {
	case m.Package != "":
		src, err := c.sourceOf(ctx, m, repoRoot, cacheDir)
		return src.build.out, err
	case m.Binary != "":
		return c.resolve(m.Binary), nil
	}
	return "", nil
}

// source is how a manager is built from source.
type source struct {
	build buildSpec
	// base is the folder the manager's config is relative to.
	base string
	// what names it for people: module@version or the checkout.
	what string
}

// sourceOf is m's build: in its checkout with the checkout's go.mod, in
// this repository at the version its go.mod pins, or at m's own version
// in a wrapper module (prepared here, which downloads the module once).
func (c *Config) sourceOf(ctx context.Context, m Manager, repoRoot, cacheDir string) (source, error) {
	if m.Checkout != "" {
		dir, err := filepath.Abs(c.resolve(m.Checkout))
		if err != nil {
			return source{}, err
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			return source{}, fmt.Errorf("%s: managers %s: checkout: %s has no go.mod: %w", c.path, m.Name, dir, err)
		}
		sum := sha256.Sum256([]byte(dir))
		out := filepath.Join(cacheDir, "bin", "checkout-"+hex.EncodeToString(sum[:6]), m.Name)
		return source{build: buildSpec{dir: dir, pkg: "./" + strings.TrimPrefix(m.Package, "./"), out: out, always: true}, base: dir, what: "checkout " + dir}, nil
	}
	buildDir := repoRoot
	if m.Version != "" {
		wrapper, err := wrapperModule(ctx, cacheDir, m.Module, m.Version, m.Module+"/"+m.Package)
		if err != nil {
			return source{}, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
		}
		buildDir = wrapper
	}
	dir, version, err := moduleDir(ctx, buildDir, m.Module)
	if err != nil {
		return source{}, fmt.Errorf("%s: managers %s: %w", c.path, m.Name, err)
	}
	out := filepath.Join(cacheDir, "bin", strings.ReplaceAll(m.Module, "/", "_")+"@"+version, m.Name)
	return source{build: buildSpec{dir: buildDir, pkg: m.Module + "/" + m.Package, out: out}, base: dir, what: m.Module + "@" + version}, nil
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

// wrapperModule is a module of its own under cacheDir in which pkg (a
// package of module) builds at version as the module's own go.mod has
// it, not as this repository's does: the kube binaries are built the
// same way. A dependency's replace directives are ignored by Go, so the
// wrapper restates the module's: one to a local path (a sibling module of
// the same repository, as CAPI's test module replaces sigs.k8s.io/
// cluster-api with ../) becomes a requirement of that module at the same
// version (a repository that tags its modules together, as CAPI does);
// any other is copied.
func wrapperModule(ctx context.Context, cacheDir, module, version, pkg string) (string, error) {
	dir := filepath.Join(cacheDir, "src", strings.ReplaceAll(module, "/", "_")+"@"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Processes preparing the same wrapper take turns.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // closing releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return dir, nil
	}
	goCmd := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, ee.Stderr)
		}
		return out, err
	}
	// An empty module to download theirs from, then theirs restated.
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module upgradelab.local/wrapper\n"), 0o644); err != nil {
		return "", err
	}
	out, err := goCmd("mod", "download", "-json", module+"@"+version)
	if err != nil {
		return "", err
	}
	var dl struct{ GoMod string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.GoMod == "" {
		return "", fmt.Errorf("go mod download %s@%s: no go.mod in %q: %s", module, version, out, fmt.Sprint(err))
	}
	data, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return "", err
	}
	gomod, err := wrapperGoMod(dl.GoMod, data, module, version)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
		return "", err
	}
	// Resolve what pkg imports, adding the missing requirements and
	// go.sum, as a build in the module would.
	if _, err := goCmd("list", "-deps", "-f", "{{.ImportPath}}", pkg); err != nil {
		_ = os.Remove(filepath.Join(dir, "go.sum"))
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil {
		return "", fmt.Errorf("resolving %s in %s wrote no go.sum: %w", pkg, dir, err)
	}
	return dir, nil
}

// wrapperGoMod is the wrapper's go.mod for module at version, whose own
// go.mod (read from path) is theirs: their go version (from go 1.17 on
// the module graph is pruned, so the placeholder versions their locally
// replaced siblings are required at are never loaded), the module, and
// their replace directives restated (see wrapperModule).
func wrapperGoMod(path string, theirs []byte, module, version string) ([]byte, error) {
	their, err := modfile.Parse(path, theirs, nil)
	if err != nil {
		return nil, err
	}
	f := &modfile.File{}
	if err := f.AddModuleStmt("upgradelab.local/wrapper"); err != nil {
		return nil, err
	}
	if their.Go != nil {
		if err := f.AddGoStmt(their.Go.Version); err != nil {
			return nil, err
		}
	}
	if err := f.AddRequire(module, version); err != nil {
		return nil, err
	}
	for _, r := range their.Replace {
		if modfile.IsDirectoryPath(r.New.Path) {
			if err := f.AddRequire(r.Old.Path, version); err != nil {
				return nil, err
			}
			continue
		}
		if err := f.AddReplace(r.Old.Path, r.Old.Version, r.New.Path, r.New.Version); err != nil {
			return nil, err
		}
	}
	f.Cleanup()
	return f.Format()
}

// buildSpec is one build: pkg from dir into out. always builds even when
// out exists (a checkout may have changed).
type buildSpec struct {
	dir, pkg, out string
	always        bool
}

// buildLocked runs b. Builders of the same out (two suites, or a suite
// and upgradelab run, on one machine) take turns on a lock beside it;
// unless b.always, the second finds the first's binary instead of
// building it again.
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
	// GOWORK=off: no workspace of the user's mixes in. Static and
	// -trimpath, as CAPI ships its managers and as
	// scripts/build-capi-managers.sh builds them from this module: a
	// manager built here at this module's versions (CAPD) takes the
	// packages it shares with them (client-go, controller-runtime,
	// CAPI's own) from the build cache instead of compiling them again.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s in %s: %w\n%s", b.pkg, b.dir, err, msg)
	}
	return os.Rename(tmp, b.out)
}
