package ipmi

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/timescale"
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
	t.Helper()
	l := labtest.Up(t, "single-node", scale)
	h, _ := l.Host("node-0")
	b, err := Start(Config{Host: h, Username: testUser, Password: testPass, Scale: scale, FirmwareVersion: "7.10", ResetSeconds: 30})
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

func TestIpmitoolDrivesPowerOverBothCipherSuites(t *testing.T) {
	f := newFixture(t, timescale.Scale(0.01))
	for _, suite := range []string{"", "3", "17"} {
		var flags []string
		if suite != "" {
			flags = []string{"-C", suite}
		}
		t.Run("suite"+suite, func(t *testing.T) {
			if out := f.ok(t, flags, "chassis", "power", "status"); !strings.Contains(out, "Chassis Power is off") {
				t.Fatalf("power status of a host that is off: %q", out)
			}
		})
	}
	_ = strconv.Itoa
	_ = time.Second
}
