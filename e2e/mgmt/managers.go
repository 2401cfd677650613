package mgmt

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FeatureGates are the CAPI gates every manager runs with: ClusterClass
// clusters need ClusterTopology, in-place updates need RuntimeSDK and
// InPlaceUpdates. The managers read gates only from --feature-gates.
var FeatureGates = []string{"ClusterTopology=true", "RuntimeSDK=true", "InPlaceUpdates=true"}

// managerSpec is one of the real CAPI managers. Each reads its CRDs and
// webhook manifests from its own folder of the CAPI module.
type managerSpec struct {
	name   string // short name, prefix of its webhook configurations
	binary string // file in Assets.ManagersDir
	srcDir string // folder in the CAPI module holding config/
}

var managers = []managerSpec{
	{name: "capi", binary: "capi-manager", srcDir: "core"},
	{name: "kcp", binary: "kcp-manager", srcDir: "controlplane/kubeadm"},
	{name: "cabpk", binary: "cabpk-manager", srcDir: "bootstrap/kubeadm"},
}

// managerPorts are the loopback ports of one manager. Every CAPI manager
// defaults to the same health and diagnostics ports, so each gets its own.
type managerPorts struct {
	webhook, health, diagnostics int
}

func (p managerPorts) healthURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(p.health) + "/readyz"
}

func (m managerSpec) args(kubeconfig, certDir string, ports managerPorts) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--feature-gates=" + strings.Join(FeatureGates, ","),
		"--webhook-port=" + strconv.Itoa(ports.webhook),
		"--webhook-cert-dir=" + certDir,
		"--health-addr=127.0.0.1:" + strconv.Itoa(ports.health),
		"--diagnostics-address=127.0.0.1:" + strconv.Itoa(ports.diagnostics),
		"--insecure-diagnostics",
		"--leader-elect=false",
		// Short resyncs keep a simulated rollout moving in seconds.
		"--sync-period=1m",
	}
}

// freePorts reserves n distinct loopback ports by listening on them at once,
// then frees them for the children to bind.
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startManagers starts every manager and waits until each answers /readyz,
// which in CAPI's managers includes its webhook server having started.
func startManagers(ctx context.Context, a Assets, kubeconfig string, certs *webhookCerts, logDir string, ports map[string]managerPorts, timeout time.Duration) ([]*process, error) {
	var procs []*process
	for _, m := range managers {
		p, err := startProcess(m.binary, filepath.Join(a.ManagersDir, m.binary), m.args(kubeconfig, certs.dir, ports[m.name]), logDir)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, m := range managers {
		if err := procs[i].waitHealthy(ctx, ports[m.name].healthURL()); err != nil {
			return procs, err
		}
	}
	return procs, nil
}
