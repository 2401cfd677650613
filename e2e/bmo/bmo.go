// Package bmo runs baremetal-operator (BMO), Metal3's BareMetalHost
// controller, unmodified: built from its upstream release source by
// scripts/build-bmo.sh (METAL3_SOURCES) and run as a process against a
// lab's Ironic (e2e/ironic), with its own CRDs.
//
// BMO reaches Ironic through e2e/ironic's BMOURL, which lets BMO v0.11's
// node creation through to Ironic 21.4 (see there), and the lab's deploy
// ramdisk image is its deploy kernel and ramdisk. It runs with leader
// election off, its webhooks off (they are served for an in-cluster
// Service only), its metrics off and its health endpoint on a loopback
// port of the harness's range.
package bmo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/proc"
)

// Version is the release of BMO the harness builds: the newest line whose
// Ironic API floor (1.81) Debian 12's Ironic meets.
const Version = "v0.11.7"

// Build builds BMO (once per version, cached) with scripts/build-bmo.sh
// and returns the folder holding its manager and crds/.
func Build(ctx context.Context, repoRoot string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "scripts", "build-bmo.sh"))
	cmd.Env = append(os.Environ(), "BMO_VERSION="+Version)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building baremetal-operator %s: %w\n%s", Version, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Options say where BMO runs and what it drives.
type Options struct {
	// Dir is what Build returned.
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
	env := append(os.Environ(),
		"IRONIC_ENDPOINT="+strings.TrimRight(o.IronicURL, "/")+"/v1/",
		"DEPLOY_KERNEL_URL="+o.DeployRamdisk, "DEPLOY_RAMDISK_URL="+o.DeployRamdisk,
		// No Ironic credentials: its API runs with noauth.
		"METAL3_AUTH_ROOT_DIR="+filepath.Join(o.LogDir, "no-auth"))
	p, err := proc.StartIn("bmo", filepath.Join(o.Dir, "manager"), args, env, o.LogDir)
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
