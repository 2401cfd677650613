package ipmi

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// These tests drive the BMC with ipmitool from Debian (scripts/install-deps.sh
// installs it), unmodified, over lanplus: the judge of the protocol is
// the client real fleets use, not this package's own understanding.

const (
	testUser = "admin"
	testPass = "upgradelab-bmc"
)

type fixture struct {
	lab    *lab.Lab
	host   *lab.Host
	bmc    *BMC
	events <-chan lab.Event
}

func newFixture(t testing.TB, scale timescale.Scale) *fixture {
	return newFixtureWith(t, scale, 30)
}

// newFixtureWith sets the BMC's modelled reset time.
func newFixtureWith(t testing.TB, scale timescale.Scale, resetSeconds float64) *fixture {
	t.Helper()
	l := labtest.Up(t, "single-node", scale)
	h, _ := l.Host("node-0")
	b, err := Start(Config{Host: h, Username: testUser, Password: testPass, Scale: scale, FirmwareVersion: "7.10", ResetSeconds: resetSeconds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	events, cancel := l.Subscribe()
	t.Cleanup(cancel)
	return &fixture{lab: l, host: h, bmc: b, events: events}
}

// ipmitool runs one command; extra flags (e.g. -C 3) go before it.
func (f *fixture) ipmitool(t testing.TB, user, pass string, flags []string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("ipmitool")
	if err != nil {
		t.Fatalf("ipmitool is not installed (scripts/install-deps.sh installs it from Debian): %v", err)
	}
	host, port, _ := strings.Cut(f.bmc.Addr(), ":")
	cmdline := append([]string{"-I", "lanplus", "-H", host, "-p", port, "-U", user, "-P", pass, "-R", "2", "-N", "1"}, flags...)
	cmd := exec.Command(bin, append(cmdline, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (f *fixture) ok(t testing.TB, flags []string, args ...string) string {
	t.Helper()
	out, err := f.ipmitool(t, testUser, testPass, flags, args...)
	if err != nil {
		t.Fatalf("ipmitool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (f *fixture) expect(t testing.TB, reason string) lab.Event {
	t.Helper()
	return labtest.Expect(t, f.events, f.host.Name(), reason, 10*time.Second)
}

func (f *fixture) waitPower(t testing.TB, want lab.PowerState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.host.Status().Power != want {
		if time.Now().After(deadline) {
			t.Fatalf("power stayed %s, want %s", f.host.Status().Power, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each cipher suite ipmitool offers by default (it asks the BMC for its
// list and takes the best, 17) and the one asked for with -C 3 opens a
// session and drives the power; -C 1 (no encryption) is refused, as on a
// BMC with the weak suites disabled.
func TestIpmitoolDrivesPowerOverBothCipherSuites(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	out := f.ok(t, []string{"-vv"}, "chassis", "power", "status")
	if !strings.Contains(out, "Using best available cipher suite 17") || !strings.Contains(out, "Chassis Power is off") {
		t.Fatalf("default suite: want suite 17 picked from the BMC's list and power off:\n%s", out)
	}
	f.ok(t, []string{"-C", "3"}, "chassis", "power", "on")
	f.expect(t, "OSRunning")
	if out := f.ok(t, []string{"-C", "17"}, "chassis", "power", "status"); !strings.Contains(out, "Chassis Power is on") {
		t.Fatalf("power status after power on: %q", out)
	}
	if out, err := f.ipmitool(t, testUser, testPass, []string{"-C", "1"}, "chassis", "power", "status"); err == nil {
		t.Fatalf("cipher suite 1 (no confidentiality) was accepted:\n%s", out)
	}
}

func TestIpmitoolChassisPowerCommandsActOnTheHost(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	// cycle and reset of a host that is off: "not supported in present state"
	for _, c := range []string{"cycle", "reset", "soft"} {
		out, err := f.ipmitool(t, testUser, testPass, nil, "chassis", "power", c)
		if err == nil || !strings.Contains(out, "not supported in present state") {
			t.Fatalf("power %s of a host that is off: err=%v\n%s", c, err, out)
		}
	}
	f.ok(t, nil, "chassis", "power", "on")
	f.expect(t, "OSRunning")
	boots := f.host.Status().BootCount
	if out := f.ok(t, nil, "chassis", "status"); !strings.Contains(out, "System Power         : on") || !strings.Contains(out, "Last Power Event     : command") {
		t.Fatalf("chassis status: %s", out)
	}

	f.ok(t, nil, "chassis", "power", "reset")
	f.expect(t, "OSRunning")
	f.ok(t, nil, "chassis", "power", "cycle")
	f.expect(t, "OSRunning")
	if got := f.host.Status().BootCount; got != boots+2 {
		t.Fatalf("boot count after reset and cycle: %d, want %d", got, boots+2)
	}

	// soft: ACPI shutdown, the OS shuts down first (OSShutdown), then off
	f.ok(t, nil, "chassis", "power", "soft")
	f.expect(t, "OSShutdown")
	f.waitPower(t, lab.PoweredOff)

	f.ok(t, nil, "chassis", "power", "on")
	f.expect(t, "OSRunning")
	f.ok(t, nil, "chassis", "power", "off")
	f.waitPower(t, lab.PoweredOff)
	if out := f.ok(t, nil, "power", "status"); !strings.Contains(out, "Chassis Power is off") {
		t.Fatalf("power status after off: %s", out)
	}
}

// bootdev sets the lab host's boot override: persistent or once, UEFI
// (efiboot) or legacy; the host then boots (or fails to boot) as the
// firmware model says.
func TestIpmitoolBootdevSetsTheHostsBootOverride(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	cases := []struct {
		args []string
		want lab.BootOverride
		flag string // what bootparam get 5 prints
	}{
		{[]string{"pxe", "options=persistent,efiboot"}, lab.BootOverride{Target: lab.BootPxe, Mode: lab.OverrideContinuous, BootMode: lab.BootModeUEFI}, "Force PXE"},
		{[]string{"disk", "options=efiboot"}, lab.BootOverride{Target: lab.BootHdd, Mode: lab.OverrideOnce, BootMode: lab.BootModeUEFI}, "Force Boot from default Hard-Drive"},
		{[]string{"cdrom"}, lab.BootOverride{Target: lab.BootCd, Mode: lab.OverrideOnce, BootMode: lab.BootModeLegacy}, "Force Boot from CD/DVD"},
		{[]string{"bios", "options=efiboot"}, lab.BootOverride{Target: lab.BootBiosSetup, Mode: lab.OverrideOnce, BootMode: lab.BootModeUEFI}, "Force Boot into BIOS Setup"},
	}
	for _, c := range cases {
		out := f.ok(t, nil, append([]string{"chassis", "bootdev"}, c.args...)...)
		if !strings.Contains(out, "Set Boot Device to "+c.args[0]) {
			t.Fatalf("bootdev %v: %s", c.args, out)
		}
		if got := f.host.Status().Override; got != c.want {
			t.Fatalf("bootdev %v: host override %+v, want %+v", c.args, got, c.want)
		}
		if out := f.ok(t, nil, "chassis", "bootparam", "get", "5"); !strings.Contains(out, c.flag) {
			t.Fatalf("bootparam get 5 after bootdev %v: want %q:\n%s", c.args, c.flag, out)
		}
	}
	// The BIOS override stops the boot in firmware setup.
	f.ok(t, nil, "chassis", "power", "on")
	f.expect(t, "FirmwareSetup")
	if st := f.host.Status(); st.Phase != lab.PhaseFirmwareSetup {
		t.Fatalf("after bootdev bios: phase %s", st.Phase)
	}
	// A legacy-mode disk boot finds no loader in the EFI-only image.
	f.ok(t, nil, "chassis", "bootdev", "disk")
	f.ok(t, nil, "chassis", "power", "reset")
	if e := f.expect(t, "BootDeviceFailed"); !strings.Contains(e.Message, "legacy boot") {
		t.Fatalf("legacy disk boot: %s", e.Message)
	}
	// The floppy is no device of this server.
	// (ipmitool exits 0 after printing the failure.)
	f.ok(t, nil, "chassis", "bootdev", "pxe", "options=efiboot")
	before := f.host.Status().Override
	if out, _ := f.ipmitool(t, testUser, testPass, nil, "chassis", "bootdev", "floppy"); !strings.Contains(out, "Parameter out of range") {
		t.Fatalf("bootdev floppy accepted:\n%s", out)
	}
	if got := f.host.Status().Override; got != before {
		t.Fatalf("a refused bootdev changed the override: %+v", got)
	}
}

func TestIpmitoolMCInfoGUIDAndReset(t *testing.T) {
	// Modelled reset: 500 s x 0.01 = 5 s, longer than ipmitool's tries.
	f := newFixtureWith(t, timescale.Scale(0.01), 500)
	out := f.ok(t, nil, "mc", "info")
	for _, want := range []string{"Firmware Revision         : 7.10", "IPMI Version              : 2.0", "Chassis Device"} {
		if !strings.Contains(out, want) {
			t.Fatalf("mc info: want %q:\n%s", want, out)
		}
	}
	out = f.ok(t, nil, "mc", "guid")
	if strings.Contains(out, "violation") || !strings.Contains(out, "GUID Encoding : IPMI") {
		t.Fatalf("mc guid: want the IPMI encoding without a warning:\n%s", out)
	}
	// The GUID is the one RAKP 2 carries, and stable.
	if again := f.ok(t, nil, "mc", "guid"); again != out {
		t.Fatalf("GUID changed: %s then %s", out, again)
	}

	// mc reset cold: the BMC answers, then is silent for its modelled
	// reset time; the host's power is untouched.
	f.ok(t, nil, "chassis", "power", "on")
	f.expect(t, "OSRunning")
	f.ok(t, nil, "mc", "reset", "cold")
	f.expect(t, "BMCReset")
	time.Sleep(100 * time.Millisecond)
	if out, err := f.ipmitool(t, testUser, testPass, nil, "chassis", "power", "status"); err == nil {
		t.Fatalf("the BMC answered during its reset:\n%s", out)
	}
	for f.bmc.offline() {
		time.Sleep(50 * time.Millisecond)
	}
	if out := f.ok(t, nil, "chassis", "power", "status"); !strings.Contains(out, "Chassis Power is on") {
		t.Fatalf("after the BMC's reset: %s", out)
	}
}

func TestIpmitoolRefusesWrongCredentialsAndSOL(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	for _, c := range []struct{ user, pass string }{{testUser, "wrong-password"}, {"nobody", testPass}, {"", testPass}} {
		out, err := f.ipmitool(t, c.user, c.pass, nil, "chassis", "power", "on")
		if err == nil || !strings.Contains(out, "Unable to establish IPMI v2 / RMCP+ session") {
			t.Fatalf("user %q password %q: err=%v\n%s", c.user, c.pass, err, out)
		}
	}
	if st := f.host.Status(); st.Power != lab.PoweredOff {
		t.Fatalf("a refused login changed the power: %s", st.Power)
	}
	out, err := f.ipmitool(t, testUser, testPass, nil, "sol", "activate")
	if err == nil || !strings.Contains(out, "SOL payload disabled") {
		t.Fatalf("sol activate: err=%v\n%s", err, out)
	}
}

// A dead power supply shows in chassis status and refuses power on; a
// hung OS ignores the soft power-off while the BMC answers at once.
func TestIpmitoolSeesHardwareFailures(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	f.ok(t, nil, "chassis", "power", "on")
	f.expect(t, "OSRunning")
	if err := f.host.Hang(); err != nil {
		t.Fatal(err)
	}
	f.ok(t, nil, "chassis", "power", "soft")
	time.Sleep(200 * time.Millisecond)
	if st := f.host.Status(); st.Power != lab.PoweredOn || st.Phase != lab.PhaseHung {
		t.Fatalf("soft off of a hung OS: %s %s", st.Power, st.Phase)
	}
	if err := f.host.FailPowerSupply(); err != nil {
		t.Fatal(err)
	}
	out := f.ok(t, nil, "chassis", "status")
	if !strings.Contains(out, "Main Power Fault     : true") || !strings.Contains(out, "System Power         : off") {
		t.Fatalf("chassis status with a dead supply:\n%s", out)
	}
	if out, err := f.ipmitool(t, testUser, testPass, nil, "chassis", "power", "on"); err == nil {
		t.Fatalf("power on with a dead supply succeeded:\n%s", out)
	}
}

// Packet loss and slow answers: on a lossy link (15% of datagrams lost)
// ipmitool's own retries get most commands through, and Ironic's retry of
// a failed ipmitool run (its ipmi command_retry_timeout) the rest:
// ipmitool retries the session set-up only four times in all, so some
// logins fail, as on real networks. A BMC slower than ipmitool's timeout
// fails the command.
func TestIpmitoolThroughLossAndLatency(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	f.bmc.SetFaults(Faults{DropRate: 0.15})
	host, port, _ := strings.Cut(f.bmc.Addr(), ":")
	for i := range 2 {
		var out []byte
		var err error
		for run := 0; run < 5; run++ { // Ironic runs ipmitool again on failure
			if out, err = exec.Command("ipmitool", "-I", "lanplus", "-H", host, "-p", port, "-U", testUser, "-P", testPass,
				"-R", "8", "-N", "1", "chassis", "power", "status").CombinedOutput(); err == nil {
				break
			}
		}
		if err != nil || !strings.Contains(string(out), "Chassis Power is off") {
			t.Fatalf("command %d with 15%% loss, 8 retries and 5 runs: %v\n%s", i, err, out)
		}
	}
	f.bmc.SetFaults(Faults{Latency: 2500 * time.Millisecond})
	if out, err := f.ipmitool(t, testUser, testPass, nil, "chassis", "power", "status"); err == nil {
		t.Fatalf("answers 2.5 s late beat ipmitool's 1 s timeout:\n%s", out)
	}
	f.bmc.SetFaults(Faults{Latency: 50 * time.Millisecond})
	f.ok(t, nil, "chassis", "power", "status")
}
