package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/internal/pki"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/workload"
)

type world struct {
	lab      *lab.Lab
	host     *lab.Host
	clusters *workload.Clusters
	agent    *Agent
	api      *API
	ca       *pki.CA
	events   <-chan lab.Event
	endpoint workload.Endpoint
	certs    secret.Certificates
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldOS(t, "")
}

// newWorldOS is newWorld on a host of the given OS kind.
func newWorldOS(t *testing.T, hostOS disk.Kind) *world {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := labtest.UpOS(t, "single-node", string(hostOS), 0)
	clusters, ep := labtest.Workload(t, "default/wl")
	h, _ := l.Host("node-0")
	a := New(h, clusters, 0, DefaultTiming)
	agentEvents, stop := l.Subscribe()
	t.Cleanup(stop)
	go a.Run(ctx, agentEvents)
	ca, _ := pki.NewCA("lab CA")
	serving, _ := ca.Serving("node-0 agent", []string{"127.0.0.1"})
	cert, _ := serving.TLS()
	api, err := ServeAPI(a, cert, ca.Pool(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	events, stop2 := l.Subscribe()
	t.Cleanup(stop2)
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	return &world{lab: l, host: h, clusters: clusters, agent: a, api: api, ca: ca, events: events, endpoint: ep, certs: certs}
}

func (w *world) expect(t *testing.T, reason string) lab.Event {
	t.Helper()
	return labtest.Expect(t, w.events, "", reason, 10*time.Second)
}

// install is what a provisioner does: stage the image, CABPK's init user
// data on the config drive, boot from disk.
func (w *world) install(t *testing.T) {
	t.Helper()
	cc := fmt.Sprintf("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: wl\nkubernetesVersion: v1.35.3\ncontrolPlaneEndpoint: %s:%d\n", w.endpoint.Host, w.endpoint.Port)
	ic := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  kubeletExtraArgs:\n  - name: provider-id\n    value: upgradelab://single-node/node-0\n"
	userData, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{Certificates: w.certs, ClusterConfiguration: cc, InitConfiguration: ic})
	if err != nil {
		t.Fatal(err)
	}
	labtest.Provision(t, w.lab, w.host, w.events, "ubuntu-24.04-k8s-v1.35.3", userData)
}

// client is what CAPI holds: a kubeconfig made from the cluster CA.
func (w *world) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	kp := w.certs.GetByPurpose(secret.ClusterCA).KeyPair
	ca, err := workload.CAFromSecretData(map[string][]byte{"tls.crt": kp.Cert, "tls.key": kp.Key})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubeconfig.New("wl", fmt.Sprintf("https://%s:%d", w.endpoint.Host, w.endpoint.Port), ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func (w *world) apiClient(t *testing.T) *http.Client {
	t.Helper()
	pair, _ := w.ca.Client("in-place extension")
	cert, _ := pair.TLS()
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.ca.Pool(), Certificates: []tls.Certificate{cert}}}, Timeout: 30 * time.Second}
}

func post(t *testing.T, c *http.Client, url string, body any) (int, map[string]any) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := c.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// The same agent API drives both kinds of host: install, the update
// contract (stage, activate, health commits, roll back), the admin's
// /etc (kept by OSTree's merge, not by an A/B slot switch), kubeadm, the
// files and a NIC the new NVM breaks.
func TestKubeadmInitUpdateAndNICMismatch(t *testing.T) {
	for _, kind := range disk.Kinds {
		t.Run(string(kind), func(t *testing.T) { testKubeadmInitUpdateAndNICMismatch(t, kind) })
	}
}

func testKubeadmInitUpdateAndNICMismatch(t *testing.T, kind disk.Kind) {
	first, second := map[disk.Kind]agentv1.RootID{disk.AB: "A", disk.OSTree: "1"}[kind], map[disk.Kind]agentv1.RootID{disk.AB: "B", disk.OSTree: "2"}[kind]
	w := newWorldOS(t, kind)
	ctx := context.Background()
	w.install(t)
	w.expect(t, "KubeletRunning")
	cs := w.client(t)
	checkJoined(t, cs)

	api := w.apiClient(t)
	if code, h := post(t, api, w.api.URL()+"/v1/health", nil); code != 200 || h["healthy"] != true {
		t.Fatalf("health after install: %d %v", code, h)
	}
	if im := w.status(t, api).Images; string(im.Kind) != string(kind) || im.Booted == nil || im.Booted.ID != first || !im.Booted.Committed {
		t.Fatalf("a passed health check did not commit root %s: %+v", first, im)
	}
	if code, out := post(t, api, w.api.URL()+"/v1/rollback", nil); code != http.StatusConflict || !strings.Contains(fmt.Sprint(out["error"]), "no committed fallback") {
		t.Fatalf("rollback with nothing to roll back to: %d %v; want 409", code, out)
	}
	w.editEtcAndMarkData(t, api)

	if k := w.kubeadmStatus(t, api); k == nil || k.KubernetesVersion != "v1.35.3" {
		t.Fatalf("kubeadm after init: %+v; want v1.35.3", k)
	}
	// What KCP does before it updates a Machine: the cluster's
	// ClusterConfiguration at the new version, with its feature gates.
	cm, _ := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	cm.Data["ClusterConfiguration"] = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\nfeatureGates:\n  NewGate: true\n"
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.updateOnTrial(t, api, cs, first, second)
	resp, err := api.Get(w.api.URL() + "/v1/etc")
	if err != nil {
		t.Fatal(err)
	}
	etc := map[string]string{}
	json.NewDecoder(resp.Body).Decode(&etc)
	resp.Body.Close()
	if got, want := etc["/etc/marker"], map[disk.Kind]string{disk.AB: "", disk.OSTree: "set by the admin"}[kind]; got != want {
		t.Fatalf("/etc/marker after the update: %q, want %q (etc %v)", got, want, etc)
	}
	if code, h := post(t, api, w.api.URL()+"/v1/health", nil); code != 200 || h["healthy"] != true {
		t.Fatalf("health after update: %d %v", code, h)
	}
	if w.host.Persistent()["marker"] != "keep me" {
		t.Fatal("the in-place update lost the persistent marker")
	}
	// kubeadm upgrade node applied the cluster's ClusterConfiguration.
	if k := w.kubeadmStatus(t, api); k == nil || k.KubernetesVersion != "v1.36.3" || !k.FeatureGates["NewGate"] || len(k.FeatureGates) != 1 {
		t.Fatalf("kubeadm after the upgrade: %+v; want v1.36.3 with NewGate only", k)
	}

	// Files written in place (a KubeadmConfig files change) are reported
	// and outlive a reboot; the bootstrap's own are there from the start.
	if sums := w.filesStatus(t, api); sums["/run/kubeadm/kubeadm.yaml"] == "" {
		t.Fatalf("files after init: %v; want the bootstrap's write_files", sums)
	}
	w.writeFilesInPlace(t, api)

	// An NVM the driver cannot run: the port stays down, the node goes
	// NotReady and the health check fails.
	if err := w.host.FlashNVM(ctx, "eno1", "x710-nvm-10.0-next"); err != nil {
		t.Fatal(err)
	}
	w.host.Reset()
	w.expect(t, "KubeletRunning")
	checkNotReadyOnNewerNVM(t, cs)
	if got := w.filesStatus(t, api)["/tmp/test"]; got != agentv1.FileSum("first in-place update") {
		t.Fatalf("/tmp/test after a reboot: %q", got)
	}
	code, h := post(t, api, w.api.URL()+"/v1/health", nil)
	if code != http.StatusServiceUnavailable || h["healthy"] != false || !strings.Contains(fmt.Sprint(h["reason"]), "link down") {
		t.Fatalf("health with the NIC down: %d %v", code, h)
	}

	// Roll back: the committed fallback boots next.
	if code, out := post(t, api, w.api.URL()+"/v1/rollback", nil); code != 200 {
		t.Fatalf("rollback: %d %v", code, out)
	}
	w.host.Reset()
	w.expect(t, "KubeletRunning")
	if s := w.status(t, api); s.OS.Image.Name != "ubuntu-24.04-k8s-v1.35.3" || s.Images.Booted.ID != first || s.Images.Fallback == nil || s.Images.Fallback.ID != second {
		t.Fatalf("after the rollback: %s from %+v", s.OS.Image.Name, s.Images)
	}
}

// checkJoined holds the workload cluster to what kubeadm init made:
// node-0 at v1.35.3 with the lab's provider ID, and kubeadm-config.
func checkJoined(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	node, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the node is not in the workload cluster: %v", err)
	}
	if node.Status.NodeInfo.KubeletVersion != "v1.35.3" || node.Spec.ProviderID != "upgradelab://single-node/node-0" {
		t.Fatalf("node %+v %s", node.Status.NodeInfo, node.Spec.ProviderID)
	}
	if cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{}); err != nil || !strings.Contains(cm.Data["ClusterConfiguration"], "clusterName: wl") {
		t.Fatalf("kubeadm-config: %v %v", cm, err)
	}
}

// updateOnTrial stages the v1.36.3 image into root second, activates it
// and reboots: the node reports the new kubelet from second, on trial,
// falling back to first.
func (w *world) updateOnTrial(t *testing.T, api *http.Client, cs kubernetes.Interface, first, second agentv1.RootID) {
	t.Helper()
	ctx := context.Background()
	next, _ := w.lab.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	if code, out := post(t, api, w.api.URL()+"/v1/stage", agentv1.StageRequest{URL: w.lab.ImageServer().ImageURL(next.Name), SHA256: next.SHA256}); code != 200 || out["root"] != string(second) {
		t.Fatalf("stage: %d %v; want root %s", code, out, second)
	}
	if im := w.status(t, api).Images; im.Staged == nil || im.Staged.Image != next.Name || im.Booted.ID != first {
		t.Fatalf("after staging: %+v", im)
	}
	if code, out := post(t, api, w.api.URL()+"/v1/activate", agentv1.ActivateRequest{Root: second, Tries: 2}); code != 200 {
		t.Fatalf("activate: %d %v", code, out)
	}
	w.host.Reboot(ctx) // graceful: an OSTree host finalises the staged deployment
	w.expect(t, "KubeletRunning")
	node, _ := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if node.Status.NodeInfo.KubeletVersion != "v1.36.3" {
		t.Fatalf("after rebooting into root %s the node reports %s", second, node.Status.NodeInfo.KubeletVersion)
	}
	if im := w.status(t, api).Images; im.Booted.ID != second || im.Booted.Committed || im.Fallback == nil || im.Fallback.ID != first {
		t.Fatalf("on trial: %+v; want root %s uncommitted, falling back to %s", im, second, first)
	}
}

// editEtcAndMarkData is the admin's edit of /etc before an update (and
// one outside /etc, refused) and data on the persistent partition that an
// in-place update must keep.
func (w *world) editEtcAndMarkData(t *testing.T, api *http.Client) {
	t.Helper()
	body, _ := json.Marshal(agentv1.EtcEdit{Path: "/etc/marker", Content: "set by the admin"})
	req, _ := http.NewRequest(http.MethodPut, w.api.URL()+"/v1/etc", bytes.NewReader(body))
	if resp, err := api.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("edit /etc: %v %v", resp, err)
	}
	body, _ = json.Marshal(agentv1.EtcEdit{Path: "/var/lib/x", Content: "not etc"})
	req, _ = http.NewRequest(http.MethodPut, w.api.URL()+"/v1/etc", bytes.NewReader(body))
	if resp, err := api.Do(req); err != nil || resp.StatusCode != 400 {
		t.Fatalf("edit outside /etc: %v %v; want 400", resp, err)
	}

	// Mark data that an in-place update must keep.
	req, _ = http.NewRequest(http.MethodPut, w.api.URL()+"/v1/persistent/marker", strings.NewReader("keep me"))
	if resp, err := api.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("write marker: %v %v", resp, err)
	}
}

// writeFilesInPlace writes a file as a KubeadmConfig files change does,
// and a relative path, refused.
func (w *world) writeFilesInPlace(t *testing.T, api *http.Client) {
	t.Helper()
	body, _ := json.Marshal(agentv1.FilesRequest{Files: map[string]string{"/tmp/test": "first in-place update"}})
	req, _ := http.NewRequest(http.MethodPut, w.api.URL()+"/v1/files", bytes.NewReader(body))
	if resp, err := api.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("write files: %v %v", resp, err)
	}
	req, _ = http.NewRequest(http.MethodPut, w.api.URL()+"/v1/files", strings.NewReader(`{"files":{"relative":"x"}}`))
	if resp, err := api.Do(req); err != nil || resp.StatusCode != 400 {
		t.Fatalf("a relative path: %v %v; want 400", resp, err)
	}
}

// checkNotReadyOnNewerNVM holds node-0 NotReady for an NVM newer than its
// driver expects.
func checkNotReadyOnNewerNVM(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	node, _ := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	notReady := false
	for _, c := range node.Status.Conditions {
		if c.Type == "Ready" {
			notReady = c.Status == "False" && strings.Contains(c.Message, "newer than expected")
			if !notReady {
				t.Fatalf("node Ready=%s (%s) with a newer NVM major", c.Status, c.Message)
			}
		}
	}
	if !notReady {
		t.Fatal("the node has no Ready condition")
	}
}

// filesStatus is the files the agent reports.
func (w *world) filesStatus(t *testing.T, api *http.Client) map[string]string {
	t.Helper()
	return w.status(t, api).Files
}

// status is the agent's GET /v1/status.
func (w *world) status(t *testing.T, api *http.Client) agentv1.Status {
	t.Helper()
	resp, err := api.Get(w.api.URL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st agentv1.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// kubeadmStatus is what the agent reports kubeadm applied.
func (w *world) kubeadmStatus(t *testing.T, api *http.Client) *agentv1.Kubeadm {
	t.Helper()
	return w.status(t, api).Kubeadm
}

func TestAPIRequiresAClientCertificateFromTheLabCA(t *testing.T) {
	w := newWorld(t)
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.ca.Pool()}}, Timeout: 5 * time.Second}
	if resp, err := noCert.Get(w.api.URL() + "/v1/status"); err == nil {
		resp.Body.Close()
		t.Fatalf("no client certificate: got %s, want the TLS handshake refused", resp.Status)
	}
	other, _ := pki.NewCA("another CA")
	pair, _ := other.Client("intruder")
	cert, _ := pair.TLS()
	wrong := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.ca.Pool(), Certificates: []tls.Certificate{cert}}}, Timeout: 5 * time.Second}
	if resp, err := wrong.Get(w.api.URL() + "/v1/status"); err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate from another CA: got %s, want refused", resp.Status)
	}
	resp, err := w.apiClient(t).Get(w.api.URL() + "/v1/status")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("lab CA client: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestResetWipesPersistentData(t *testing.T) {
	w := newWorld(t)
	w.install(t)
	w.expect(t, "KubeletRunning")
	w.host.SetPersistent("marker", "data")
	api := w.apiClient(t)
	if code, out := post(t, api, w.api.URL()+"/v1/reset", nil); code != http.StatusAccepted {
		t.Fatalf("reset: %d %v", code, out)
	}
	w.expect(t, "ResetWiped")
	if p := w.host.Persistent(); len(p) != 0 {
		t.Fatalf("persistent data after reset: %v", p)
	}
	if len(w.host.UserData()) != 0 {
		t.Fatal("the config drive survived the reset")
	}
	if s := w.host.Status(); s.OS == nil || s.OS.Source != lab.FromRecovery {
		t.Fatalf("after reset the host runs %+v, want the recovery OS", s.OS)
	}
}

// The only control-plane host off: its API server and etcd member stop,
// so the cluster's VIP refuses connections and nothing (no controller
// manager runs) can mark the Node NotReady; back on, the node is Ready
// with what its kubelet reported before.
func TestPoweringOffTheOnlyControlPlaneHostTakesTheAPIDown(t *testing.T) {
	w := newWorld(t)
	w.agent.timing = Timing{NodeGracePeriod: 200 * time.Millisecond} // kubeadm instant, grace in real time
	w.agent.scale = 1
	w.install(t)
	w.expect(t, "KubeletRunning")
	cs := w.client(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("the API does not answer with the host up: %v", err)
	}
	w.host.PowerOff()
	// The agent hears of the power loss through the lab's events, a
	// moment after PowerOff returns (as a real API server dies with its
	// host's power, not before): give it a second.
	var err error
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err = cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if (err != nil && strings.Contains(err.Error(), "connection refused")) || time.Now().After(deadline) {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("with the only control-plane host off the API answered: %v", err)
	}
	// The VIP closes first; the member is marked stopped once the node's
	// undrained pods are read.
	h, members := w.clusters.Health("default/wl")
	for deadline := time.Now().Add(5 * time.Second); members["node-0"] != workload.MemberStopped && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		h, members = w.clusters.Health("default/wl")
	}
	if h != workload.HealthNoQuorum || members["node-0"] != workload.MemberStopped {
		t.Fatalf("etcd with its only member's host off: %s %v, want no-quorum with node-0 stopped", h, members)
	}
	time.Sleep(400 * time.Millisecond) // past the grace period: the NotReady write finds no quorum
	w.host.PowerOn()
	w.expect(t, "KubeletRunning")
	node, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the API did not come back with the host: %v", err)
	}
	if !nodeReadyOf(node.Status.Conditions) || node.Status.NodeInfo.KubeletVersion != "v1.35.3" {
		t.Fatalf("after power on: ready=%v kubelet %q", nodeReadyOf(node.Status.Conditions), node.Status.NodeInfo.KubeletVersion)
	}
}

func nodeReadyOf(conds []corev1.NodeCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestAgentCrashDropsTheAPIAndComesBackOnTheSameAddress(t *testing.T) {
	w := newWorld(t)
	w.install(t)
	w.expect(t, "KubeletRunning")
	c := w.apiClient(t)
	w.api.Crash(300 * time.Millisecond)
	w.expect(t, "AgentCrashed")
	if resp, err := c.Get(w.api.URL() + "/v1/status"); err == nil {
		resp.Body.Close()
		t.Fatalf("a crashed agent answered: %s", resp.Status)
	}
	w.expect(t, "AgentRestarted")
	resp, err := c.Get(w.api.URL() + "/v1/status")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the restarted agent at %s: %v %v", w.api.URL(), resp, err)
	}
	resp.Body.Close()
	if s := w.host.Status(); s.OS == nil || s.OS.Root != disk.SlotA {
		t.Fatalf("the host's OS after an agent crash: %+v", s.OS)
	}
}

// A hung host: its agent's API answers nothing, and what its node ran
// stops with it (the only control-plane host: the workload API is down,
// its etcd member stopped); after a power cycle both are back.
func TestAHungHostDropsItsAPIAndStopsItsNode(t *testing.T) {
	w := newWorld(t)
	w.install(t)
	w.expect(t, "KubeletRunning")
	c := w.apiClient(t)
	cs := w.client(t)
	ctx := context.Background()
	if err := w.host.Hang(); err != nil {
		t.Fatal(err)
	}
	w.expect(t, lab.EventOSHung)
	if resp, err := c.Get(w.api.URL() + "/v1/status"); err == nil {
		resp.Body.Close()
		t.Fatalf("a hung host's agent answered: %s", resp.Status)
	}
	waitUntil(t, "node-0's etcd member stopped", func() bool {
		_, members := w.clusters.Health("default/wl")
		return members["node-0"] == workload.MemberStopped
	})
	if _, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{}); err == nil {
		t.Fatal("the workload API answered with its only control-plane host hung")
	}
	if err := w.host.Reset(); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "KubeletRunning")
	resp, err := c.Get(w.api.URL() + "/v1/status")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the agent after a power cycle: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("the workload API after a power cycle: %v", err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// raceWorkload is the workload cluster with a NotReady write that the
// next boot overtakes: the host is powered on while the node lifecycle
// is writing NotReady for the power loss before, and the write waits
// until that boot's kubelet reports (or two seconds).
type raceWorkload struct {
	Workload
	host     *lab.Host
	reported chan struct{}
	once     sync.Once
}

func (r *raceWorkload) SetNodeNotReady(ctx context.Context, cluster, name, reason string) error {
	r.once.Do(func() {
		if err := r.host.PowerOn(); err != nil {
			panic(err)
		}
		select {
		case <-r.reported:
		case <-time.After(2 * time.Second):
		}
	})
	return r.Workload.SetNodeNotReady(ctx, cluster, name, reason)
}

func (r *raceWorkload) SetNode(ctx context.Context, cluster string, n workload.NodeInfo) error {
	err := r.Workload.SetNode(ctx, cluster, n)
	select {
	case r.reported <- struct{}{}:
	default:
	}
	return err
}

// A NotReady decided for a power loss never lands after the next boot's
// kubelet reported Ready: the node is Ready once the host is back, as a
// real kubelet's next status post would make it. (Seen in a 300-host
// fleet: the late NotReady outlived the boot, and the in-place update's
// health check failed on a healthy host until its bound.)
func TestALateNotReadyNeverOutlivesTheNextBoot(t *testing.T) {
	w := newWorld(t)
	w.agent.timing = Timing{NodeGracePeriod: 100 * time.Millisecond}
	w.agent.scale = 1
	race := &raceWorkload{Workload: w.clusters, host: w.host, reported: make(chan struct{})}
	w.agent.clusters = race
	w.install(t)
	w.expect(t, "KubeletRunning")
	w.host.PowerOff()
	w.expect(t, "OSRunning") // the boot raceWorkload starts
	w.expect(t, "KubeletRunning")
	time.Sleep(300 * time.Millisecond) // any late write lands
	ready, msg, err := w.clusters.NodeReady(context.Background(), "default/wl", "node-0")
	if err != nil || !ready {
		t.Fatalf("node-0 after the host came back: ready=%v %q %v; want Ready", ready, msg, err)
	}
}

// refusingWorkload refuses the kubelet's first status writes, as a
// cluster in an etcd election does.
type refusingWorkload struct {
	Workload
	refusals int
}

func (r *refusingWorkload) SetNode(ctx context.Context, cluster string, n workload.NodeInfo) error {
	if r.refusals > 0 {
		r.refusals--
		return errors.New("etcdserver: no leader")
	}
	return r.Workload.SetNode(ctx, cluster, n)
}

// A kubelet the cluster refuses on boot tries again, as a real one
// does, and its node comes back. (Seen: the one write that fell into an
// etcd election left a node's kubelet down for good, its pods
// terminating for ever and the drain of its neighbour stuck.)
func TestAKubeletRefusedOnBootTriesAgain(t *testing.T) {
	w := newWorld(t)
	w.install(t)
	w.expect(t, "KubeletRunning")
	w.agent.clusters = &refusingWorkload{Workload: w.clusters, refusals: 2}
	w.host.PowerOff()
	if err := w.host.PowerOn(); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "KubeletFailed")
	w.expect(t, "KubeletRunning")
}

// The static pods run what kubeadm last wrote from the cluster's
// kubeadm-config, not the booted image's version: a host rebooted into
// v1.36.3 whose kubeadm-config still says v1.35.3 runs a v1.36.3 kubelet
// under a v1.35.3 control plane; kubeadm upgrade node after KCP's move
// brings it to v1.36.3, and a fallback to the v1.35.3 image keeps the
// manifests (and never takes etcd down).
func TestStaticPodsFollowTheKubeadmConfigNotTheImage(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.install(t)
	w.expect(t, "KubeletRunning")
	cs := w.client(t)
	api := w.apiClient(t)
	checkPods(t, cs, "v1.35.3", "3.6.4-0")

	w.updateOnTrial(t, api, cs, "A", "B")
	checkPods(t, cs, "v1.35.3", "3.6.4-0")
	if k := w.kubeadmStatus(t, api); k == nil || k.KubernetesVersion != "v1.35.3" {
		t.Fatalf("kubeadm on v1.36.3 with the kubeadm-config at v1.35.3: %+v; want v1.35.3 applied", k)
	}

	setClusterConfiguration(t, cs, "kubernetesVersion: v1.36.3\n")
	if code, out := post(t, api, w.api.URL()+agentv1.PathKubeadmUpgrade, nil); code != 200 {
		t.Fatalf("kubeadm upgrade node: %d %v", code, out)
	}
	checkPods(t, cs, "v1.36.3", "3.6.5-0")

	if code, out := post(t, api, w.api.URL()+"/v1/rollback", nil); code != 200 {
		t.Fatalf("rollback: %d %v", code, out)
	}
	w.host.Reset()
	w.expect(t, "KubeletRunning")
	if s := w.status(t, api); s.OS.Image.KubernetesVersion != "v1.35.3" {
		t.Fatalf("after the fallback the host runs %s", s.OS.Image.Name)
	}
	checkPods(t, cs, "v1.36.3", "3.6.5-0")

	// The user reverts: KCP's kubeadm-config goes back, and kubeadm
	// upgrade node takes the control plane back, but never etcd.
	setClusterConfiguration(t, cs, "kubernetesVersion: v1.35.3\n")
	if code, out := post(t, api, w.api.URL()+agentv1.PathKubeadmUpgrade, nil); code != 200 {
		t.Fatalf("kubeadm upgrade node: %d %v", code, out)
	}
	checkPods(t, cs, "v1.35.3", "3.6.5-0")

	// A reboot into the same kubelet runs no kubeadm: what the
	// kubeadm-config says since is not applied.
	setClusterConfiguration(t, cs, "kubernetesVersion: v1.35.3\nfeatureGates:\n  Later: true\n")
	w.host.Reboot(ctx)
	w.expect(t, "KubeletRunning")
	if k := w.kubeadmStatus(t, api); k == nil || k.FeatureGates["Later"] {
		t.Errorf("after a plain reboot kubeadm reports %+v; want what it last ran, without Later", k)
	}
}

// setClusterConfiguration writes the workload's kubeadm-config as KCP
// does, with body after the document's kind.
func setClusterConfiguration(t *testing.T, cs kubernetes.Interface, body string) {
	t.Helper()
	ctx := context.Background()
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ClusterConfiguration"] = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n" + body
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkPods holds node-0's static pods to a control plane at version
// and an etcd member at etcd.
func checkPods(t *testing.T, cs kubernetes.Interface, version, etcd string) {
	t.Helper()
	want := map[string]string{
		"kube-apiserver-node-0":          "registry.k8s.io/kube-apiserver:" + version,
		"kube-controller-manager-node-0": "registry.k8s.io/kube-controller-manager:" + version,
		"kube-scheduler-node-0":          "registry.k8s.io/kube-scheduler:" + version,
		"etcd-node-0":                    "registry.k8s.io/etcd:" + etcd,
	}
	for name, image := range want {
		pod, err := cs.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := pod.Spec.Containers[0].Image; got != image {
			t.Errorf("%s runs %s, want %s", name, got, image)
		}
	}
}
