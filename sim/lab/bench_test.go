package lab

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkLab100HostsUpAndPoweredOn brings a 100-host lab up on the libvirt
// test driver and powers every host on until its OS runs (time scale 0:
// the modelled POST and boot take no real time, every step still runs).
func BenchmarkLab100HostsUpAndPoweredOn(b *testing.B) {
	base, err := Load("../../fixtures/labs/single-node.yaml")
	if err != nil {
		b.Fatal(err)
	}
	def, err := base.Scaled(100)
	if err != nil {
		b.Fatal(err)
	}

	var upTotal, onTotal time.Duration
	var heap uint64
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		begin := time.Now()
		l, err := Up(context.Background(), def, Options{StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		upTotal += time.Since(begin)
		events, cancel := l.Subscribe()
		begin = time.Now()
		var wg sync.WaitGroup
		for _, h := range l.Hosts() {
			wg.Go(func() {
				if err := h.PowerOn(); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		for running := 0; running < 100; {
			if e := <-events; e.Reason == "OSRunning" {
				running++
			}
		}
		onTotal += time.Since(begin)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap += after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
		cancel()
		l.Down()
	}
	b.ReportMetric(float64(upTotal.Milliseconds())/float64(b.N), "ms-up/op")
	b.ReportMetric(float64(onTotal.Milliseconds())/float64(b.N), "ms-all-running/op")
	b.ReportMetric(float64(heap)/float64(b.N)/(1<<20), "MiB-heap/op")
	b.ReportMetric(rssMiB(), "MiB-rss")
}

func rssMiB() float64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
