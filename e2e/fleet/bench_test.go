package fleet

import (
	"context"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// BenchmarkFleetWave100 is `make bench`'s fleet: fixtures/fleets/hundred.yaml
// (55 clusters on 100 hosts, CAPI as it ships) provisioned and upgraded
// in one wave on one plane, once. Its figures are the report's: the
// wall and wave times, the upgrade's spread, the peak memory and the
// verdicts (clusters that stopped under load are counted, not hidden;
// fleet.txt in the artifacts says where the time went).
func BenchmarkFleetWave100(b *testing.B) {
	root, err := reference.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	fl, err := Load(root + "/fixtures/fleets/hundred.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		dir := labtest.Dir(b)
		rep, _, err := Run(context.Background(), fl, Options{RepoRoot: root, Dir: dir, Scale: timescale.Scale(0.01), RateLimitedReconciles: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.Write(dir); err != nil {
			b.Fatal(err)
		}
		b.Log("\n" + rep.String())
		b.ReportMetric(rep.Wall.Seconds(), "wall-s")
		b.ReportMetric(rep.Wave.Seconds(), "wave-s")
		b.ReportMetric(rep.Upgrade.P95.Seconds(), "upgrade-p95-s")
		b.ReportMetric(float64(rep.PeakTotalRSS)/(1<<20), "peak-rss-MiB")
		b.ReportMetric(float64(rep.process(harness).PeakRSS)/(1<<20), "harness-rss-MiB")
		b.ReportMetric(float64(rep.Passed), "passed")
		b.ReportMetric(float64(rep.Stopped), "stopped")
		b.ReportMetric(float64(rep.Failed), "failed")
	}
}
