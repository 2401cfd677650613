// Package bmo runs baremetal-operator (BMO), Metal3's BareMetalHost
// controller, unmodified: built from its upstream source by
// e2e/metal3src (METAL3_SOURCES, or a checkout in BMO_SOURCE) and run against a lab's Ironic
// (e2e/ironic) with its own CRDs, as a manager of the plane ([Provider],
// with its release's RBAC) or alone ([Start]).
//
// BMO reaches Ironic through e2e/ironic's BMOURL, which lets BMO v0.11's
// node creation through to Ironic 21.4 (see there), and the lab's deploy
// ramdisk image is its deploy kernel and ramdisk. It runs with leader
// election off, its metrics off and its health endpoint on a loopback
// port of the harness's range. As a manager of the plane it serves its
// release's validating webhooks for BareMetalHosts and
// BMCEventSubscriptions (it reads their certificate from under TMPDIR,
// mgmt.Provider.CertsUnderTMPDIR), so every host a provider writes is
// checked as on a real site; alone, its webhooks are off.
package bmo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/metal3src"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/proc"
)

// Version is the release of BMO the harness builds: the newest line whose
// Ironic API floor (1.81) Debian 12's Ironic meets.
var Version = metal3src.BMO.Version

// IronicFloor is the lowest Ironic API microversion BMO v0.11 works with
// (its clients/features.go).
const IronicFloor = "1.81"

// CheckIronic says why BMO cannot use an Ironic whose highest API
// microversion is api, or nil.
func CheckIronic(version, api string) error {
	major, minor, ok := microversion(api)
	floorMajor, floorMinor, _ := microversion(IronicFloor)
	if !ok || major < floorMajor || major == floorMajor && minor < floorMinor {
		return fmt.Errorf("ironic %s offers API %q; baremetal-operator %s needs %s or later: install Debian 12's Ironic (scripts/install-deps.sh metal3) or a newer one",
			version, api, Version, IronicFloor)
	}
	return nil
}

// microversion parses MAJOR.MINOR.
func microversion(v string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(v, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return x, y, found && err1 == nil && err2 == nil
}

// Provider describes BMO to the plane (e2e/mgmt) as a manager named
// name: dir is what metal3src.Build returned for BMO; it reaches Ironic
// at ironicURL (ironic.Ironic.BMOURL) and deploys with the image at deployRamdisk. It
// runs as its own ServiceAccount with the RBAC of its release, watching
// every namespace, and serves its release's validating webhooks for
// BareMetalHosts and BMCEventSubscriptions on the plane's port.
func Provider(dir, name, ironicURL, deployRamdisk string) mgmt.Provider {
	return mgmt.Provider{Name: name, Binary: filepath.Join(dir, "manager"), ConfigDir: filepath.Join(dir, "config"),
		ExtraCRDDirs: []string{filepath.Join(dir, "crds")}, PlaneFlags: []string{"kubeconfig", "health-addr", "webhook-port"},
		CertsUnderTMPDIR: true,
		Args:             []string{"--metrics-addr=0"}, Env: env(ironicURL, deployRamdisk, filepath.Join(dir, "no-auth"))}
}

// env is what BMO reads of its environment: Ironic's endpoint, the
// deploy images, and an auth folder that does not exist (Ironic runs
// noauth).
func env(ironicURL, deployRamdisk, noAuth string) []string {
	return []string{"IRONIC_ENDPOINT=" + strings.TrimRight(ironicURL, "/") + "/v1/",
		"DEPLOY_KERNEL_URL=" + deployRamdisk, "DEPLOY_RAMDISK_URL=" + deployRamdisk, "METAL3_AUTH_ROOT_DIR=" + noAuth}
}

// Options say where BMO runs and what it drives.
type Options struct {
	// Dir is what metal3src.Build returned for BMO.
	Dir string
	// Kubeconfig reaches the API server; Namespace is the one BMO watches
	// (empty: all).
	Kubeconfig, Namespace string
	// IronicURL is Ironic's API for BMO (ironic.Ironic.BMOURL).
	IronicURL string
	// DeployRamdisk is the URL of the deploy image, BMO's deploy kernel
	// and ramdisk.
	DeployRamdisk string
	// LogDir receives bmo.log.
	LogDir string
}

// BMO is a running baremetal-operator.
type BMO struct {
	proc *proc.Process
}

// Start starts BMO and waits until it answers its health check.
func Start(ctx context.Context, o Options) (*BMO, error) {
	if o.IronicURL == "" || o.DeployRamdisk == "" {
		return nil, errors.New("baremetal-operator: IronicURL and DeployRamdisk are required")
	}
	health, err := loopback.Addr()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig=" + o.Kubeconfig, "--namespace=" + o.Namespace, "--health-addr=" + health,
		"--metrics-addr=0", "--webhook-port=0"}
	p, err := proc.Start("bmo", filepath.Join(o.Dir, "manager"), args, env(o.IronicURL, o.DeployRamdisk, filepath.Join(o.LogDir, "no-auth")), o.LogDir)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := p.WaitHealthy(wctx, "http://"+health+"/healthz"); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return &BMO{proc: p}, nil
}

// Stop ends BMO.
func (b *BMO) Stop() { b.proc.Stop(10 * time.Second) }
