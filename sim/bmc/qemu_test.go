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
	h, _ := l.Host("vm-0")
	v := &vmBMCs{t: t, lab: l, state: state, c: c, host: h}

	v.powerCycleOverRedfish()
	v.bootVirtualMedia()
	v.powerOverIPMI(fleet.IPMI["vm-1"].Addr(), "vm-1")
}

// vmBMCs is TestBMCsDriveRealVMs's world: a qemu lab, a gofish client of
// vm-0's BMC, and vm-0.
type vmBMCs struct {
	t     *testing.T
	lab   *lab.Lab
	state string
	c     *gofish.APIClient
	host  *lab.Host
}

// system is the BMC's one ComputerSystem, read anew.
func (v *vmBMCs) system() *redfish.ComputerSystem {
	v.t.Helper()
	systems, err := v.c.Service.Systems()
	if err != nil || len(systems) != 1 {
		v.t.Fatalf("systems: %v %v", systems, err)
	}
	return systems[0]
}

// waitBoot waits for vm-0 running with a boot ID other than notBootID and
// answers it.
func (v *vmBMCs) waitBoot(what, notBootID string) string {
	v.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := v.host.Status()
		if st.Phase == lab.PhaseRunning && st.OS != nil && st.OS.BootID != notBootID {
			return st.OS.BootID
		}
		if time.Now().After(deadline) {
			_, console, _ := v.host.Guest()
			b, _ := os.ReadFile(console)
			v.t.Fatalf("%s: the VM did not boot (phase %s); console:\n%s", what, st.Phase, string(b))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running says whether a QEMU process of this lab's domain runs: its
// command line names the domain's disk in this test's state folder
// (another test may run a domain of the same name).
func (v *vmBMCs) running(domain string) bool {
	b, err := exec.Command("ps", "-eo", "args").Output()
	return err == nil && strings.Contains(string(b), filepath.Join(v.state, "hosts", domain, "vm", "system.img"))
}

// reset asks vm-0's BMC for a reset of type rt.
func (v *vmBMCs) reset(rt redfish.ResetType) {
	v.t.Helper()
	if err := v.system().Reset(rt); err != nil {
		v.t.Fatal(err)
	}
}

// powerCycleOverRedfish: Reset On boots the VM, ForceRestart boots it
// again, GracefulShutdown ends QEMU.
func (v *vmBMCs) powerCycleOverRedfish() {
	t := v.t
	if s := v.system(); s.PowerState != redfish.OffPowerState {
		t.Fatalf("power %s before anything", s.PowerState)
	}
	v.reset(redfish.OnResetType)
	first := v.waitBoot("Reset On", "")
	if !v.running("vm-0") || v.system().PowerState != redfish.OnPowerState {
		t.Fatalf("after Reset On: QEMU running %v, Redfish %s", v.running("vm-0"), v.system().PowerState)
	}
	v.reset(redfish.ForceRestartResetType)
	v.waitBoot("ForceRestart", first)
	v.reset(redfish.GracefulShutdownResetType)
	deadline := time.Now().Add(30 * time.Second)
	for v.running("vm-0") || v.system().PowerState != redfish.OffPowerState {
		if time.Now().After(deadline) {
			t.Fatalf("after GracefulShutdown: QEMU running %v, Redfish %s", v.running("vm-0"), v.system().PowerState)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bootVirtualMedia boots a deploy ramdisk as Ironic's
// redfish-virtual-media driver does: insert, boot once from the CD, then
// the disk again.
func (v *vmBMCs) bootVirtualMedia() {
	t := v.t
	managers, err := v.c.Service.Managers()
	if err != nil || len(managers) != 1 {
		t.Fatalf("managers %v %v", managers, err)
	}
	media, err := managers[0].VirtualMedia()
	if err != nil || len(media) != 1 {
		t.Fatalf("virtual media %v %v", media, err)
	}
	deploy := v.lab.ImageServer().ImageURL("deploy-ramdisk-2026.10") + "?provisioner=https://127.0.0.1:1/x"
	if err := media[0].InsertMedia(deploy, true, true); err != nil {
		t.Fatal(err)
	}
	if err := v.system().SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}); err != nil {
		t.Fatal(err)
	}
	v.reset(redfish.OnResetType)
	fromCD := v.waitBoot("virtual media boot", "")
	if st := v.host.Status(); st.OS.Source != lab.FromVirtualMedia || st.OS.Media != deploy || st.OS.Image.Name != "deploy-ramdisk-2026.10" || !st.OS.DeployRamdisk() {
		t.Fatalf("the CD booted %+v", st.OS)
	}
	_, console, _ := v.host.Guest()
	if b, _ := os.ReadFile(console); !strings.Contains(string(b), "upgradelab-grub: booting virtual media") {
		t.Error("the console shows no boot from the CD's GRUB")
	}
	v.reset(redfish.ForceRestartResetType)
	v.waitBoot("the boot after the Once override", fromCD)
	if st := v.host.Status(); st.OS.Source != lab.FromRecovery {
		t.Fatalf("the second boot came from %s, want the disk's recovery (the override was Once)", st.OS.Source)
	}
	v.reset(redfish.ForceOffResetType)
}

// powerOverIPMI powers domain on and off through the BMC at addr with
// ipmitool, as Ironic's ipmi driver would.
func (v *vmBMCs) powerOverIPMI(addr, domain string) {
	t := v.t
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
	if !v.running(domain) {
		t.Fatal("ipmitool chassis power on started no VM")
	}
	if got := ipmitool("chassis", "power", "status"); got != "Chassis Power is on" {
		t.Errorf("power status %q", got)
	}
	ipmitool("chassis", "power", "off")
	deadline := time.Now().Add(10 * time.Second)
	for v.running(domain) {
		if time.Now().After(deadline) {
			t.Fatal("ipmitool chassis power off left the VM running")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
