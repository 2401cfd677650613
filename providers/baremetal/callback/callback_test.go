package callback

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
)

func TestParseRegistration(t *testing.T) {
	good := `{"machineID":"0123456789abcdef","hostname":"node-0","macs":["52:54:00:15:00:01"],"agentURL":"https://127.0.0.1:1","image":"recovery"}`
	if reg, err := ParseRegistration(strings.NewReader(good), "default", "elemental"); err != nil || reg.Hostname != "node-0" {
		t.Fatalf("a good registration: %+v, %v", reg, err)
	}
	for _, tc := range []struct{ body, ns, pool, want string }{
		{good, "Default", "elemental", `namespace "Default"`},
		{good, "default", "el_pool", `pool "el_pool"`},
		{`{"machineID":"0123456789abcdef"`, "default", "p", "malformed body"},
		{`{"machineID":"0123456789abcdef","color":"red"}`, "default", "p", `unknown field "color"`},
		{`{"machineID":"short","hostname":"h","macs":["m"],"agentURL":"u"}`, "default", "p", `machineID "short"`},
		{`{"machineID":"..........","hostname":"h","macs":["m"],"agentURL":"u"}`, "default", "p", `machineID`},
		{`{"machineID":"0123456789abcdef","macs":["m"],"agentURL":"u"}`, "default", "p", "hostname, macs and agentURL are required"},
	} {
		if _, err := ParseRegistration(strings.NewReader(tc.body), tc.ns, tc.pool); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRegistration(%s, %s, %s) = %v; want an error with %q", tc.body, tc.ns, tc.pool, err, tc.want)
		}
	}
}

func TestParseHeartbeat(t *testing.T) {
	if _, err := ParseHeartbeat(strings.NewReader(`{"macs":["a"],"agentURL":"https://x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHeartbeat(strings.NewReader(`{"macs":[]}`)); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("a heartbeat without MACs: %v", err)
	}
}

// Whatever a host posts, the endpoint answers with a parse result, never a
// panic, and accepts only what names a usable identity.
func FuzzParseRegistration(f *testing.F) {
	f.Add([]byte(`{"machineID":"0123456789abcdef","hostname":"node-0","macs":["52:54:00:15:00:01"],"agentURL":"https://127.0.0.1:1"}`), "default", "elemental")
	f.Add([]byte(`{"macs":["a"],"agentURL":"https://x"}`), "ns", "p")
	f.Add([]byte(`[]`), "", "")
	f.Fuzz(func(t *testing.T, body []byte, ns, pool string) {
		reg, err := ParseRegistration(bytes.NewReader(body), ns, pool)
		if err == nil && (len(reg.MachineID) < 8 || reg.Hostname == "" || len(reg.MACs) == 0 || reg.AgentURL == "") {
			t.Fatalf("accepted an unusable registration %+v", reg)
		}
		_, _ = ParseHeartbeat(bytes.NewReader(body))
	})
}

// Every listener hears each MAC of a heartbeat, lower-cased as Lookup
// keys them, after the heartbeat is recorded (so a woken reader finds it).
func TestListenersHearEachHeartbeatAfterItIsRecorded(t *testing.T) {
	h := &Heartbeats{}
	var heard []string
	h.Listen(func(mac string) {
		if _, ok := h.Lookup(mac); !ok {
			t.Errorf("woken for %s before its heartbeat was recorded", mac)
		}
		heard = append(heard, mac)
	})
	h.record(agentv1.Heartbeat{MACs: []string{"52:54:00:AA:00:01", "52:54:00:aa:00:02"}, AgentURL: "https://127.0.0.1:1"})
	if want := []string{"52:54:00:aa:00:01", "52:54:00:aa:00:02"}; !slices.Equal(heard, want) {
		t.Fatalf("heard %v, want %v", heard, want)
	}
}
