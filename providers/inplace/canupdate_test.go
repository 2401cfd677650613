package inplace

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// canUpdateWorld is what the extension reads while it decides: image
// manifests, firmware packages and the host's report, from the lab's own
// catalogs.
type canUpdateWorld struct {
	t        *testing.T
	images   map[string]imagev1.Manifest // by URL
	nvms     nic.Catalog
	hostNVM  string // what the host's ports run
	hostDown bool   // the host cannot be read
}

const (
	imgV135    = "http://images/ubuntu-24.04-k8s-v1.35.3"
	imgV136    = "http://images/ubuntu-24.04-k8s-v1.36.3"
	imgV136New = "http://images/ubuntu-24.04-k8s-v1.36.3-i40e-2.28"
	imgV136Pre = "http://images/ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview"
)

func newCanUpdateWorld(t *testing.T) *canUpdateWorld {
	catalog, err := image.LoadCatalog("../../fixtures/images/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nvms, err := nic.LoadCatalog("../../fixtures/nic/nvm-images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := &canUpdateWorld{t: t, images: map[string]imagev1.Manifest{}, nvms: nvms, hostNVM: "x710-nvm-9.20"}
	for name, b := range catalog.Images {
		w.images["http://images/"+name] = b.Manifest()
	}
	return w
}

func (w *canUpdateWorld) handlers() *Handlers {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{infrav1.AddToScheme, bootstrapv1.AddToScheme} {
		if err := add(s); err != nil {
			w.t.Fatal(err)
		}
	}
	return NewHandlers(serializer.NewCodecFactory(s).UniversalDecoder(infrav1.GroupVersion, bootstrapv1.GroupVersion), &Updater{
		ReadManifest: func(_ context.Context, url string) (imagev1.Manifest, error) {
			m, ok := w.images[url]
			if !ok {
				return imagev1.Manifest{}, errors.New("404 " + url)
			}
			return m, nil
		},
		ReadFirmware: func(_ context.Context, url string) (imagev1.NVMImage, error) {
			name := url[strings.LastIndex(url, "/")+1:]
			nvm, ok := w.nvms[name]
			if !ok {
				return imagev1.NVMImage{}, errors.New("404 " + url)
			}
			return nvm, nil
		},
		ReadHost: w.readHost,
	})
}

func (w *canUpdateWorld) readHost(_ context.Context, key client.ObjectKey) (agentv1.Status, error) {
	if w.hostDown {
		return agentv1.Status{}, errors.New("host agent not answering")
	}
	nvm := w.nvms[w.hostNVM]
	return agentv1.Status{Host: "host-" + key.Name, OS: &agentv1.RunningOS{Source: agentv1.FromDisk, Image: w.images[imgV135],
		Links: []agentv1.PortLink{{Port: "eno1", Firmware: nvm.Firmware, API: nvm.API}, {Port: "eno2", Firmware: nvm.Firmware, API: nvm.API}}}}, nil
}

// machineChange is one desired change of a control-plane Machine.
type machineChange struct {
	version, image string
	firmware       string // NVM package name, "" for none
	selector       map[string]string
	files          []bootstrapv1.File // the desired KubeadmConfig's files
	currentFiles   []bootstrapv1.File // the current one's
	infraKind      string
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// request builds CanUpdateMachine as KCP does: the current objects at
// v1.35.3 (with KCP's per-version feature gate), the desired ones.
func (w *canUpdateWorld) request(c machineChange) *runtimehooksv1.CanUpdateMachineRequest {
	kind := c.infraKind
	if kind == "" {
		kind = "BareMetalMachine"
	}
	bmm := func(img string, fw string, sel map[string]string) *infrav1.BareMetalMachine {
		m := &infrav1.BareMetalMachine{TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Namespace: "ns"},
			Spec:       infrav1.BareMetalMachineSpec{Image: infrav1.Image{URL: img, Checksum: "sha-" + img}, HostSelector: metav1.LabelSelector{MatchLabels: sel}}}
		if fw != "" {
			m.Spec.NICFirmware = &infrav1.FirmwarePackage{URL: "http://firmware/" + fw}
		}
		return m
	}
	kc := func(gates map[string]bool, files []bootstrapv1.File) *bootstrapv1.KubeadmConfig {
		return &bootstrapv1.KubeadmConfig{TypeMeta: metav1.TypeMeta{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig"},
			ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Namespace: "ns"},
			Spec:       bootstrapv1.KubeadmConfigSpec{ClusterConfiguration: bootstrapv1.ClusterConfiguration{FeatureGates: gates}, Files: files}}
	}
	var desiredGates map[string]bool
	if c.version == "v1.35.3" {
		desiredGates = map[string]bool{"ControlPlaneKubeletLocalMode": true}
	}
	machine := func(v string) clusterv1.Machine {
		return clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Namespace: "ns"}, Spec: clusterv1.MachineSpec{ClusterName: "c", Version: v}}
	}
	return &runtimehooksv1.CanUpdateMachineRequest{
		Current: runtimehooksv1.CanUpdateMachineRequestObjects{Machine: machine("v1.35.3"),
			InfrastructureMachine: raw(w.t, bmm(imgV135, "", nil)), BootstrapConfig: raw(w.t, kc(map[string]bool{"ControlPlaneKubeletLocalMode": true}, c.currentFiles))},
		Desired: runtimehooksv1.CanUpdateMachineRequestObjects{Machine: machine(c.version),
			InfrastructureMachine: raw(w.t, bmm(c.image, c.firmware, c.selector)), BootstrapConfig: raw(w.t, kc(desiredGates, c.files))},
	}
}

// The decisions CanUpdateMachine makes, each judged as KCP judges the
// answer: the patches applied to the current objects must make them equal
// the desired ones, or KCP rolls the Machine out.
func TestCanUpdateMachineDecidesEverything(t *testing.T) {
	for _, tc := range []struct {
		name      string
		change    machineChange
		nvm       string // the host's NVM, default x710-nvm-9.20
		hostDown  bool
		inPlace   bool
		failure   bool   // the question could not be answered (KCP asks again)
		mentions  string // in the response message or the first difference
		stillDiff string // what is left different when not in place
	}{
		{name: "version with an image that carries it", change: machineChange{version: "v1.36.3", image: imgV136}, inPlace: true},
		{name: "an image that does not carry the version: no patch", change: machineChange{version: "v1.36.3", image: imgV135},
			mentions: "carries Kubernetes v1.35.3, not v1.36.3", stillDiff: "version"},
		{name: "NVM with an order that keeps the NIC up", change: machineChange{version: "v1.36.3", image: imgV136New, firmware: "x710-nvm-9.50"}, inPlace: true},
		{name: "NVM no order keeps up: no patch", change: machineChange{version: "v1.36.3", image: imgV136Pre, firmware: "x710-nvm-10.0-next"},
			mentions: "no order keeps the NIC up", stillDiff: "version"},
		{name: "NVM already on the host: nothing to flash", change: machineChange{version: "v1.36.3", image: imgV136Pre, firmware: "x710-nvm-10.0-next"}, nvm: "x710-nvm-10.0-next", inPlace: true},
		{name: "host unreadable: asked again", change: machineChange{version: "v1.36.3", image: imgV136New, firmware: "x710-nvm-9.50"}, hostDown: true, failure: true, mentions: "host agent not answering"},
		{name: "unknown image: asked again", change: machineChange{version: "v1.36.3", image: "http://images/missing"}, failure: true, mentions: "404"},
		{name: "a foreign infrastructure kind: empty answer, not a Failure", change: machineChange{version: "v1.36.3", image: imgV136, infraKind: "DevMachine"},
			stillDiff: "version"},
		{name: "a new host selector: left different", change: machineChange{version: "v1.36.3", image: imgV136, selector: map[string]string{"rack": "b"}},
			stillDiff: "hostSelector"},
		{name: "a file added or changed: written in place", change: machineChange{version: "v1.36.3", image: imgV136,
			currentFiles: []bootstrapv1.File{{Path: "/etc/motd", Content: "hi"}}, files: []bootstrapv1.File{{Path: "/etc/motd", Content: "hello"}, {Path: "/tmp/test", Content: "x"}}},
			inPlace: true},
		{name: "a file removed: left different", change: machineChange{version: "v1.36.3", image: imgV136, currentFiles: []bootstrapv1.File{{Path: "/etc/motd", Content: "hi"}}},
			stillDiff: "files"},
		{name: "a file from a Secret: left different", change: machineChange{version: "v1.36.3", image: imgV136,
			files: []bootstrapv1.File{{Path: "/etc/token", ContentFrom: bootstrapv1.FileSource{Secret: bootstrapv1.SecretFileSource{Name: "s", Key: "k"}}}}},
			stillDiff: "files"},
		{name: "a file with permissions: left different", change: machineChange{version: "v1.36.3", image: imgV136,
			files: []bootstrapv1.File{{Path: "/etc/motd", Content: "hi", Permissions: "0600"}}},
			stillDiff: "files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCanUpdateWorld(t)
			if tc.nvm != "" {
				w.hostNVM = tc.nvm
			}
			w.hostDown = tc.hostDown
			req := w.request(tc.change)
			resp := &runtimehooksv1.CanUpdateMachineResponse{}
			w.handlers().DoCanUpdateMachine(context.Background(), req, resp)
			if tc.failure {
				if resp.Status != runtimehooksv1.ResponseStatusFailure || !strings.Contains(resp.Message, tc.mentions) {
					t.Fatalf("answer %s %q; want a Failure mentioning %q", resp.Status, resp.Message, tc.mentions)
				}
				return
			}
			if resp.Status != runtimehooksv1.ResponseStatusSuccess {
				t.Fatalf("answer %s %q; want Success", resp.Status, resp.Message)
			}
			match, diffs, err := MatchesAfterPatches(req, resp)
			if err != nil {
				t.Fatal(err)
			}
			if match != tc.inPlace {
				t.Fatalf("in place = %v, want %v (differences: %v; message %q)", match, tc.inPlace, diffs, resp.Message)
			}
			if tc.mentions != "" && !strings.Contains(resp.Message, tc.mentions) {
				t.Fatalf("message %q; want it to mention %q", resp.Message, tc.mentions)
			}
			if tc.stillDiff != "" && !strings.Contains(strings.ToLower(strings.Join(diffs, "\n")), strings.ToLower(tc.stillDiff)) {
				t.Fatalf("differences %v; want one in %s", diffs, tc.stillDiff)
			}
			if !tc.inPlace && resp.MachinePatch.IsDefined() && tc.change.selector == nil && tc.change.files == nil && tc.change.currentFiles == nil {
				t.Fatalf("a refusal patched the Machine: %s", resp.MachinePatch.Patch)
			}
		})
	}
}

func TestPatchFromHoldsOnlyTheChange(t *testing.T) {
	a := &infrav1.BareMetalMachine{Spec: infrav1.BareMetalMachineSpec{Image: infrav1.Image{URL: "u1", Checksum: "c"}}}
	b := a.DeepCopy()
	b.Spec.Image.URL = "u2"
	p, err := patchFrom(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Patch) != `[{"op":"replace","path":"/spec/image/url","value":"u2"}]` {
		t.Fatalf("patch %s", p.Patch)
	}
}
