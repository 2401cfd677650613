package inplace

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/inplace/askcp"
	"github.com/upgradelab/upgradelab/sim/disk"
)

// fakeHost is a host agent's API over HTTPS, answering from a report the
// test edits: what the Updater sees of a host (its running OS, kubeadm)
// and what it asked (stage, activate, reboot). Its disk is sim/disk's
// model itself (plain data, no lab), so staging, activation, commits and
// the bootloader's choice behave as on a lab host of that kind.
type fakeHost struct {
	mu       sync.Mutex
	st       agentv1.Status
	disk     *disk.Disk
	healthy  bool
	reboots  int
	staged   string
	gatesCfg map[string]bool // what kubeadm upgrade node would apply now
	// versionCfg is the kubeadm-config's kubernetesVersion, which kubeadm
	// upgrade node writes the control plane at ("": the booted image's).
	versionCfg string
	// loseFiles: the host answers a file write but keeps nothing.
	loseFiles bool
	writes    int
	// clock is the test's clock; bootedAt and boots make the uptime and
	// boot ID the agent reports.
	clock    func() time.Time
	bootedAt time.Time
	boots    int
}

// setPhase is the phase the agent reports from now on.
func (h *fakeHost) setPhase(p agentv1.Phase) {
	h.mu.Lock()
	h.st.Phase = p
	h.mu.Unlock()
}

// reply answers v as JSON with code.
func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// serve is the host's agent API over TLS: the disk's calls
// (handleDisk), status, reboot, kubeadm and files.
func (f *fakeHost) serve(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	f.handleDisk(mux)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.st.Images = f.disk.Images().Wire()
		if f.st.OS != nil {
			f.st.OS.UptimeSeconds = f.clock().Sub(f.bootedAt).Seconds()
		}
		reply(w, 200, f.st)
	})
	mux.HandleFunc("POST /v1/reboot", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		f.reboots++
		f.mu.Unlock()
		reply(w, 202, map[string]string{"status": "rebooting"})
	})
	mux.HandleFunc("POST /v1/kubeadm/upgrade", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.st.Kubeadm = &agentv1.Kubeadm{KubernetesVersion: cmp.Or(f.versionCfg, f.st.OS.Image.KubernetesVersion), FeatureGates: f.gatesCfg}
		reply(w, 200, f.st.Kubeadm)
	})
	mux.HandleFunc("PUT /v1/files", func(w http.ResponseWriter, r *http.Request) {
		var req agentv1.FilesRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.writes++
		if f.st.Files == nil {
			f.st.Files = map[string]string{}
		}
		for path, content := range req.Files {
			if !f.loseFiles {
				f.st.Files[path] = agentv1.FileSum(content)
			}
		}
		reply(w, 200, f.st.Files)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// handleDisk serves the update contract on the fake's disk model:
// stage, activate and the health check that commits.
func (f *fakeHost) handleDisk(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/stage", func(w http.ResponseWriter, r *http.Request) {
		var req agentv1.StageRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.staged = req.URL
		root, err := f.disk.BeginStage(req.URL, req.SHA256, 2048)
		if err == nil {
			err = f.disk.FinishStage(root)
		}
		if err != nil {
			reply(w, 409, map[string]string{"error": err.Error()})
			return
		}
		reply(w, 200, agentv1.StageResult{Root: agentv1.RootID(root)})
	})
	mux.HandleFunc("POST /v1/activate", func(w http.ResponseWriter, r *http.Request) {
		var req agentv1.ActivateRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if err := f.disk.Activate(disk.RootID(req.Root), req.Tries); err != nil {
			reply(w, 409, map[string]string{"error": err.Error()})
			return
		}
		reply(w, 200, req)
	})
	mux.HandleFunc("POST /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.healthy {
			reply(w, 503, agentv1.Health{Reason: "link down on eno1"})
			return
		}
		if err := f.disk.Commit(); err != nil {
			reply(w, 409, map[string]string{"error": err.Error()})
			return
		}
		reply(w, 200, agentv1.Health{Healthy: true})
	})
}

// imageOf is the image URL of each version (what the fake stages, by
// URL).
var imageOf = map[string]infrav1.Image{"v1.35.3": oldImage, "v1.36.3": newImage}

// boot is the host coming up at t on the image of version after graceful
// reboots (an OSTree disk finalises as the OS shuts down): the disk's
// bootloader runs as many boots as it takes to get there, so "v1.35.3"
// after an activated v1.36.3 is the bootloader falling back once the new
// image's tries are spent.
func (f *fakeHost) boot(t *testing.T, version string, at time.Time, kubeadmGates map[string]bool) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for try := 0; ; try++ {
		if _, due := f.disk.BeginFinalise(); due {
			f.disk.FinishFinalise()
		}
		f.disk.PowerLoss()
		dec := f.disk.SelectBoot()
		if dec.Image == imageOf[version].URL {
			f.boots++
			f.bootedAt = at
			f.st.OS = &agentv1.RunningOS{Source: agentv1.FromDisk, Root: agentv1.RootID(dec.Root), Trial: dec.Trial,
				BootID: fmt.Sprintf("boot-%d", f.boots), Image: imagev1.Manifest{Name: "img-" + version, KubernetesVersion: version}}
			break
		}
		if try == 3 {
			t.Fatalf("the %s disk does not boot %s: %+v", f.disk.Kind, version, dec)
		}
	}
	f.st.Kubeadm = &agentv1.Kubeadm{KubernetesVersion: version, FeatureGates: kubeadmGates}
}

type fixedWorkloads struct{ c client.Client }

func (w fixedWorkloads) Client(context.Context, string, string) (client.Client, error) {
	return w.c, nil
}

// stepWorld is one control-plane Machine, its BareMetalMachine and a
// host without a BMC (rebooted through its agent), its Node, and a clock
// the test moves.
type stepWorld struct {
	t       *testing.T
	now     time.Time
	host    *fakeHost
	mgmt    client.Client
	wl      client.Client
	u       *Updater
	machine *clusterv1.Machine
	bmm     *infrav1.BareMetalMachine
	kc      *bootstrapv1.KubeadmConfig
}

var (
	oldImage = infrav1.Image{URL: "http://images/v1.35.3", Checksum: "aa"}
	newImage = infrav1.Image{URL: "http://images/v1.36.3", Checksum: "bb"}
)

func newStepWorld(t *testing.T) *stepWorld {
	return newStepWorldOS(t, disk.AB)
}

// newStepWorldOS is newStepWorld with a host of kind, installed with the
// old image and committed.
func newStepWorldOS(t *testing.T, kind disk.Kind) *stepWorld {
	w := &stepWorld{t: t, now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	d, err := disk.New(kind, "recovery", 0)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := d.BeginStage(oldImage.URL, oldImage.Checksum, 2048)
	d.FinishStage(root)
	d.Activate(root, 1)
	w.host = &fakeHost{healthy: true, disk: d, st: agentv1.Status{Host: "node-0"}, clock: func() time.Time { return w.now }}
	w.host.boot(w.t, "v1.35.3", w.now.Add(-time.Hour), map[string]bool{"ControlPlaneKubeletLocalMode": true})
	d.Commit()
	srv := w.host.serve(t)

	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme, metal3.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	w.machine = &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-1", UID: "u1",
		Labels: map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: "c-cp"}},
		Spec:   clusterv1.MachineSpec{ClusterName: "c", Version: "v1.36.3"},
		Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "cp-1"}}}
	w.bmm = &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-1"},
		Spec: infrav1.BareMetalMachineSpec{Image: newImage}, Status: infrav1.BareMetalMachineStatus{Host: "node-0"}}
	w.kc = &bootstrapv1.KubeadmConfig{} // v1.36.3: KCP sets no feature gate
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "node-0"}}
	w.mgmt = fake.NewClientBuilder().WithScheme(s).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(s)).WithObjects(w.machine.DeepCopy(), w.bmm.DeepCopy(), bmh).WithStatusSubresource(&infrav1.BareMetalMachine{}).Build()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Annotations: map[string]string{agentv1.AgentURLAnnotation: srv.URL}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.35.3"}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	w.wl = fake.NewClientBuilder().WithScheme(s).WithObjects(node).WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}).Build()
	w.u = &Updater{Client: w.mgmt, AgentHTTP: srv.Client(), Workloads: fixedWorkloads{w.wl}, HealthGrace: 30 * time.Second,
		Deadline: time.Hour, Now: func() time.Time { return w.now }}
	return w
}

// step runs one UpdateMachine step; staging runs in the background, so a
// step that started one waits for it.
func (w *stepWorld) step() progress {
	w.t.Helper()
	p, err := w.u.step(context.Background(), w.machine, w.bmm, w.kc)
	if err != nil {
		w.t.Fatalf("step: %v", err)
	}
	for i := 0; i < 100 && strings.HasPrefix(p.message, "staging"); i++ {
		time.Sleep(5 * time.Millisecond)
		if p, err = w.u.step(context.Background(), w.machine, w.bmm, w.kc); err != nil {
			w.t.Fatalf("step: %v", err)
		}
	}
	return p
}

// filesOnly makes the desired Machine the one it runs with the
// KubeadmConfig's /tmp/test changed (ClusterInPlaceUpdateSpec's change).
func (w *stepWorld) filesOnly(content string) {
	w.bmm.Spec.Image = oldImage
	w.machine.Spec.Version = "v1.35.3"
	stored := &clusterv1.Machine{}
	if err := w.mgmt.Get(context.Background(), client.ObjectKeyFromObject(w.machine), stored); err != nil {
		w.t.Fatal(err)
	}
	stored.Spec.Version = w.machine.Spec.Version
	if err := w.mgmt.Update(context.Background(), stored); err != nil {
		w.t.Fatal(err)
	}
	w.kc = &bootstrapv1.KubeadmConfig{Spec: bootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: bootstrapv1.ClusterConfiguration{FeatureGates: map[string]bool{"ControlPlaneKubeletLocalMode": true}},
		Files:                []bootstrapv1.File{{Path: "/tmp/test", Content: content}}}}
}

func (w *stepWorld) nodeAt(version string) {
	n := &corev1.Node{}
	if err := w.wl.Get(context.Background(), client.ObjectKey{Name: "cp-1"}, n); err != nil {
		w.t.Fatal(err)
	}
	n.Status.NodeInfo.KubeletVersion = version
	if err := w.wl.Status().Update(context.Background(), n); err != nil {
		w.t.Fatal(err)
	}
}

func (w *stepWorld) annotations() map[string]string {
	b := &infrav1.BareMetalMachine{}
	if err := w.mgmt.Get(context.Background(), client.ObjectKeyFromObject(w.bmm), b); err != nil {
		w.t.Fatal(err)
	}
	return b.Annotations
}

// ownedByKCP makes the world's Machine a KubeadmControlPlane's, as CAPI
// keeps one: the Cluster, the KCP at version asking for image (and NIC
// firmware fw) through its template, the Machine's references and its
// KubeadmConfig, all marked update-in-progress, the CRDs CAPI's contract
// helpers read, and the workload cluster's kubeadm-config at the version
// the Machine's update moved it to.
func (w *stepWorld) ownedByKCP(version string, image infrav1.Image, fw *infrav1.FirmwarePackage) {
	w.t.Helper()
	ctx := context.Background()
	updating := map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	tmpl := &infrav1.BareMetalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp-" + version},
		Spec: infrav1.BareMetalMachineTemplateSpec{Template: infrav1.BareMetalMachineTemplateResource{Spec: infrav1.BareMetalMachineSpec{Image: image, NICFirmware: fw}}}}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-cp", UID: "kcp-uid"}}
	kcp.Spec.Version = version
	kcp.Spec.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "BareMetalMachineTemplate", Name: tmpl.Name}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	kc := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-1", Annotations: updating},
		Spec: bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{Name: "cp-1"}}}}
	objs := []client.Object{tmpl, kcp, cluster, kc}
	for _, plural := range []string{"baremetalmachinetemplates", "baremetalmachines"} {
		objs = append(objs, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{
			Name: plural + "." + infrav1.GroupVersion.Group, Labels: map[string]string{"cluster.x-k8s.io/v1beta2": infrav1.GroupVersion.Version}}})
	}
	for _, o := range objs {
		if err := w.mgmt.Create(ctx, o); err != nil {
			w.t.Fatal(err)
		}
	}
	stored := &clusterv1.Machine{}
	if err := w.mgmt.Get(ctx, client.ObjectKeyFromObject(w.machine), stored); err != nil {
		w.t.Fatal(err)
	}
	stored.Annotations = updating
	stored.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "BareMetalMachine", Name: w.bmm.Name}
	stored.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: kc.Name}
	if err := w.mgmt.Update(ctx, stored); err != nil {
		w.t.Fatal(err)
	}
	// The failed update's objects, as KCP's trigger wrote them: under
	// its field manager, so that an apply of KCP's spec now removes
	// what it no longer asks for.
	bmm := &infrav1.BareMetalMachine{TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "BareMetalMachine"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: w.bmm.Name, Annotations: map[string]string{clusterv1.UpdateInProgressAnnotation: "",
			clusterv1.TemplateClonedFromNameAnnotation:      "c-cp-failed",
			clusterv1.TemplateClonedFromGroupKindAnnotation: "BareMetalMachineTemplate." + infrav1.GroupVersion.Group}},
		Spec: w.bmm.Spec}
	if err := askcp.Apply(ctx, w.mgmt, bmm); err != nil {
		w.t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"},
		Data: map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"}}
	if err := w.wl.Create(ctx, cm); err != nil {
		w.t.Fatal(err)
	}
	w.machine, w.kc = stored, kc
}

// failingMachineApply fails the next failures server-side applies of a
// Machine, as an API server whose Machine webhook cannot be called does.
type failingMachineApply struct {
	client.Client
	failures int
}

func (c *failingMachineApply) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, machine := obj.(*clusterv1.Machine); machine && patch.Type() == types.ApplyPatchType && c.failures > 0 {
		c.failures--
		return fmt.Errorf("failed calling webhook %q: connection refused", "validation.machine.cluster.x-k8s.io")
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// failByFallback takes the update into the new image, then has the host
// fall back to the old one (kubeadm applying gates): the update fails.
func (w *stepWorld) failByFallback(gates map[string]bool) {
	w.t.Helper()
	w.step()
	w.now = w.now.Add(time.Minute)
	w.host.boot(w.t, "v1.35.3", w.now.Add(-time.Second), gates)
	if p := w.step(); !p.failed {
		w.t.Fatalf("the fallback: %+v; want a failure", p)
	}
}

// followStored makes the world's desired objects the stored ones, as
// CAPI's next UpdateMachine call carries them.
func (w *stepWorld) followStored() {
	w.t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{w.machine, w.bmm, w.kc} {
		if err := w.mgmt.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			w.t.Fatal(err)
		}
	}
}

// kubeadmConfigVersion is the kubernetesVersion of the workload
// cluster's kubeadm-config.
func (w *stepWorld) kubeadmConfigVersion() string {
	w.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := w.wl.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, cm); err != nil {
		w.t.Fatal(err)
	}
	_, rest, _ := strings.Cut(cm.Data["ClusterConfiguration"], "kubernetesVersion: ")
	v, _, _ := strings.Cut(rest, "\n")
	return v
}

// updaterStep is one case of the update's step machine: what the test does
// to the host and the world, and what the Updater must answer at the end
// ("done", or a prefix of "running: ..." or "failed: ...").
type updaterStep struct {
	name string
	run  func(w *stepWorld) progress
	want string // "done", "running: ...", "failed: ..." (a prefix of the message)
}

// updaterSteps are TestUpdaterSteps's cases.
var updaterSteps = []updaterStep{
	{name: "stages, activates and reboots the old OS", want: "running: rebooting cp-1 into http://images/v1.36.3", run: func(w *stepWorld) progress {
		p := w.step()
		if w.host.staged != newImage.URL || w.host.reboots != 1 {
			w.t.Errorf("staged %q, reboots %d", w.host.staged, w.host.reboots)
		}
		return p
	}},
	{name: "the new image booted and is healthy: done at the new version", want: "done", run: func(w *stepWorld) progress {
		w.step()
		w.host.boot(w.t, "v1.36.3", w.now.Add(time.Second), nil)
		w.now = w.now.Add(time.Minute)
		if p := w.step(); !strings.HasPrefix(p.message, "waiting for node cp-1 to be Ready at v1.36.3") {
			w.t.Errorf("before the kubelet reports the new version: %+v", p)
		}
		w.nodeAt("v1.36.3")
		return w.step()
	}},
	{name: "unhealthy within the grace: waits", want: "running: health check of img-v1.36.3: link down", run: func(w *stepWorld) progress {
		w.step()
		w.host.healthy = false
		w.now = w.now.Add(time.Minute)
		w.host.boot(w.t, "v1.36.3", w.now.Add(-10*time.Second), nil)
		return w.step()
	}},
	{name: "unhealthy past the grace: fails and reboots to fall back", want: "failed: health check of img-v1.36.3 failed: link down on eno1; rebooting to fall back to http://images/v1.35.3", run: func(w *stepWorld) progress {
		w.step()
		w.host.healthy = false
		w.now = w.now.Add(time.Minute)
		w.host.boot(w.t, "v1.36.3", w.now.Add(-40*time.Second), nil)
		p := w.step()
		if w.host.reboots != 2 {
			w.t.Errorf("reboots %d, want 2 (into B, back to A)", w.host.reboots)
		}
		if key, _, ok := recordedFailure(&infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Annotations: w.annotations()}}); !ok || key != updateKey(newImage, nil) {
			w.t.Errorf("the failure is not kept: %v", w.annotations())
		}
		return p
	}},
	{name: "back on the old image after the reboot: the new one did not boot", want: "failed: http://images/v1.36.3 did not boot: the host fell back to img-v1.35.3", run: func(w *stepWorld) progress {
		w.step()
		w.now = w.now.Add(time.Minute)
		w.host.boot(w.t, "v1.35.3", w.now.Add(-time.Second), map[string]bool{"ControlPlaneKubeletLocalMode": true})
		return w.step()
	}},
	{name: "the old OS still up, not shutting down, 30 s after the reboot: reset", want: "running: cp-1 still runs the old OS 31s after the reboot was asked: reset it", run: func(w *stepWorld) progress {
		w.step()
		w.now = w.now.Add(31 * time.Second)
		p := w.step()
		if w.host.reboots != 2 {
			w.t.Errorf("reboots %d, want 2", w.host.reboots)
		}
		return p
	}},
	{name: "the old OS shutting down 90 s after the reboot: waits, no reset", want: "running: cp-1 is shutting down into the new image (1m30s since the reboot was asked)", run: func(w *stepWorld) progress {
		w.step()
		w.host.setPhase(agentv1.PhaseShuttingDown)
		w.now = w.now.Add(90 * time.Second)
		p := w.step()
		if w.host.reboots != 1 {
			w.t.Errorf("reboots %d, want 1: a host shutting down cleanly was reset", w.host.reboots)
		}
		return p
	}},
	{name: "the old OS still shutting down past the shutdown timeout: reset", want: "running: cp-1 did not finish shutting down in 10m0s: reset it", run: func(w *stepWorld) progress {
		w.step()
		w.host.setPhase(agentv1.PhaseShuttingDown)
		w.now = w.now.Add(10*time.Minute + time.Second)
		p := w.step()
		if w.host.reboots != 2 {
			w.t.Errorf("reboots %d, want 2", w.host.reboots)
		}
		return p
	}},
	{name: "kubeadm applied other feature gates: runs kubeadm upgrade node once, then fails", want: "failed: kubeadm upgrade node on node-0 applied feature gates map[ControlPlaneKubeletLocalMode:true]", run: func(w *stepWorld) progress {
		w.step()
		// The cluster's kubeadm-config was never updated (KCP's work
		// skipped): the host keeps the old version's gate.
		w.host.gatesCfg = map[string]bool{"ControlPlaneKubeletLocalMode": true}
		w.host.boot(w.t, "v1.36.3", w.now.Add(time.Second), map[string]bool{"ControlPlaneKubeletLocalMode": true})
		w.now = w.now.Add(time.Minute)
		return w.step()
	}},
	{name: "kubeadm-config still at the old version: kubeadm upgrade node writes the old control plane, and it fails naming it", want: "failed: kubeadm on node-0 last wrote the control plane at v1.35.3 (the cluster's kubeadm-config kubernetesVersion); the host's kubelet is v1.36.3", run: func(w *stepWorld) progress {
		w.step()
		w.host.versionCfg = "v1.35.3"
		w.host.boot(w.t, "v1.36.3", w.now.Add(time.Second), nil)
		w.host.st.Kubeadm.KubernetesVersion = "v1.35.3"
		w.now = w.now.Add(time.Minute)
		return w.step()
	}},
	{name: "kubeadm behind the cluster's kubeadm-config: kubeadm upgrade node brings it", want: "running: waiting for node cp-1", run: func(w *stepWorld) progress {
		w.step()
		w.host.gatesCfg = nil
		w.host.boot(w.t, "v1.36.3", w.now.Add(time.Second), map[string]bool{"ControlPlaneKubeletLocalMode": true})
		w.now = w.now.Add(time.Minute)
		return w.step()
	}},
	{name: "kubeadm reports nothing applied (its agent restarted): kubeadm upgrade node runs", want: "running: waiting for node cp-1", run: func(w *stepWorld) progress {
		w.step()
		w.host.boot(w.t, "v1.36.3", w.now.Add(time.Second), nil)
		w.host.st.Kubeadm = nil
		w.now = w.now.Add(time.Minute)
		return w.step()
	}},
	{name: "a files change on the image it runs: written, no drain or reboot, done", want: "done", run: func(w *stepWorld) progress {
		w.filesOnly("third in-place update")
		p := w.step()
		if w.host.writes != 1 || w.host.reboots != 0 || w.host.staged != "" {
			w.t.Errorf("writes %d, reboots %d, staged %q; want one write and nothing else", w.host.writes, w.host.reboots, w.host.staged)
		}
		if w.host.st.Files["/tmp/test"] != agentv1.FileSum("third in-place update") {
			w.t.Errorf("host files %v", w.host.st.Files)
		}
		if p2 := w.step(); !p2.done || w.host.writes != 1 {
			w.t.Errorf("again: %+v after %d writes; want done without writing again", p2, w.host.writes)
		}
		return p
	}},
	{name: "a host that does not keep the files: fails naming them", want: "failed: host of cp-1 does not report the files written: /tmp/test", run: func(w *stepWorld) progress {
		w.filesOnly("x")
		w.host.loseFiles = true
		return w.step()
	}},
	{name: "past the deadline: fails wherever it is", want: "failed: the update to http://images/v1.36.3 did not finish within 1h0m0s", run: func(w *stepWorld) progress {
		w.step()
		w.now = w.now.Add(2 * time.Hour)
		return w.step()
	}},
	{name: "a failure whose KCP was reverted goes on to what the KCP asks", want: "done", run: func(w *stepWorld) progress {
		w.ownedByKCP("v1.35.3", oldImage, nil)
		w.failByFallback(map[string]bool{"ControlPlaneKubeletLocalMode": true})
		p := w.step() // the KCP asks for the old image: the update is pointed at it
		if !p.abandoned || p.done || !strings.Contains(p.message, "pointing the Machine at it") {
			w.t.Fatalf("after the revert: %+v; want the failed update abandoned and the Machine pointed at the KCP's spec, not done", p)
		}
		w.followStored()
		if p := w.step(); !p.abandoned || p.done || !strings.Contains(p.message, "the Machine asks for it too") {
			w.t.Fatalf("CAPI's call with the retargeted Machine: %+v; want the update going on", p)
		}
		if a := w.annotations(); a[FailedAnnotation] != "" || a[RebootAnnotation] != "" {
			w.t.Errorf("annotations kept after abandoning: %v", a)
		}
		w.followStored()
		if w.machine.Spec.Version != "v1.35.3" || w.bmm.Spec.Image != oldImage {
			w.t.Errorf("the Machine asks for %s on %s after the revert; want the KCP's v1.35.3 on %s", w.machine.Spec.Version, w.bmm.Spec.Image.URL, oldImage.URL)
		}
		for name, o := range map[string]client.Object{"Machine": w.machine, "BareMetalMachine": w.bmm, "KubeadmConfig": w.kc} {
			if _, ok := o.GetAnnotations()[clusterv1.UpdateInProgressAnnotation]; !ok {
				w.t.Errorf("%s lost its update-in-progress mark: the update is not over", name)
			}
		}
		if v := w.kubeadmConfigVersion(); v != "v1.35.3" {
			w.t.Errorf("the workload's kubeadm-config says %s after the revert; want the KCP's v1.35.3 (KCP moves it only before it rolls a Machine)", v)
		}
		return w.step() // CAPI's next call brings what the Machine asks now, which the host runs
	}},
	{name: "a retarget cut short is done again whole", want: "done", run: func(w *stepWorld) progress {
		w.ownedByKCP("v1.35.3", oldImage, nil)
		w.failByFallback(map[string]bool{"ControlPlaneKubeletLocalMode": true})
		// The Machine's apply fails: the BareMetalMachine and the
		// KubeadmConfig ask for the KCP's spec, the Machine does not.
		w.u.Client = &failingMachineApply{Client: w.mgmt, failures: 1}
		if _, err := w.u.step(context.Background(), w.machine, w.bmm, w.kc); err == nil {
			w.t.Fatal("the retarget's Machine write failed, and the step said nothing")
		}
		w.followStored()
		if w.bmm.Spec.Image != oldImage || w.machine.Spec.Version != "v1.36.3" {
			w.t.Fatalf("not the cut-short state the test needs: BareMetalMachine on %s, Machine at %s", w.bmm.Spec.Image.URL, w.machine.Spec.Version)
		}
		p := w.step() // CAPI calls again with what is stored: half retargeted
		if !p.abandoned || p.done {
			w.t.Fatalf("after the cut-short retarget: %+v; want it done again, not the update answered", p)
		}
		w.followStored()
		if w.machine.Spec.Version != "v1.35.3" {
			w.t.Fatalf("the Machine still asks for %s", w.machine.Spec.Version)
		}
		w.step() // CAPI's call brings it: the update goes on
		w.followStored()
		return w.step()
	}},
	{name: "a retarget KCP took back from a stale cache is written again", want: "done", run: func(w *stepWorld) progress {
		w.ownedByKCP("v1.35.3", oldImage, nil)
		w.failByFallback(map[string]bool{"ControlPlaneKubeletLocalMode": true})
		w.step() // pointed at the KCP's spec
		// KCP's syncMachines applies the Machine under the same field
		// manager from a cache that has not seen the retarget.
		stored := &clusterv1.Machine{}
		if err := w.mgmt.Get(context.Background(), client.ObjectKeyFromObject(w.machine), stored); err != nil {
			w.t.Fatal(err)
		}
		stored.Spec.Version = "v1.36.3"
		if err := w.mgmt.Update(context.Background(), stored); err != nil {
			w.t.Fatal(err)
		}
		w.followStored()
		if p := w.step(); !strings.Contains(p.message, "pointing the Machine at it") {
			w.t.Fatalf("CAPI's call with the failed version again: %+v; want the retarget written again", p)
		}
		w.followStored()
		if w.machine.Spec.Version != "v1.35.3" {
			w.t.Fatalf("the Machine asks for %s after the second retarget", w.machine.Spec.Version)
		}
		w.step()
		w.followStored()
		return w.step()
	}},
	{name: "a KCP's Machine without cloned-from annotations stays failed, saying why", want: "failed: the in-place update failed (the flash failed) and KubeadmControlPlane c-cp now asks for http://images/v1.35.3; the Machine cannot be pointed at it (KCP computes no desired objects for it: its BareMetalMachine cp-1 lacks the cluster.x-k8s.io/cloned-from-name annotations", run: func(w *stepWorld) progress {
		ctx := context.Background()
		w.ownedByKCP("v1.35.3", oldImage, nil)
		stored := &infrav1.BareMetalMachine{}
		if err := w.mgmt.Get(ctx, client.ObjectKeyFromObject(w.bmm), stored); err != nil {
			w.t.Fatal(err)
		}
		delete(stored.Annotations, clusterv1.TemplateClonedFromNameAnnotation)
		delete(stored.Annotations, clusterv1.TemplateClonedFromGroupKindAnnotation)
		stored.Annotations[FailedAnnotation] = updateKey(w.bmm.Spec.Image, nil) + " the flash failed"
		if err := w.mgmt.Update(ctx, stored); err != nil {
			w.t.Fatal(err)
		}
		p := w.step()
		if v := w.kubeadmConfigVersion(); v != "v1.36.3" {
			w.t.Errorf("the kubeadm-config was moved to %s for a Machine that cannot be pointed at the KCP", v)
		}
		return p
	}},
	{name: "a failed firmware update whose KCP reverted the firmware alone goes on without it", want: "running: the in-place update failed (the flash failed) and KubeadmControlPlane c-cp now asks for http://images/v1.36.3: pointing the Machine at it", run: func(w *stepWorld) progress {
		ctx := context.Background()
		fw := &infrav1.FirmwarePackage{URL: "http://firmware/nvm-9.50.json"}
		w.bmm.Spec.NICFirmware = fw
		w.ownedByKCP("v1.36.3", w.bmm.Spec.Image, nil)
		stored := &infrav1.BareMetalMachine{}
		if err := w.mgmt.Get(ctx, client.ObjectKeyFromObject(w.bmm), stored); err != nil {
			w.t.Fatal(err)
		}
		stored.Annotations[FailedAnnotation] = updateKey(w.bmm.Spec.Image, fw) + " the flash failed"
		if err := w.mgmt.Update(ctx, stored); err != nil {
			w.t.Fatal(err)
		}
		p := w.step()
		w.followStored()
		if w.bmm.Spec.NICFirmware != nil {
			w.t.Errorf("the BareMetalMachine still asks for NIC firmware %s; the KCP asks for none", w.bmm.Spec.NICFirmware.URL)
		}
		return p
	}},
	{name: "a failure whose MachineDeployment was reverted stays failed, saying what it asks and how it gets out", want: "failed: the in-place update failed (http://images/v1.36.3 did not boot: the host fell back to img-v1.35.3) and MachineDeployment c-md now asks for http://images/v1.35.3; the Machine cannot be pointed at it (CAPI moves a MachineSet's Machine to another MachineSet only when it is not updating): it stays failed until it is deleted", run: func(w *stepWorld) progress {
		ctx := context.Background()
		tmpl := &infrav1.BareMetalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-md-from"},
			Spec: infrav1.BareMetalMachineTemplateSpec{Template: infrav1.BareMetalMachineTemplateResource{Spec: infrav1.BareMetalMachineSpec{Image: oldImage}}}}
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-md"}}
		md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "BareMetalMachineTemplate", Name: "c-md-from"}
		for _, o := range []client.Object{tmpl, md} {
			if err := w.mgmt.Create(ctx, o); err != nil {
				w.t.Fatal(err)
			}
		}
		w.machine.Labels = map[string]string{clusterv1.MachineDeploymentNameLabel: "c-md"}
		w.failByFallback(nil)
		p := w.step()
		if a := w.annotations(); a[FailedAnnotation] == "" {
			w.t.Errorf("the failure was forgotten, so a later call could answer done at the failed spec: %v", a)
		}
		return p
	}},
}

// The update's step machine, each case from the host as it reports
// itself to the end the Updater answers.
func TestUpdaterSteps(t *testing.T) {
	for _, tc := range updaterSteps {
		for _, kind := range disk.Kinds {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				w := newStepWorldOS(t, kind)
				p := tc.run(w)
				got := "running: " + p.message
				switch {
				case p.failed:
					got = "failed: " + p.message
				case p.done && tc.want == "done":
					got = "done"
				case p.done:
					got = "done: " + p.message
				}
				if !strings.HasPrefix(got, tc.want) {
					t.Fatalf("got %q\nwant %q...", got, tc.want)
				}
			})
		}
	}
}

// A power cut while an OSTree host finalises the staged deployment loses
// it: the host runs the old image again with the new one gone from its
// disk. That is no failed image: the update stages it again and reboots.
func TestUpdaterStagesAgainAnImageLostBeforeItBooted(t *testing.T) {
	w := newStepWorldOS(t, disk.OSTree)
	if p := w.step(); !strings.HasPrefix(p.message, "rebooting cp-1 into") {
		t.Fatalf("first step: %+v", p)
	}
	w.host.mu.Lock()
	if _, due := w.host.disk.BeginFinalise(); !due {
		t.Fatal("nothing to finalise after the activation")
	}
	w.host.disk.PowerLoss()
	w.host.mu.Unlock()
	w.now = w.now.Add(time.Minute)
	w.host.boot(t, "v1.35.3", w.now.Add(-time.Second), map[string]bool{"ControlPlaneKubeletLocalMode": true})
	p := w.step()
	if p.failed || !strings.Contains(p.message, "was lost before it booted") {
		t.Fatalf("after the lost finalisation: %+v; want staging again, not a failure", p)
	}
	if p := w.step(); p.failed || !strings.HasPrefix(p.message, "rebooting cp-1 into") || w.host.reboots != 2 {
		t.Fatalf("then: %+v after %d reboots; want staged again and rebooted", p, w.host.reboots)
	}
	w.host.boot(t, "v1.36.3", w.now.Add(time.Second), nil)
	w.now = w.now.Add(time.Minute)
	w.nodeAt("v1.36.3")
	if p := w.step(); !p.done {
		t.Fatalf("after the second reboot: %+v; want done", p)
	}
}
