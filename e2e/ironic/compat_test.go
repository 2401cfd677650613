package ironic

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// What baremetal-operator v0.11 sends on node creation reaches Ironic
// 21.4 without disable_power_off when it is false (Ironic's default),
// and untouched otherwise.
func TestCompatDropsOnlyAFalseDisablePowerOff(t *testing.T) {
	var got string
	ironic := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = r.Method + " " + r.URL.Path + " " + string(b)
	}))
	defer ironic.Close()
	target, _ := url.Parse(ironic.URL)
	front := httptest.NewServer(compat(target))
	defer front.Close()
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/nodes", `{"name":"ns~h","disable_power_off":false}`, `POST /v1/nodes {"name":"ns~h"}`},
		{"POST", "/v1/nodes", `{"name":"ns~h","disable_power_off":true}`, `POST /v1/nodes {"name":"ns~h","disable_power_off":true}`},
		{"PATCH", "/v1/nodes/x", `[{"op":"add","path":"/disable_power_off","value":false}]`, `PATCH /v1/nodes/x [{"op":"add","path":"/disable_power_off","value":false}]`},
		{"POST", "/v1/ports", `{"disable_power_off":false}`, `POST /v1/ports {"disable_power_off":false}`},
	} {
		req, _ := http.NewRequest(c.method, front.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got != c.want {
			t.Errorf("%s %s %s reached Ironic as %q, want %q", c.method, c.path, c.body, got, c.want)
		}
	}
}
