package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/internal/pki"
	"github.com/upgradelab/upgradelab/sim/agent"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/workload"
)

func writePair(t *testing.T, dir, name string, p pki.Pair) (string, string) {
	t.Helper()
	cert, key := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(cert, p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// serveHardware serves the lab's side of the hardware channel, mutual TLS
// with a new lab CA, until the test ends; it answers the CA and address.
func serveHardware(t *testing.T, h http.Handler) (*pki.CA, string) {
	t.Helper()
	ca, _ := pki.NewCA("lab CA")
	serving, _ := ca.Serving("hardware channel", []string{"127.0.0.1"})
	servingCert, _ := serving.TLS()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{servingCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}))
	t.Cleanup(func() { srv.Close() })
	return ca, ln.Addr().String()
}

// The agent binary, started as its own process, joins its host to the
// workload cluster through the lab's hardware channel, and its update API
// runs the health check that commits the slot.
func TestAgentBinaryJoinsTheWorkloadCluster(t *testing.T) {
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	l := labtest.Up(t, "single-node", 0)
	clusters, ep := labtest.Workload(t, "default/wl")
	host, _ := l.Host("node-0")

	ca, hardwareAddr := serveHardware(t, agent.NewHardwareServer(host, clusters, l.Subscribe))

	caFile := filepath.Join(dir, "ca.crt")
	os.WriteFile(caFile, ca.PEM, 0o600)
	clientPair, _ := ca.Client("node-0 agent")
	clientCrt, clientKey := writePair(t, dir, "client", clientPair)
	apiPair, _ := ca.Serving("node-0 agent API", []string{"127.0.0.1"})
	apiCrt, apiKey := writePair(t, dir, "api", apiPair)

	cmd := exec.CommandContext(ctx, bin, "-hardware", "https://"+hardwareAddr, "-ca", caFile, "-cert", clientCrt, "-key", clientKey,
		"-api-cert", apiCrt, "-api-key", apiKey, "-time-scale", "0")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "agent node-0: hardware channel") {
		t.Fatalf("agent process said %q, %v", line, err)
	}
	apiURL := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])

	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	cc := fmt.Sprintf("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: wl\ncontrolPlaneEndpoint: %s:%d\n", ep.Host, ep.Port)
	userData, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{Certificates: certs, ClusterConfiguration: cc,
		InitConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n"})
	if err != nil {
		t.Fatal(err)
	}
	events, stopEvents := l.Subscribe()
	defer stopEvents()
	labtest.Provision(t, l, host, events, "ubuntu-24.04-k8s-v1.35.3", userData)
	labtest.Expect(t, events, "node-0", "KubeletRunning", 30*time.Second)

	kp := certs.GetByPurpose(secret.ClusterCA).KeyPair
	clusterCA, _ := workload.CAFromSecretData(map[string][]byte{"tls.crt": kp.Cert, "tls.key": kp.Key})
	kc, _ := kubeconfig.New("wl", fmt.Sprintf("https://%s:%d", ep.Host, ep.Port), clusterCA.Cert, clusterCA.Key)
	cfg, _ := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	node, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil || node.Status.NodeInfo.KubeletVersion != "v1.35.3" {
		t.Fatalf("node from the agent process: %v %v", node, err)
	}

	apiClientPair, _ := ca.Client("in-place extension")
	apiClientCert, _ := apiClientPair.TLS()
	api := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{apiClientCert}}}}
	resp, err := api.Post(apiURL+"/v1/health", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var h agentv1.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if b := host.Status().Disk.Images().Booted; !h.Healthy || b == nil || !b.Committed {
		t.Fatalf("health through the agent process: %+v, booted %+v", h, b)
	}
}

// buildAgent builds this package's binary into dir as this test binary
// was built, with the race detector when it has it: the build then reuses
// the dependencies already compiled for the test rather than compiling
// every one again.
func buildAgent(t *testing.T, dir string) string {
	bin := filepath.Join(dir, "upgradelab-agent")
	args := []string{"build", "-o", bin}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}
