package bmc

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// BenchmarkBMCRequests measures authenticated GETs of the ComputerSystem
// against one BMC over HTTPS with keep-alive connections.
func BenchmarkBMCRequests(b *testing.B) {
	f := newFixture(b, 0)
	client := f.httpClient()
	url := f.bmc.SystemURL()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			req.SetBasicAuth("admin", "upgradelab-bmc")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkFleet100BMCs starts a BMC for each host of a 100-host lab and
// waits until every one answers its ComputerSystem over HTTPS.
func BenchmarkFleet100BMCs(b *testing.B) {
	base, err := lab.Load("../../fixtures/labs/single-node.yaml")
	if err != nil {
		b.Fatal(err)
	}
	def, err := base.Scaled(100)
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for range b.N {
		l, err := lab.Up(context.Background(), def, lab.Options{StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		begin := time.Now()
		fleet, err := StartFleet(l, nil)
		if err != nil {
			b.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // timing only; trust is tested elsewhere
		var wg sync.WaitGroup
		for _, bmc := range fleet.BMCs {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", bmc.SystemURL(), nil)
				req.SetBasicAuth("admin", "upgradelab-bmc")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Errorf("%s: %v", bmc.SystemURL(), err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
		total += time.Since(begin)
		fleet.Close()
		l.Down()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-100-answering/op")
}
