package vm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

// rssMiB is a process's resident memory.
func rssMiB(pid int) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

func benchLab(b *testing.B) (*testLab, map[string]diskimage.Payload) {
	lab := newTestLab(b)
	payloads := map[string]diskimage.Payload{}
	for _, name := range []string{"os-a", "recovery"} {
		p, err := lab.builder.Payload(context.Background(), imagev1.Manifest{Name: name})
		if err != nil {
			b.Fatal(err)
		}
		payloads[name] = p
	}
	lab.images.payloads = payloads
	return lab, payloads
}

// BenchmarkBootToAgent: power on to the guest's agent API answering,
// through OVMF, GRUB's A/B choice, the kernel and the guest's init.
func BenchmarkBootToAgent(b *testing.B) {
	lab, p := benchLab(b)
	a := p["os-a"]
	m := lab.machine(b, "bench-boot", &a, p["recovery"])
	ctx := context.Background()
	var rss float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.PowerOn(); err != nil {
			b.Fatal(err)
		}
		if _, err := m.WaitBoot(ctx, ""); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if pid, err := lab.daemon.QEMUPid(m.Spec.Name); err == nil {
			rss = max(rss, rssMiB(pid))
		}
		if err := m.PowerCut(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/boot")
	b.ReportMetric(rss, "MiB-RSS/VM")
}

// BenchmarkSixVMsBootToAgent: a 6-host lab powered on at once, until every
// guest answers (two cores share six TCG guests).
func BenchmarkSixVMsBootToAgent(b *testing.B) {
	lab, p := benchLab(b)
	a := p["os-a"]
	var ms []*Machine
	for i := 0; i < 6; i++ {
		ms = append(ms, lab.machine(b, fmt.Sprintf("bench-six-%d", i), &a, p["recovery"]))
	}
	ctx := context.Background()
	var rss float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		errs := make(chan error, len(ms))
		for _, m := range ms {
			if err := m.PowerOn(); err != nil {
				b.Fatal(err)
			}
		}
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.BootTimeout = 5 * time.Minute
				_, err := m.WaitBoot(ctx, "")
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for _, m := range ms {
			if pid, err := lab.daemon.QEMUPid(m.Spec.Name); err == nil {
				rss = max(rss, rssMiB(pid))
			}
			m.PowerCut()
		}
		b.StartTimer()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/lab")
	b.ReportMetric(rss, "MiB-RSS/VM")
}

// BenchmarkSlotWrite: the guest downloads an image from the host and
// writes it into its inactive slot (checksum, fsync and the bootloader
// block included), by image size.
func BenchmarkSlotWrite(b *testing.B) {
	lab, p := benchLab(b)
	a := p["os-a"]
	m := lab.machine(b, "bench-write", &a, p["recovery"])
	ctx := context.Background()
	if err := m.PowerOn(); err != nil {
		b.Fatal(err)
	}
	if _, err := m.WaitBoot(ctx, ""); err != nil {
		b.Fatal(err)
	}
	for _, mib := range []int{8, 16, 32} {
		name := fmt.Sprintf("random-%dmib", mib)
		data := make([]byte, mib<<20)
		rand.Read(data)
		path := filepath.Join(lab.dir, name+".img")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(data)
		lab.images.payloads[name] = diskimage.Payload{Path: path, Image: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
		b.Run(fmt.Sprintf("size=%dMiB", mib), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				req := agentv1.StageRequest{URL: lab.images.guestURL(name, false), SHA256: hex.EncodeToString(sum[:])}
				if err := m.Call(ctx, agentv1.PathStage, req, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
