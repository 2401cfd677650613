package mgmt

import (
	"context"
	"testing"
	"time"
)

// BenchmarkPlaneStart measures a warm start: kube-apiserver and etcd, CRDs
// and webhooks installed, all three managers answering /readyz.
func BenchmarkPlaneStart(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		begin := time.Now()
		p, err := Start(context.Background(), Options{ArtifactsDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(begin)
		b.StopTimer()
		p.Stop()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-ready/op")
}
