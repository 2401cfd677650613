package fleet

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The cost curve: one fleet file's mix of clusters run at several lab
// sizes, one plane each, and what each wave cost against the size.
const (
	CurveFile = "curve.json"
	CurveText = "curve.txt"
	CurvePlot = "curve.svg"
)

// LoadScaled loads the fleet file at path for a lab of hosts: each
// group's count scaled by hosts over the file's hosts (at least one
// cluster a group, so the mix stays whole), and the lab hosts large, or
// what the clusters take when that is more.
func LoadScaled(path string, hosts int) (*Fleet, error) {
	file, err := read(path)
	if err != nil {
		return nil, err
	}
	if file.Hosts == 0 {
		return nil, fmt.Errorf("%s: hosts: a fleet scaled to a lab size needs the size it was written for", path)
	}
	if hosts < 1 {
		return nil, fmt.Errorf("%s scaled to %d hosts: at least 1", path, hosts)
	}
	scaled := *file
	scaled.Name = fmt.Sprintf("%s-%d", file.Name, hosts)
	scaled.Clusters = slices.Clone(file.Clusters)
	total := 0
	for i := range scaled.Clusters {
		c := &scaled.Clusters[i]
		c.Count = max(int(math.Round(float64(c.Count)*float64(hosts)/float64(file.Hosts))), 1)
		total += c.Count
	}
	if total > maxClusters {
		return nil, fmt.Errorf("%s scaled to %d hosts: %d clusters, at most %d", path, hosts, total, maxClusters)
	}
	scaled.Hosts = 0 // what the clusters take, first
	fl, err := scaled.load()
	if err != nil {
		return nil, err
	}
	if len(fl.Lab.Spec.Hosts) >= hosts {
		return fl, nil
	}
	scaled.Hosts = hosts
	return scaled.load()
}

// WriteCurve keeps the reports of one fleet at several sizes as
// curve.json, curve.txt and curve.svg in dir, smallest first.
func WriteCurve(dir string, reps []*Report) error {
	reps = bySize(reps)
	b, err := json.MarshalIndent(reps, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, CurveFile), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, CurveText), []byte(CurveTable(reps)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, CurvePlot), []byte(curveSVG(reps)), 0o644)
}

// bySize is reps smallest lab first.
func bySize(reps []*Report) []*Report {
	reps = slices.Clone(reps)
	slices.SortStableFunc(reps, func(a, b *Report) int { return a.Hosts - b.Hosts })
	return reps
}

// CurveTable is the curve as `upgradelab fleet curve` prints it,
// smallest lab first.
func CurveTable(reps []*Report) string {
	reps = bySize(reps)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "hosts\tclusters\tpassed\tfailed\tstopped\twall\tprovisioning\twave\tupgrade p50\tp95\tmax\tpeak total RSS\tharness RSS\tper host\tkube-apiserver CPU\tharness CPU")
	for _, r := range reps {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f MiB\t%s\t%s\n", r.Hosts, r.Clusters, r.Passed, r.Failed, r.Stopped,
			secs(r.Wall), secs(r.Provision), secs(r.Wave), secs(r.Upgrade.P50), secs(r.Upgrade.P95), secs(r.Upgrade.Max),
			mib(r.PeakTotalRSS), mib(r.process(harness).PeakRSS), float64(r.HarnessRSSPerHost)/(1<<20),
			secs(r.process("kube-apiserver").CPU), secs(r.process(harness).CPU))
	}
	tw.Flush()
	return b.String()
}

// process is the named process's cost (zero when it was not read).
func (r *Report) process(name string) ProcessCost {
	for _, p := range r.Processes {
		if p.Name == name {
			return p
		}
	}
	return ProcessCost{}
}

// series is one line of a panel: a value per report, NaN where the
// report has none (no wave began, so nothing was upgraded).
type series struct {
	name  string
	color string
	value func(*Report) float64
}

// curvePanel is one panel of the curve: a quantity and its series.
type curvePanel struct {
	title, unit string
	lines       []series
}

// The curve's size: each panel's width and height, and its margin.
const curveWidth, curveHeight, curvePad = 420.0, 300.0, 50.0

// curveSVG draws two panels against the lab's size (log scale): the
// wave's times in minutes and the peak memory in GiB; each point is
// labelled with the clusters that passed.
func curveSVG(reps []*Report) string {
	minutes := func(d time.Duration) float64 { return d.Minutes() }
	gib := func(b int64) float64 { return float64(b) / (1 << 30) }
	panels := []curvePanel{
		{"time", "minutes", []series{
			{"wall", "#1f77b4", func(r *Report) float64 { return minutes(r.Wall) }},
			{"provisioning", "#9467bd", func(r *Report) float64 { return minutes(r.Provision) }},
			{"wave", "#ff7f0e", func(r *Report) float64 { return ifUpgraded(r, minutes(r.Wave)) }},
			{"upgrade p95", "#2ca02c", func(r *Report) float64 { return ifUpgraded(r, minutes(r.Upgrade.P95)) }},
		}},
		{"memory", "GiB", []series{
			{"peak total RSS", "#1f77b4", func(r *Report) float64 { return gib(r.PeakTotalRSS) }},
			{"kube-apiserver", "#d62728", func(r *Report) float64 { return gib(r.process("kube-apiserver").PeakRSS) }},
			{"harness", "#2ca02c", func(r *Report) float64 { return gib(r.process(harness).PeakRSS) }},
		}},
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", 2*curveWidth, curveHeight+40)
	fmt.Fprintf(&b, `<text x="10" y="16" font-size="13">%s</text>`+"\n", html.EscapeString(curveTitle(reps)))
	lo, hi := 1.0, 10.0
	if len(reps) > 0 {
		lo, hi = math.Log10(float64(reps[0].Hosts)), math.Log10(float64(reps[len(reps)-1].Hosts))
		if hi-lo < 1e-9 {
			lo, hi = lo-0.5, hi+0.5
		}
	}
	for i, p := range panels {
		drawPanel(&b, p, reps, float64(i)*curveWidth+curvePad, lo, hi, i == 0)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// curveTitle names the fleets the curve shows.
func curveTitle(reps []*Report) string {
	if len(reps) == 0 {
		return "fleet cost against lab size"
	}
	var names []string
	for _, r := range reps {
		if n := baseName(r.Fleet); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return fmt.Sprintf("fleet %s: cost against lab size (one plane, one wave; labels: clusters passed of clusters)", strings.Join(names, ", "))
}

// drawPanel draws one panel at x0: its frame, axes, series and legend,
// the hosts' log scale running from lo to hi; with passed, each wall
// time's point is labelled with the clusters that passed.
func drawPanel(b *strings.Builder, p curvePanel, reps []*Report, x0, lo, hi float64, passed bool) {
	y0 := 30.0
	pw, ph := curveWidth-1.5*curvePad, curveHeight-curvePad-10
	top := 0.0
	for _, s := range p.lines {
		for _, r := range reps {
			if v := s.value(r); !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	top = niceCeil(top)
	px := func(hosts int) float64 { return x0 + (math.Log10(float64(hosts))-lo)/(hi-lo)*pw }
	py := func(v float64) float64 { return y0 + ph - v/top*ph }
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, y0, pw, ph)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s (%s)</text>`+"\n", x0, y0-4, p.title, p.unit)
	for k := 0; k <= 4; k++ {
		v := top * float64(k) / 4
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%.3g</text>`+"\n", x0-4, py(v)+4, v)
	}
	for _, r := range reps {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", px(r.Hosts), y0+ph+14, r.Hosts)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">hosts (log scale)</text>`+"\n", x0+pw/2, y0+ph+28)
	for j, s := range p.lines {
		var pts []string
		for _, r := range reps {
			if v := s.value(r); !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(r.Hosts), py(v)))
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(r.Hosts), py(v), s.color)
			}
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		// The legend: a stroke of the series' colour, then its name.
		ly := y0 + 14 + float64(j)*13
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", x0+6, ly-4, x0+20, ly-4, s.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", x0+24, ly, s.color, html.EscapeString(s.name))
	}
	if passed {
		for _, r := range reps {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%d/%d</text>`+"\n", px(r.Hosts), py(r.Wall.Minutes())-8, r.Passed, r.Clusters)
		}
	}
}

// baseName is a fleet's name without the size LoadScaled appended
// ("hundred-300" is hundred's mix at 300 hosts; the lab may hold more
// hosts than that when the clusters take more).
func baseName(fleet string) string {
	i := strings.LastIndex(fleet, "-")
	if i < 0 || i == len(fleet)-1 || strings.Trim(fleet[i+1:], "0123456789") != "" {
		return fleet
	}
	return fleet[:i]
}

// ifUpgraded is v, or NaN (no point) when no cluster of r was upgraded.
func ifUpgraded(r *Report, v float64) float64 {
	if r.Upgrade.N == 0 {
		return math.NaN()
	}
	return v
}

// niceCeil is v rounded up to 1, 2 or 5 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
