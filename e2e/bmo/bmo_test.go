//go:build metal3

package bmo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/upgradelab/upgradelab/e2e/ironic"
	"github.com/upgradelab/upgradelab/e2e/metal3src"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/site"
)

// stack is an API server, a lab, Ironic and BMO watching namespace ns.
type stack struct {
	c    client.Client
	site *site.Site
}

const ns = "metal3"

func startStack(t *testing.T, ctx context.Context, labFile string) *stack {
	t.Helper()
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := metal3src.Build(ctx, root, metal3src.BMO)
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(dir, "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = metal3.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	work := labtest.Dir(t)
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	def, err := lab.Load(filepath.Join(root, "fixtures", "labs", labFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := site.Start(ctx, site.Options{Lab: def, StateDir: filepath.Join(work, "lab"), Scale: ironic.MinScale})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ir, err := ironic.Start(ctx, ironic.Options{Dir: filepath.Join(work, "ironic"), TrustedCA: s.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ir.Stop)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	b, err := Start(ctx, Options{Dir: dir, Kubeconfig: kubeconfig, Namespace: ns, IronicURL: ir.BMOURL,
		DeployRamdisk: s.Lab.ImageServer().ImageURL("deploy-ramdisk-2026.10"), LogDir: work})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bmo.log (tail):\n%s", tail(filepath.Join(work, "bmo.log"), 40))
			t.Logf("ironic.log (tail):\n%s", tail(filepath.Join(work, "ironic", "ironic.log"), 40))
		}
	})
	return &stack{c: c, site: s}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// enroll creates host's BMC secret (its password, or a wrong one) and
// BareMetalHost, online, with image (nil: none); BMO inspects it in
// band first.
func (s *stack) enroll(t *testing.T, ctx context.Context, host string, wrongPassword bool, image *metal3.Image) {
	t.Helper()
	var info lab.HostInfo
	for _, h := range s.site.Lab.Info().Hosts {
		if h.Name == host {
			info = h
		}
	}
	password := info.BMC.Password
	if wrongPassword {
		password = "not-" + password
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: host + "-bmc"},
		StringData: map[string]string{"username": info.BMC.Username, "password": password}}
	bmh := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: host},
		Spec: metal3.BareMetalHostSpec{Online: true, BootMACAddress: info.MACs[0], Image: image, AutomatedCleaningMode: metal3.CleaningModeMetadata,
			BMC: metal3.BMCDetails{Address: "redfish-virtualmedia+" + info.BMC.Address, CredentialsName: secret.Name}}}
	for _, o := range []client.Object{secret, bmh} {
		if err := s.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// waitHost waits until ok says the host is as wanted.
func (s *stack) waitHost(t *testing.T, ctx context.Context, name, what string, ok func(*metal3.BareMetalHost) bool) *metal3.BareMetalHost {
	t.Helper()
	for {
		h := &metal3.BareMetalHost{}
		// Read without ctx, so a deadline still shows the host as it was.
		if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
			t.Fatal(err)
		}
		if ok(h) {
			return h
		}
		if ctx.Err() != nil {
			t.Fatalf("BareMetalHost %s: %s (error %q %q), want %s", name, h.Status.Provisioning.State, h.Status.ErrorType, h.Status.ErrorMessage, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Real baremetal-operator, through real Ironic, inspects a lab host in
// band (the deploy ramdisk reports to ironic-inspector), provisions it
// from its BareMetalHost, and answers a new spec.image on the provisioned
// host as it does on real sites: it deprovisions it, wiping the disk
// under the OS that ran there. A host with wrong BMC credentials gets
// BMO's registration error and leaves the other alone.
func TestBMOProvisionsALabHostAndWipesItWhenItsImageChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := startStack(t, ctx, "cold-spare.yaml")
	catalog, images := s.site.Lab.Definition().Catalog, s.site.Lab.ImageServer()
	from, _ := catalog.Get("ubuntu-24.04-k8s-v1.35.3")
	to, _ := catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	s.enroll(t, ctx, "worker-0", false,
		&metal3.Image{URL: images.ImageURL(from.Name), Checksum: from.SHA256, ChecksumType: metal3.SHA256})
	s.enroll(t, ctx, "worker-1", true, nil)

	bad := s.waitHost(t, ctx, "worker-1", "a registration error", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorType == metal3.RegistrationError })
	if !strings.Contains(bad.Status.ErrorMessage, "401") {
		t.Errorf("worker-1 with a wrong password: %s: %s; want the BMC's 401 in it", bad.Status.ErrorType, bad.Status.ErrorMessage)
	}
	prov := s.waitHost(t, ctx, "worker-0", "provisioned", func(h *metal3.BareMetalHost) bool { return h.Status.Provisioning.State == metal3.StateProvisioned })
	h, _ := s.site.Lab.Host("worker-0")
	checkHardware(t, prov, h.Spec())
	waitFor(t, ctx, "worker-0 running "+from.Name+" from disk", func() bool {
		st := h.Status()
		return st.OS != nil && st.OS.Source == lab.FromDisk && st.OS.Image.Name == from.Name
	})
	if err := h.SetPersistent("app/marker", "data of the running node"); err != nil {
		t.Fatal(err)
	}

	// What an in-place provider must never do: record the new image in
	// the provisioned host's spec.image.
	bmh := s.waitHost(t, ctx, "worker-0", "provisioned", func(*metal3.BareMetalHost) bool { return true })
	patch := client.MergeFrom(bmh.DeepCopy())
	bmh.Spec.Image = &metal3.Image{URL: images.ImageURL(to.Name), Checksum: to.SHA256, ChecksumType: metal3.SHA256}
	if err := s.c.Patch(ctx, bmh, patch); err != nil {
		t.Fatal(err)
	}
	s.waitHost(t, ctx, "worker-0", "deprovisioning", func(h *metal3.BareMetalHost) bool { return h.Status.Provisioning.State == metal3.StateDeprovisioning })
	waitFor(t, ctx, "worker-0's disk wiped", func() bool { return len(h.Persistent()) == 0 })
	if bad := s.waitHost(t, ctx, "worker-1", "", func(*metal3.BareMetalHost) bool { return true }); bad.Status.ErrorType != metal3.RegistrationError {
		t.Errorf("worker-1 after all this: %s %q; want its registration error kept", bad.Status.ErrorType, bad.Status.ErrorMessage)
	}
}

// checkHardware checks that the host's status.hardware is what the lab
// file says of it: BMO read it from the in-band inspection.
func checkHardware(t *testing.T, bmh *metal3.BareMetalHost, spec lab.HostSpec) {
	t.Helper()
	hw := bmh.Status.HardwareDetails
	if hw == nil || hw.CPU.Count != spec.CPUs || hw.RAMMebibytes != spec.MemoryMiB || len(hw.Storage) != 1 || len(hw.NIC) != len(spec.NICs) {
		t.Fatalf("%s status.hardware %+v; want %d CPUs, %d MiB, one disk, %d NICs", bmh.Name, hw, spec.CPUs, spec.MemoryMiB, len(spec.NICs))
	}
	for i, n := range spec.NICs {
		if !strings.EqualFold(hw.NIC[i].MAC, n.MAC) || hw.NIC[i].Name != n.Name {
			t.Errorf("%s NIC %d: %+v, want %s %s", bmh.Name, i, hw.NIC[i], n.Name, n.MAC)
		}
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
