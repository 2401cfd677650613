package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/timescale"
)

// BenchmarkScenario runs each shipped scenario (plain form) and reports
// its wall time from an empty lab to the judged timeline, split into
// provisioning and upgrade (`make bench`, -benchtime 1x).
func BenchmarkScenario(b *testing.B) {
	root, err := reference.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(root, "scenarios", "*.yaml"))
	bin := b.TempDir()
	provider, err := reference.Build(context.Background(), bin, reference.ProviderCommand)
	if err != nil {
		b.Fatal(err)
	}
	extension, err := reference.Build(context.Background(), bin, reference.ExtensionCommand)
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range paths {
		s, def, err := scenario.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res := Run(context.Background(), s, def, scenario.Plain, Options{RepoRoot: root, Dir: b.TempDir(), Scale: timescale.Scale(0.01),
					ProviderBinary: provider, ExtensionBinary: extension})
				if res.Failed() {
					var broken []string
					for _, v := range check.Failed(res.Checks) {
						broken = append(broken, v.String())
					}
					b.Fatalf("%s failed: %s %s", s.Name, res.Error, strings.Join(broken, "; "))
				}
				b.ReportMetric(res.Duration.Seconds(), "s-wall/op")
				b.ReportMetric(res.Upgrade.Seconds(), "s-upgrade/op")
			}
		})
	}
}
