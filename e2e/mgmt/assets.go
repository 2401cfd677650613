package mgmt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/upgradelab/upgradelab/internal/cachedir"
)

// Versions of the management plane's own API server and etcd. The Makefile
// passes the same versions to scripts/build-kube-binaries.sh; a test keeps
// the two in step.
const (
	KubeVersion = "v1.36.3"
	EtcdVersion = "v3.6.16"
)

const capiModule = "sigs.k8s.io/cluster-api"

// Assets says where the plane finds the binaries it runs and the CAPI
// manifests it installs. The zero value is filled by ResolveAssets.
type Assets struct {
	// KubeDir holds kube-apiserver and etcd (envtest's KUBEBUILDER_ASSETS).
	KubeDir string
	// ManagersDir holds capi-manager, kcp-manager and cabpk-manager.
	ManagersDir string
	// CAPIDir is the source of sigs.k8s.io/cluster-api at the version this
	// binary was built with: CRDs and webhook manifests come from there, so
	// they always match the managers.
	CAPIDir string
	// CAPIVersion is that version.
	CAPIVersion string
}

// CacheDir is where built binaries live, outside any checkout.
func CacheDir() string { return cachedir.Dir() }

// ResolveAssets fills what a is missing from the environment
// (KUBEBUILDER_ASSETS, UPGRADELAB_CAPI_BIN) and the cache, and checks that
// every file is there, saying how to build what is not.
func ResolveAssets(a Assets) (Assets, error) {
	if a.CAPIVersion == "" {
		v, err := capiVersion()
		if err != nil {
			return a, err
		}
		a.CAPIVersion = v
	}
	if a.KubeDir == "" {
		a.KubeDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if a.KubeDir == "" {
		a.KubeDir = filepath.Join(CacheDir(), "assets", "kube-"+KubeVersion+"-etcd-"+EtcdVersion)
	}
	if a.ManagersDir == "" {
		a.ManagersDir = os.Getenv("UPGRADELAB_CAPI_BIN")
	}
	if a.ManagersDir == "" {
		a.ManagersDir = filepath.Join(CacheDir(), "bin", "capi-"+a.CAPIVersion)
	}
	if a.CAPIDir == "" {
		dir, err := moduleDir(capiModule, a.CAPIVersion)
		if err != nil {
			return a, err
		}
		a.CAPIDir = dir
	}
	var errs []error
	for _, f := range []string{
		filepath.Join(a.KubeDir, "kube-apiserver"),
		filepath.Join(a.KubeDir, "etcd"),
	} {
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("%s missing: run `make tools` (scripts/build-kube-binaries.sh) or set KUBEBUILDER_ASSETS", f))
		}
	}
	for _, m := range capiManagers(a, nil) {
		f := m.binary
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("%s missing: run `make tools` (scripts/build-capi-managers.sh) or set UPGRADELAB_CAPI_BIN", f))
		}
	}
	return a, errors.Join(errs...)
}

// capiVersion reads the CAPI version this binary was linked with, so the
// plane never mixes manifests of one release with managers of another. A
// binary that uses only CAPI's API types links sigs.k8s.io/cluster-api/api,
// which CAPI releases with the same version (go.mod pins both; a test checks).
func capiVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build info in this binary: cannot tell which Cluster API version it was built with")
	}
	for _, path := range []string{capiModule, capiModule + "/api"} {
		for _, dep := range info.Deps {
			if dep.Path != path {
				continue
			}
			if dep.Replace != nil {
				return dep.Replace.Version, nil
			}
			return dep.Version, nil
		}
	}
	// Test binaries carry no dependency list; they run inside the module,
	// so its go.mod answers.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", capiModule).Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v, nil
	}
	return "", fmt.Errorf("cannot tell which %s version this binary was built with (no build info, and `go list -m` outside the module: %s)", capiModule, fmt.Sprint(err))
}

// moduleDir finds a module's source in the module cache, downloading it
// through the Go toolchain when it is not there yet.
func moduleDir(path, version string) (string, error) {
	gomodcache := os.Getenv("GOMODCACHE")
	if gomodcache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("locating the Go module cache for %s@%s: %w", path, version, err)
		}
		gomodcache = strings.TrimSpace(string(out))
	}
	dir := filepath.Join(gomodcache, path+"@"+version)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return dir, nil
	}
	cmd := exec.Command("go", "mod", "download", path+"@"+version)
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("downloading %s@%s for its manifests: %w: %s", path, version, err, out)
	}
	return dir, nil
}
