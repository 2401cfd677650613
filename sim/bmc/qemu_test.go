package bmc

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/internal/pki"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// On the qemu backend the BMCs act on real VMs: gofish's resets and
// ipmitool's chassis power commands start, power-cycle and stop the
// libvirt domains, and what the BMC reports is what the VM's guest does.
func TestBMCsDriveRealVMs(t *testing.T) {
	def, err := lab.Load("../../fixtures/labs/vm-two.yaml")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	l, err := lab.Up(context.Background(), def, lab.Options{StateDir: state, Scale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down()
	ca, _ := pki.NewCA("qemu lab CA")
	fleet, err := StartFleet(l, ca)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}, Timeout: 10 * time.Second}
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: fleet.BMCs["vm-0"].Endpoint(), Username: "admin", Password: "upgradelab-bmc", HTTPClient: httpClient})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout()
	system := func() *redfish.ComputerSystem {
		systems, err := c.Service.Systems()
		if err != nil || len(systems) != 1 {
			t.Fatalf("systems: %v %v", systems, err)
		}
		return systems[0]
	}
	h, _ := l.Host("vm-0")
	waitBoot := func(what, notBootID string) string {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			st := h.Status()
			if st.Phase == lab.PhaseRunning && st.OS != nil && st.OS.BootID != notBootID {
				return st.OS.BootID
			}
			if time.Now().After(deadline) {
				_, console, _ := h.Guest()
				b, _ := os.ReadFile(console)
				t.Fatalf("%s: the VM did not boot (phase %s); console:\n%s", what, st.Phase, string(b))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A QEMU process of this lab's domain: its command line names the
	// domain's disk in this test's state folder (another test may run a
	// domain of the same name).
	running := func(domain string) bool {
		b, err := exec.Command("ps", "-eo", "args").Output()
		return err == nil && strings.Contains(string(b), filepath.Join(state, "hosts", domain, "vm", "system.img"))
	}

	if s := system(); s.PowerState != redfish.OffPowerState {
		t.Fatalf("power %s before anything", s.PowerState)
	}
	if err := system().Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	first := waitBoot("Reset On", "")
	if !running("vm-0") || system().PowerState != redfish.OnPowerState {
		t.Fatalf("after Reset On: QEMU running %v, Redfish %s", running("vm-0"), system().PowerState)
	}
	if err := system().Reset(redfish.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	waitBoot("ForceRestart", first)
	if err := system().Reset(redfish.GracefulShutdownResetType); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for running("vm-0") || system().PowerState != redfish.OffPowerState {
		if time.Now().After(deadline) {
			t.Fatalf("after GracefulShutdown: QEMU running %v, Redfish %s", running("vm-0"), system().PowerState)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Virtual media, as Ironic's redfish-virtual-media driver boots a
	// deploy ramdisk: insert, boot once from the CD, then the disk again.
	managers, err := c.Service.Managers()
	if err != nil || len(managers) != 1 {
		t.Fatalf("managers %v %v", managers, err)
	}
	media, err := managers[0].VirtualMedia()
	if err != nil || len(media) != 1 {
		t.Fatalf("virtual media %v %v", media, err)
	}
	deploy := l.ImageServer().ImageURL("deploy-ramdisk-2026.10") + "?provisioner=https://127.0.0.1:1/x"
	if err := media[0].InsertMedia(deploy, true, true); err != nil {
		t.Fatal(err)
	}
	if err := system().SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}); err != nil {
		t.Fatal(err)
	}
	if err := system().Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	fromCD := waitBoot("virtual media boot", "")
	if st := h.Status(); st.OS.Source != lab.FromVirtualMedia || st.OS.Media != deploy || st.OS.Image.Name != "deploy-ramdisk-2026.10" || !st.OS.DeployRamdisk() {
		t.Fatalf("the CD booted %+v", st.OS)
	}
	_, console, _ := h.Guest()
	if b, _ := os.ReadFile(console); !strings.Contains(string(b), "upgradelab-grub: booting virtual media") {
		t.Error("the console shows no boot from the CD's GRUB")
	}
	if err := system().Reset(redfish.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	waitBoot("the boot after the Once override", fromCD)
	if st := h.Status(); st.OS.Source != lab.FromRecovery {
		t.Fatalf("the second boot came from %s, want the disk's recovery (the override was Once)", st.OS.Source)
	}
	if err := system().Reset(redfish.ForceOffResetType); err != nil {
		t.Fatal(err)
	}

	// The other host through ipmitool, as Ironic's ipmi driver would.
	addr := fleet.IPMI["vm-1"].Addr()
	host, port, _ := strings.Cut(addr, ":")
	ipmitool := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ipmitool", append([]string{"-I", "lanplus", "-H", host, "-p", port, "-U", "admin", "-P", "upgradelab-bmc", "-C", "17"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ipmitool %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ipmitool("chassis", "power", "on")
	if !running("vm-1") {
		t.Fatal("ipmitool chassis power on started no VM")
	}
	if got := ipmitool("chassis", "power", "status"); got != "Chassis Power is on" {
		t.Errorf("power status %q", got)
	}
	ipmitool("chassis", "power", "off")
	deadline = time.Now().Add(10 * time.Second)
	for running("vm-1") {
		if time.Now().After(deadline) {
			t.Fatal("ipmitool chassis power off left the VM running")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
