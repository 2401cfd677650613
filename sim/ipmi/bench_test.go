package ipmi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/internal/timescale"
)

// BenchmarkIpmitoolCommands measures IPMI commands per second on one BMC
// as ipmitool drives it: one lanplus session (cipher suite 17, AES and
// HMAC-SHA256 on every packet) running N `chassis power status` through
// `ipmitool exec`, so the session set-up is paid once.
func BenchmarkIpmitoolCommands(b *testing.B) {
	f := newFixture(b, timescale.Scale(0.01))
	script := filepath.Join(b.TempDir(), "commands")
	if err := os.WriteFile(script, []byte(strings.Repeat("chassis power status\n", b.N)), 0o644); err != nil {
		b.Fatal(err)
	}
	host, port, _ := strings.Cut(f.bmc.Addr(), ":")
	b.ResetTimer()
	out, err := exec.Command("ipmitool", "-I", "lanplus", "-H", host, "-p", port, "-U", testUser, "-P", testPass, "exec", script).CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(string(out), "Chassis Power is off"); n != b.N {
		b.Fatalf("%d answers to %d commands", n, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmd/s")
}
