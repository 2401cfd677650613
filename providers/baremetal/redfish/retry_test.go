package redfish

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// busyBMC answers the first failures requests of each method with 503,
// then 200, and counts what it was sent.
type busyBMC struct {
	failures  int64
	get, post atomic.Int64
	served    atomic.Int64
}

func (b *busyBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := &b.post
	if r.Method == http.MethodGet {
		n = &b.get
	}
	if n.Add(1) <= b.failures {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("{}"))
}

func TestAReadAnsweredWith5xxIsAskedAgainAsSushyDoes(t *testing.T) {
	bmc := &busyBMC{failures: 3}
	srv := httptest.NewServer(bmc)
	defer srv.Close()
	c := Retrying(srv.Client(), DefaultRetries, time.Millisecond)

	resp, err := c.Get(srv.URL + "/redfish/v1/Systems/cp-0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || bmc.get.Load() != 4 {
		t.Errorf("GET after 3 busy answers: status %d after %d requests; want 200 after 4", resp.StatusCode, bmc.get.Load())
	}

	resp, err = c.Post(srv.URL+"/redfish/v1/Systems/cp-0/Actions/ComputerSystem.Reset", "application/json", strings.NewReader(`{"ResetType":"On"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || bmc.post.Load() != 1 {
		t.Errorf("POST answered busy: status %d after %d requests; want the 503 after 1 (sushy sends actions once)", resp.StatusCode, bmc.post.Load())
	}
}

func TestRetriesAreBoundedAndEndWithTheContext(t *testing.T) {
	bmc := &busyBMC{failures: 1000}
	srv := httptest.NewServer(bmc)
	defer srv.Close()

	resp, err := Retrying(srv.Client(), 2, time.Millisecond).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || bmc.get.Load() != 3 {
		t.Errorf("always busy, 2 retries: status %d after %d requests; want the 503 after 3", resp.StatusCode, bmc.get.Load())
	}

	bmc.get.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	resp, err = Retrying(srv.Client(), DefaultRetries, time.Hour).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || bmc.get.Load() != 1 || time.Since(start) > 10*time.Second {
		t.Errorf("context ended during the pause: status %d after %d requests in %s; want the 503 after 1, at once", resp.StatusCode, bmc.get.Load(), time.Since(start))
	}
}
