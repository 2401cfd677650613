package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

func (e *providerEnv) host(t *testing.T, ctx context.Context, name string) *metal3.BareMetalHost {
	t.Helper()
	h := &metal3.BareMetalHost{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, h); err != nil {
		t.Fatal(err)
	}
	return h
}

func (e *providerEnv) waitHostState(t *testing.T, ctx context.Context, name string, want metal3.ProvisioningState) *metal3.BareMetalHost {
	t.Helper()
	var h *metal3.BareMetalHost
	waitFor(t, ctx, "BareMetalHost "+name+" "+string(want), func() (bool, string) {
		h = &metal3.BareMetalHost{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, h); err != nil {
			return false, err.Error()
		}
		return h.Status.Provisioning.State == want, fmt.Sprintf("state %q error %q %q", h.Status.Provisioning.State, h.Status.ErrorType, h.Status.ErrorMessage)
	})
	return h
}

// The host controller drives BareMetalHosts over Redfish and the deploy
// ramdisk only: registration with the credentials of a secret, inspection,
// provisioning with a checksum, cleaning on release.
func TestBareMetalHostLifecycleOverRedfish(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "three-node", 0.01)
	checkWebhooks(t, ctx, e)
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, func(h lab.HostInfo) bool { return h.Name != "cp-2" }); err != nil {
		t.Fatal(err)
	}

	// cp-2 is enrolled with a wrong password: it stays in registration
	// error with a message naming the secret, until the secret is fixed.
	info := e.site.Lab.Info().Hosts[2]
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cp-2-bmc"},
		Data: map[string][]byte{"username": []byte(info.BMC.Username), "password": []byte("not-the-password")}}
	if err := e.c.Create(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	bad := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cp-2"}, Spec: metal3.BareMetalHostSpec{
		BMC: metal3.BMCDetails{Address: redfish.AddressScheme + info.BMC.Address, CredentialsName: "cp-2-bmc"}, BootMACAddress: info.MACs[0]}}
	if err := e.c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}

	e.checkInspectedOverRedfish(t, ctx, "cp-0")
	e.checkCredentialsFixed(t, ctx, "cp-2", wrong, info.BMC.Password)

	catalog := e.site.Lab.Definition().Catalog
	good, _ := catalog.Get("ubuntu-24.04-k8s-v1.35.3")
	other, _ := catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	imageURL := e.site.Lab.ImageServer().ImageURL(good.Name)
	consume := func(name string, checksum string) {
		h := e.host(t, ctx, name)
		patch := client.MergeFrom(h.DeepCopy()) // the host controller writes it too
		h.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: e.ns, Name: "test-consumer"}
		h.Spec.Image = &metal3.Image{URL: imageURL, Checksum: checksum, ChecksumType: metal3.SHA256}
		h.Spec.Online = true
		if err := e.c.Patch(ctx, h, patch); err != nil {
			t.Fatal(err)
		}
	}

	// A checksum of another image: provisioning fails before a byte is
	// written, and says why.
	consume("cp-1", other.SHA256)
	waitFor(t, ctx, "cp-1 in provisioning error", func() (bool, string) {
		h := e.host(t, ctx, "cp-1")
		return h.Status.ErrorType == metal3.ProvisioningError && strings.Contains(h.Status.ErrorMessage, "checksum"),
			fmt.Sprintf("%s %q %q", h.Status.Provisioning.State, h.Status.ErrorType, h.Status.ErrorMessage)
	})
	cp1, _ := e.site.Lab.Host("cp-1")
	for name, slot := range cp1.Status().Disk.Slots {
		if slot.State != disk.Empty {
			t.Fatalf("cp-1 slot %s is %s after a refused image; want it untouched (empty)", name, slot.State)
		}
	}

	// The right checksum: deploy ramdisk, image into slot A, boot from disk.
	consume("cp-0", good.SHA256)
	if h := e.waitHostState(t, ctx, "cp-0", metal3.StateProvisioned); !h.Status.PoweredOn || h.Status.Provisioning.Image.URL != imageURL {
		t.Fatalf("cp-0 provisioned: poweredOn %v, image %+v", h.Status.PoweredOn, h.Status.Provisioning.Image)
	}
	cp0, _ := e.site.Lab.Host("cp-0")
	waitFor(t, ctx, "cp-0 running the image from slot A", func() (bool, string) {
		st := cp0.Status()
		return st.OS != nil && st.OS.Source == lab.FromDisk && st.OS.Root == disk.SlotA && st.OS.Image.Name == good.Name, fmt.Sprintf("%+v", st.OS)
	})

	// Released: cleaned by the deploy ramdisk, powered off, available.
	h := e.host(t, ctx, "cp-0")
	patch := client.MergeFrom(h.DeepCopy())
	h.Spec.ConsumerRef, h.Spec.Image, h.Spec.Online = nil, nil, false
	if err := e.c.Patch(ctx, h, patch); err != nil {
		t.Fatal(err)
	}
	e.waitHostState(t, ctx, "cp-0", metal3.StateDeprovisioning)
	if h := e.waitHostState(t, ctx, "cp-0", metal3.StateAvailable); h.Status.PoweredOn {
		t.Fatalf("cp-0 cleaned but powered on")
	}
	st := cp0.Status()
	if st.Power != lab.PoweredOff || st.Disk.Slots[disk.SlotA].State != disk.Empty || len(st.Disk.ConfigDrive) != 0 {
		t.Fatalf("cp-0 after cleaning: power %s, slot A %s, config drive %d bytes; want off, empty, none", st.Power, st.Disk.Slots[disk.SlotA].State, len(st.Disk.ConfigDrive))
	}
}

// checkWebhooks: the provider's admission webhooks refuse what the schema
// cannot, naming the field.
func checkWebhooks(t *testing.T, ctx context.Context, e *providerEnv) {
	t.Helper()
	sum := strings.Repeat("ab", 32)
	bad := &infrav1.BareMetalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bad"},
		Spec: infrav1.BareMetalMachineSpec{Image: infrav1.Image{URL: "ftp://images/os.img", Checksum: sum},
			NICFirmware:  &infrav1.FirmwarePackage{URL: "http://firmware/"},
			HostSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: "Sometimes"}}}}}
	err := e.c.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "spec.image.url") || !strings.Contains(err.Error(), "spec.hostSelector") || !strings.Contains(err.Error(), "spec.nicFirmware.url") {
		t.Fatalf("a BareMetalMachine with an ftp image URL, a firmware URL naming no package and a bad selector: %v; want the three fields named", err)
	}
	tmpl := &infrav1.BareMetalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "t"},
		Spec: infrav1.BareMetalMachineTemplateSpec{Template: infrav1.BareMetalMachineTemplateResource{
			Spec: infrav1.BareMetalMachineSpec{Image: infrav1.Image{URL: "http://images/os.img", Checksum: sum}}}}}
	if err := e.c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	tmpl.Spec.Template.Spec.Image.URL = "http://images/other.img"
	if err := e.c.Update(ctx, tmpl); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("changing a BareMetalMachineTemplate: %v; want it refused as immutable", err)
	}
}

// checkInspectedOverRedfish waits for host name to be available and
// holds its inspection to the lab: hostname, the boot NIC's MAC, CPUs,
// and the BIOS, BMC and NIC firmware components.
func (e *providerEnv) checkInspectedOverRedfish(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	lh, _ := e.site.Lab.Host(name)
	mac := lh.Spec().NICs[0].MAC
	available := e.waitHostState(t, ctx, name, metal3.StateAvailable)
	hw := available.Status.HardwareDetails
	if hw == nil || hw.Hostname != name || len(hw.NIC) == 0 || !strings.EqualFold(hw.NIC[0].MAC, mac) || hw.CPU.Count == 0 {
		t.Fatalf("inspection of %s: %+v", name, hw)
	}
	hfc := &metal3.HostFirmwareComponents{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, hfc); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, c := range hfc.Status.Components {
		versions[c.Component] = c.CurrentVersion
	}
	if versions["bios"] == "" || versions["bmc"] == "" || versions["nic:eno1"] == "" {
		t.Fatalf("firmware components of %s: %v; want bios, bmc and nic:eno1", name, versions)
	}
}

// checkCredentialsFixed waits for host name, enrolled with the wrong
// password in secret wrong, to stay in registration error naming the
// secret; then fixes the secret and waits for the host available.
func (e *providerEnv) checkCredentialsFixed(t *testing.T, ctx context.Context, name string, wrong *corev1.Secret, password string) {
	t.Helper()
	waitFor(t, ctx, name+" in registration error", func() (bool, string) {
		h := e.host(t, ctx, name)
		return h.Status.ErrorType == metal3.RegistrationError && strings.Contains(h.Status.ErrorMessage, "refused the credentials") &&
			strings.Contains(h.Status.ErrorMessage, e.ns+"/"+wrong.Name), fmt.Sprintf("%s %q %q", h.Status.Provisioning.State, h.Status.ErrorType, h.Status.ErrorMessage)
	})
	if h := e.host(t, ctx, name); h.Status.Provisioning.State != metal3.StateRegistering || h.Status.OperationalStatus != metal3.OperationalStatusError {
		t.Fatalf("%s with wrong credentials: state %q, operational %q", name, h.Status.Provisioning.State, h.Status.OperationalStatus)
	}
	wrong.Data["password"] = []byte(password)
	if err := e.c.Update(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	if h := e.waitHostState(t, ctx, name, metal3.StateAvailable); h.Status.ErrorType != "" {
		t.Fatalf("%s available but still shows %q", name, h.Status.ErrorMessage)
	}
}
