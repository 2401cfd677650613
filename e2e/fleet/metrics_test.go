package fleet

import (
	"math"
	"strings"
	"testing"
	"time"
)

const sample = `# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="machine",name="machine"} 3
workqueue_depth{controller="cluster",name="cluster"} 2
# HELP controller_runtime_reconcile_time_seconds Length of time per reconciliation per controller
# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_bucket{controller="machine",le="0.1"} 50
controller_runtime_reconcile_time_seconds_bucket{controller="machine",le="1"} 90
controller_runtime_reconcile_time_seconds_bucket{controller="machine",le="+Inf"} 100
controller_runtime_reconcile_time_seconds_sum{controller="machine"} 40
controller_runtime_reconcile_time_seconds_count{controller="machine"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="cluster",le="0.1"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="cluster",le="1"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="cluster",le="+Inf"} 0
controller_runtime_reconcile_time_seconds_sum{controller="cluster"} 0
controller_runtime_reconcile_time_seconds_count{controller="cluster"} 0
`

func TestMetricsSumsAndQuantiles(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sum("workqueue_depth"); got != 5 {
		t.Fatalf("depth %v", got)
	}
	h := s.histogram("controller_runtime_reconcile_time_seconds")
	if h.count() != 100 {
		t.Fatalf("count %d (%s)", h.count(), h)
	}
	// The 50th observation is the 0.1 bucket's last: 0.1.
	if q := h.quantile(0.5); math.Abs(q-0.1) > 1e-9 {
		t.Fatalf("p50 %v", q)
	}
	// The 70th is halfway through (0.1, 1]: 0.55.
	if q := h.quantile(0.7); math.Abs(q-0.55) > 1e-9 {
		t.Fatalf("p70 %v", q)
	}
	// The 95th is in +Inf: the highest finite bound.
	if q := h.quantile(0.95); q != 1 {
		t.Fatalf("p95 %v", q)
	}
	none := h.since(h)
	if none.count() != 0 || !math.IsNaN(none.quantile(0.5)) {
		t.Fatalf("nothing since itself: %s", none)
	}
	if _, err := parseMetrics(strings.NewReader("workqueue_depth{ 3\n")); err == nil {
		t.Fatal("malformed metrics parsed")
	}
}

// Reading only the named families keeps theirs whole and drops the rest.
func TestOnlyTheNamedFamiliesAreRead(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(familiesNamed(sample, []string{"workqueue_depth"})))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sum("workqueue_depth"); got != 5 {
		t.Fatalf("depth %v", got)
	}
	if len(s) != 1 {
		t.Fatalf("families read: %d; want only workqueue_depth", len(s))
	}
}

// The API server's requests are counted by verb, resource, subresource
// and code, and the most frequent between two readings come first.
func TestTheAPIServerRequestsAreCountedByKind(t *testing.T) {
	read := func(text string) map[string]float64 {
		t.Helper()
		s, err := parseMetrics(strings.NewReader("# TYPE apiserver_request_total counter\n" + text))
		if err != nil {
			t.Fatal(err)
		}
		return requestKinds(s)
	}
	before := read(`apiserver_request_total{code="409",group="cluster.x-k8s.io",resource="clusters",subresource="status",verb="PATCH",version="v1beta2"} 100
apiserver_request_total{code="200",group="cluster.x-k8s.io",resource="clusters",subresource="status",verb="PATCH",version="v1beta2"} 50
apiserver_request_total{code="200",group="",resource="",subresource="",verb="GET",version=""} 7
`)
	after := read(`apiserver_request_total{code="409",group="cluster.x-k8s.io",resource="clusters",subresource="status",verb="PATCH",version="v1beta2"} 400
apiserver_request_total{code="200",group="cluster.x-k8s.io",resource="clusters",subresource="status",verb="PATCH",version="v1beta2"} 70
apiserver_request_total{code="200",group="metal3.io",resource="baremetalhosts",subresource="",verb="LIST",version="v1alpha1"} 60
apiserver_request_total{code="200",group="",resource="",subresource="",verb="GET",version=""} 7
`)
	got := topRequests(before, after, 10*time.Second, 2)
	want := []RequestKind{{"PATCH clusters/status 409", 300, 30}, {"LIST baremetalhosts 200", 60, 6}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("top requests %+v; want %+v", got, want)
	}
	if all := topRequests(before, after, 10*time.Second, 10); len(all) != 3 {
		t.Fatalf("every kind that grew: %+v (the unchanged non-resource GET left out)", all)
	}
}
