package redfish

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// A steady-state look at a host dials its BMC, reads and lets go, every
// PowerCheck for every host. Letting go must keep the TLS connection for
// the next look: each new connection is a TLS handshake on both sides.
func TestLookingAgainReusesTheBMCsConnection(t *testing.T) {
	var mu sync.Mutex
	conns, requests := 0, map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/redfish/v1/", "/redfish/v1":
			_, _ = w.Write([]byte(`{"@odata.id":"/redfish/v1/","Id":"RootService","Systems":{"@odata.id":"/redfish/v1/Systems"}}`))
		case "/redfish/v1/Systems/cp-0":
			_, _ = w.Write([]byte(`{"@odata.id":"/redfish/v1/Systems/cp-0","Id":"cp-0","PowerState":"On"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.StartTLS()
	defer srv.Close()

	addr := Address{Endpoint: srv.URL, SystemPath: "/redfish/v1/Systems/cp-0"}
	httpClient := srv.Client()
	for range 3 {
		c, err := Dial(addr, "admin", "password", httpClient)
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		if !c.PoweredOn() {
			t.Fatalf("the system reads off; want on")
		}
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Errorf("three looks opened %d connections to the BMC; want 1, kept between looks", conns)
	}
	if n := requests["GET /redfish/v1/Systems/cp-0"]; n != 3 {
		t.Errorf("the system was read %d times; want once per look (3)", n)
	}
}
