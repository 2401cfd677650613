package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A call the channel does not know, or a request that does not decode,
// is refused with what was wrong, before any hardware is touched.
func TestTheHardwareChannelRefusesUnknownCallsAndBadRequests(t *testing.T) {
	srv := httptest.NewServer(NewHardwareServer(nil, nil, nil))
	defer srv.Close()
	for _, tc := range []struct {
		call, body string
		status     int
		want       string
	}{
		{"no-such-call", "{}", http.StatusNotFound, `unknown hardware call "no-such-call"`},
		{callWrite.name, `{"url": 7}`, http.StatusConflict, "write: json: cannot unmarshal number"},
		{callStopNode.name, `not json`, http.StatusConflict, "stop-node: invalid character"},
	} {
		resp, err := http.Post(srv.URL+"/hw/"+tc.call, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s; want %d with %q", tc.call, resp.StatusCode, b, tc.status, tc.want)
		}
	}
}
