package mgmt

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"

	"github.com/upgradelab/upgradelab/internal/loopback"
)

// controllerManagerControllers are the kube-controller-manager
// controllers an embedded plane runs when asked (Options.ControllerManager):
// the garbage collector (owner
// references, and the foregroundDeletion finalizer a foreground delete
// sets, which CAPI's MachineDeploymentScaleSpec waits on) and the
// namespace controller (a deleted namespace's objects are deleted and the
// namespace goes; CAPI's specs delete theirs). envtest runs no
// kube-controller-manager at all, so without them a foreground delete and
// a namespace deletion never finish. The others (node lifecycle,
// ReplicaSets, ...) have nothing to act on in a management cluster.
var controllerManagerControllers = "garbagecollector,namespace"

// aggregationController is the one controller every embedded plane runs:
// ClusterRole aggregation, which fills CAPI's aggregated manager roles
// with the rules of the roles labelled into them (CAPI's core manager
// and KCP run with those). Without it those managers would have no
// permission at all.
const aggregationController = "clusterrole-aggregation"

// startControllerManager runs kube-controller-manager (built with
// kube-apiserver into KubeDir) against the plane, and waits for its
// /healthz.
func startControllerManager(ctx context.Context, a Assets, kubeconfig, dir, controllers string, timeout time.Duration) (*proc.Process, error) {
	binary := filepath.Join(a.KubeDir, "kube-controller-manager")
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w (scripts/build-kube-binaries.sh builds it)", err)
	}
	ports, err := loopback.Ports(1)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "kube-controller-manager-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + certDir,
	}
	child, err := proc.Start("kube-controller-manager", binary, args, nil, dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Its serving certificate is self-signed on loopback.
	insecure := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check
	if err := child.WaitHealthyWith(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz"); err != nil {
		child.Stop(5 * time.Second)
		return nil, err
	}
	return child, nil
}
