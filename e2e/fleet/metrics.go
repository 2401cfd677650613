package fleet

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one read of a Prometheus endpoint.
type scrape map[string]*dto.MetricFamily

// scrapeURL reads url's metrics in Prometheus' text format: every family,
// or only those named in only (the sampler's every-2-s read of five
// managers' workqueue depths parsed every family of theirs: 4% of the
// harness's CPU in a 55-cluster fleet).
func scrapeURL(ctx context.Context, c *http.Client, url string, only ...string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	if len(only) == 0 {
		return parseMetrics(resp.Body)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(strings.NewReader(familiesNamed(string(body), only)))
}

// familiesNamed is the lines of a text exposition that belong to the
// named families (their samples, HELP and TYPE): counters and gauges,
// whose samples carry the family's name (a histogram's add suffixes).
func familiesNamed(text string, names []string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		name := line
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name = rest
		} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name = rest
		}
		if end := strings.IndexAny(name, "{ "); end >= 0 {
			name = name[:end]
		}
		if slices.Contains(names, name) {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// parseMetrics reads Prometheus' text format.
func parseMetrics(r io.Reader) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return scrape(families), nil
}

// sum is the sum of a counter's or gauge's series.
func (s scrape) sum(name string) float64 {
	total := 0.0
	for _, m := range s.family(name) {
		total += value(m)
	}
	return total
}

func (s scrape) family(name string) []*dto.Metric {
	if f, ok := s[name]; ok {
		return f.GetMetric()
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// histogram is a histogram's cumulative buckets (upper bound to count),
// every series added up.
type histogram map[float64]uint64

func (s scrape) histogram(name string) histogram { return histogramOf(s.family(name)) }

// histogramOf adds up the series of one histogram.
func histogramOf(series []*dto.Metric) histogram {
	h := histogram{}
	for _, m := range series {
		inf := false
		for _, b := range m.GetHistogram().GetBucket() {
			h[b.GetUpperBound()] += b.GetCumulativeCount()
			inf = inf || math.IsInf(b.GetUpperBound(), 1)
		}
		if !inf { // the text format's +Inf bucket is its count
			h[math.Inf(1)] += m.GetHistogram().GetSampleCount()
		}
	}
	return h
}

// since is what was observed after before (counts only grow).
func (h histogram) since(before histogram) histogram {
	out := histogram{}
	for le, n := range h {
		out[le] = n - min(before[le], n)
	}
	return out
}

// count is how many observations there are.
func (h histogram) count() uint64 { return h[math.Inf(1)] }

// quantile is the q-quantile, interpolated linearly inside its bucket as
// Prometheus' histogram_quantile does; NaN without observations. An
// answer in the last, unbounded bucket is the highest finite bound.
func (h histogram) quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	total := float64(h.count())
	if total == 0 || len(bounds) == 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := float64(h[le])
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return lower
}

// String is the histogram for debugging.
func (h histogram) String() string {
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	out := ""
	for _, le := range bounds {
		out += strconv.FormatFloat(le, 'g', -1, 64) + ":" + strconv.FormatUint(h[le], 10) + " "
	}
	return out
}

// requestKinds are the API server's request counts
// (apiserver_request_total) by kind: "PATCH clusters/status 409".
func requestKinds(s scrape) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s.family("apiserver_request_total") {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		what := l["resource"]
		if l["subresource"] != "" {
			what += "/" + l["subresource"]
		}
		if what == "" {
			what = "(non-resource)"
		}
		out[l["verb"]+" "+what+" "+l["code"]] += value(m)
	}
	return out
}
