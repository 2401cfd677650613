package ironic

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/site"
)

// BenchmarkIronicProvisionsAHost starts Ironic and inspector for a
// one-host lab at the time scale of a run under Ironic (MinScale) and
// takes the host from enrollment to available (manage, in-band
// inspection and cleaning through the deploy ramdisk) and from available
// to active (a deploy of an A/B image with its config drive): the wall
// time of each, how long the APIs took to answer after the start, and
// the two processes' peak RSS together.
func BenchmarkIronicProvisionsAHost(b *testing.B) {
	def, err := lab.Load(filepath.Join("..", "..", "fixtures", "labs", "single-node.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	img, err := def.Catalog.Get(deployImage)
	if err != nil {
		b.Fatal(err)
	}
	var total provisioning
	for range b.N {
		p := provisionOnce(b, def, img)
		total.answer += p.answer
		total.toAvailable += p.toAvailable
		total.toActive += p.toActive
		total.rss = max(total.rss, p.rss)
	}
	n := float64(b.N)
	b.ReportMetric(total.answer.Seconds()/n, "s-answering/op")
	b.ReportMetric(total.toAvailable.Seconds()/n, "s-enroll-to-available/op")
	b.ReportMetric(total.toActive.Seconds()/n, "s-available-to-active/op")
	b.ReportMetric(float64(total.rss>>20), "MiB-ironic-peak-rss")
}

// provisioning is what one pass measured.
type provisioning struct {
	answer, toAvailable, toActive time.Duration
	rss                           int64
}

// provisionOnce starts a lab and Ironic, provisions the lab's host and
// stops both, however it ends.
func provisionOnce(b *testing.B, def *lab.Definition, img image.Bundle) provisioning {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := labtest.Dir(b)
	s, err := site.Start(ctx, site.Options{Lab: def, StateDir: filepath.Join(dir, "lab"), Scale: MinScale})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	var p provisioning
	begin := time.Now()
	ir, err := Start(ctx, Options{Dir: filepath.Join(dir, "ironic")})
	if err != nil {
		b.Fatal(err)
	}
	defer ir.Stop()
	p.answer = time.Since(begin)
	c := NewClient(ir.URL)
	host := s.Lab.Info().Hosts[0].Name
	begin = time.Now()
	enroll(b, ctx, s, c, host)
	provision(b, ctx, c, host, map[string]any{"target": "provide"}, "available")
	p.toAvailable = time.Since(begin)
	begin = time.Now()
	setImage(b, ctx, s, c, host, img.SHA256)
	provision(b, ctx, c, host, map[string]any{"target": "active", "configdrive": map[string]any{"meta_data": map[string]any{"uuid": "u"}}}, "active")
	p.toActive = time.Since(begin)
	for _, pr := range ir.Processes() {
		if u, ok := proc.ReadUsage(pr.PID()); ok {
			p.rss += u.PeakRSS
		}
	}
	_ = c.Do(ctx, http.MethodDelete, "/v1/nodes/"+host, nil, nil)
	return p
}
