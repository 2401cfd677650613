// Package metal3src builds Metal3's components (baremetal-operator,
// cluster-api-provider-metal3, ip-address-manager) from their upstream
// source as external binaries, each with its own go.mod, through
// scripts/build-metal3.sh. The Go module proxy does not serve these main
// modules, so the source is a release archive in METAL3_SOURCES (built
// once per version, cached) or a checkout named by the component's own
// variable (built again whenever its files change, so a provider team's
// change is what runs).
package metal3src

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Component is one Metal3 component the harness builds.
type Component struct {
	// Name is the script's name for it, Repo its upstream repository's.
	Name, Repo string
	// Version is the release built from METAL3_SOURCES.
	Version string
	// SourceVar names the variable that points at a checkout instead.
	SourceVar string
}

var (
	// BMO is baremetal-operator: the newest line whose Ironic API floor
	// (1.81) Debian 12's Ironic meets.
	BMO = Component{Name: "bmo", Repo: "baremetal-operator", Version: "v0.11.7", SourceVar: "BMO_SOURCE"}
	// CAPM3 is the Metal3 infrastructure provider; v1.13 speaks CAPI's
	// v1beta2 contract.
	CAPM3 = Component{Name: "capm3", Repo: "cluster-api-provider-metal3", Version: "v1.13.2", SourceVar: "CAPM3_SOURCE"}
	// IPAM is the IP address manager CAPM3 v1.13 pairs with.
	IPAM = Component{Name: "ipam", Repo: "ip-address-manager", Version: "v1.13.2", SourceVar: "IPAM_SOURCE"}
)

// Build builds c (a release once per version; a checkout when its files
// changed) and returns the folder holding its manager and manifests.
func Build(ctx context.Context, repoRoot string, c Component) (string, error) {
	return script(ctx, repoRoot, c)
}

// Built is the folder Build put c in, without building: a run starts what
// was built before its clock started. It says so when nothing is there.
func Built(ctx context.Context, repoRoot string, c Component) (string, error) {
	dir, err := script(ctx, repoRoot, c, "--where")
	if err != nil {
		return "", err
	}
	// What the build's own cache check wants: the manager, the manifests
	// kept beside it, and where it came from.
	for _, f := range []string{"manager", "config/webhook/manifests.yaml", "source"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%s is not built yet (%s: no %s): build it before the run", c.Source(), dir, f)
		}
	}
	return dir, nil
}

// script runs scripts/build-metal3.sh for c with args.
func script(ctx context.Context, repoRoot string, c Component, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts", "build-metal3.sh"), append([]string{c.Name}, args...)...)
	cmd.Env = append(os.Environ(), strings.ToUpper(c.Name)+"_VERSION="+c.Version)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building %s %s: %w\n%s", c.Repo, c.Version, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Checkout is the checkout c is built from when its SourceVar is set,
// else "".
func (c Component) Checkout() string { return os.Getenv(c.SourceVar) }

// Built names what a build of c is: its release, or "checkout DIR".
func (c Component) Built() string {
	if dir := c.Checkout(); dir != "" {
		return "checkout " + dir
	}
	return c.Version
}

// Source says what a build of c uses: the checkout, or the release.
func (c Component) Source() string {
	if dir := c.Checkout(); dir != "" {
		return fmt.Sprintf("%s checkout %s (%s)", c.Repo, dir, c.SourceVar)
	}
	return fmt.Sprintf("%s %s (METAL3_SOURCES)", c.Repo, c.Version)
}
