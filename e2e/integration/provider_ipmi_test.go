package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/providers/baremetal/ipmi"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// ipmi:// hosts on a lab whose BMCs serve IPMI only: the provider checks
// the credentials with an IPMI session, inspects the host in band (the
// deploy ramdisk PXE-booted through its boot server), provisions it the
// same way and manages its power with ipmitool, as Ironic's ipmi
// hardware type does. Judged on the lab: how each host booted, its power,
// the OS's shutdown.
func TestIPMIHostsAreInspectedInBandProvisionedAndPowered(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "three-node-ipmi", 0.01)
	events, unsubscribe := e.site.Lab.Subscribe()
	defer unsubscribe()
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, func(h lab.HostInfo) bool { return h.Name == "cp-0" }); err != nil {
		t.Fatal(err)
	}
	info := e.site.Lab.Info().Hosts[1]
	if info.BMC.Address != "" || info.BMC.IPMI == "" {
		t.Fatalf("lab.json for an IPMI-only BMC: %+v", info.BMC)
	}
	// cp-1 with a wrong password: the RAKP exchange fails, and the host
	// stays in registration error naming the secret.
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cp-1-bmc"},
		Data: map[string][]byte{"username": []byte(info.BMC.Username), "password": []byte("not-the-password")}}
	if err := e.c.Create(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	bad := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cp-1"}, Spec: metal3.BareMetalHostSpec{
		BMC: metal3.BMCDetails{Address: ipmi.AddressScheme + info.BMC.IPMI, CredentialsName: "cp-1-bmc"}, BootMACAddress: info.MACs[0]}}
	if err := e.c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}

	cp0, _ := e.site.Lab.Host("cp-0")
	e.checkInspectedInBand(t, ctx, cp0)

	good, _ := e.site.Lab.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.35.3")
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) {
		h.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: e.ns, Name: "test-consumer"}
		h.Spec.Image = &metal3.Image{URL: e.site.Lab.ImageServer().ImageURL(good.Name), Checksum: good.SHA256, ChecksumType: metal3.SHA256}
		h.Spec.Online = true
	})
	e.waitHostState(t, ctx, "cp-0", metal3.StateProvisioned)
	waitFor(t, ctx, "cp-0 running the installed image from its disk", func() (bool, string) {
		st := cp0.Status()
		return st.OS != nil && st.OS.Source == lab.FromDisk && st.OS.Image.Name == good.Name, fmt.Sprintf("%s %+v", st.Phase, st.OS)
	})

	// spec.online false: ipmitool's soft power-off, the OS shuts down.
	drain(events)
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Spec.Online = false })
	e.waitPower(t, ctx, cp0, false)
	expectEvent(t, events, "cp-0", "OSShutdown")
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Spec.Online = true })
	e.waitPower(t, ctx, cp0, true)

	// Deleted while provisioned: deprovisioned first, as BMO does (the
	// deploy ramdisk cleans the disk), then powered off and let go.
	if err := e.c.Delete(ctx, e.host(t, ctx, "cp-0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "provisioned cp-0 deleted", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "cp-0"}, &metal3.BareMetalHost{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if log, _ := os.ReadFile(filepath.Join(e.site.Lab.StateDir(), "events.jsonl")); !strings.Contains(string(log), `"host":"cp-0","kind":"disk","reason":"DiskErased"`) {
		t.Fatalf("cp-0 deleted without cleaning; the lab's events:\n%s", log)
	}
	if st := cp0.Status(); st.Power != lab.PoweredOff || slices.ContainsFunc(st.Disk.Images().Roots, func(r disk.Root) bool { return r.Image != "" }) {
		t.Fatalf("cp-0 after its deletion: %s, images %+v", st.Power, st.Disk.Images())
	}

	h := e.waitHostState(t, ctx, "cp-1", metal3.StateRegistering)
	waitFor(t, ctx, "cp-1's registration error", func() (bool, string) {
		h = e.host(t, ctx, "cp-1")
		return h.Status.ErrorType == metal3.RegistrationError && strings.Contains(h.Status.ErrorMessage, "refused the IPMI session") &&
			strings.Contains(h.Status.ErrorMessage, "cp-1-bmc"), h.Status.ErrorMessage
	})
}

// checkInspectedInBand waits for an IPMI-only host to be available and
// holds its inspection to the lab file: the hardware and the NIC's
// firmware seen in band, after the deploy ramdisk booted from the
// network, and the host powered off after.
func (e *providerEnv) checkInspectedInBand(t *testing.T, ctx context.Context, h *lab.Host) {
	t.Helper()
	name := h.Spec().Name
	available := e.waitHostState(t, ctx, name, metal3.StateAvailable)
	hw, spec := available.Status.HardwareDetails, h.Spec()
	if hw == nil || hw.Hostname != name || hw.CPU.Count != spec.CPUs || hw.RAMMebibytes != spec.MemoryMiB ||
		len(hw.NIC) != 1 || !strings.EqualFold(hw.NIC[0].MAC, spec.NICs[0].MAC) || hw.NIC[0].IP != spec.NICs[0].IP {
		t.Fatalf("in-band inspection of %s: %+v, want the lab file's facts and IP %s", name, hw, spec.NICs[0].IP)
	}
	hfc := &metal3.HostFirmwareComponents{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, hfc); err != nil {
		t.Fatal(err)
	}
	if len(hfc.Status.Components) != 1 || hfc.Status.Components[0].Component != "nic:eno1" || hfc.Status.Components[0].CurrentVersion == "" {
		t.Fatalf("firmware seen in band: %+v, want the NIC's only", hfc.Status.Components)
	}
	// Inspection booted the deploy ramdisk from the network (the lab's
	// event log says so), then powered the host off.
	log, err := os.ReadFile(filepath.Join(e.site.Lab.StateDir(), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"host":"`+name+`","kind":"boot","reason":"NetworkBoot"`) {
		t.Fatalf("no network boot of %s in the lab's events:\n%s", name, log)
	}
	e.waitPower(t, ctx, h, false)
}
