package redfish

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	a, err := ParseAddress("redfish-virtualmedia+https://127.0.0.1:8443/redfish/v1/Systems/cp-0")
	if err != nil || a.Endpoint != "https://127.0.0.1:8443" || a.SystemPath != "/redfish/v1/Systems/cp-0" {
		t.Fatalf("ParseAddress = %+v, %v", a, err)
	}
	for _, bad := range []string{
		"https://127.0.0.1:8443/redfish/v1/Systems/cp-0",                  // no driver scheme
		"redfish-virtualmedia+http://127.0.0.1:8443/redfish/v1/Systems/x", // plain HTTP
		"redfish-virtualmedia+https://127.0.0.1:8443/redfish/v1/Managers/x",
		"redfish-virtualmedia+https:///redfish/v1/Systems/x",
	} {
		if _, err := ParseAddress(bad); err == nil || !strings.Contains(err.Error(), "bmc address") {
			t.Errorf("ParseAddress(%q) = %v; want an error naming the bmc address", bad, err)
		}
	}
}
