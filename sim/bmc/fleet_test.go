package bmc

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// A host's Redfish service and IPMI interface are one BMC: when it
// reboots itself through either (an IPMI cold reset, a Redfish
// Manager.Reset), both stop answering, and both come back.
func TestABMCRebootTakesBothProtocolsDown(t *testing.T) {
	l := labtest.Up(t, "single-node", timescale.Scale(0.02)) // IPMI reset 60 s -> 1.2 s, Manager.Reset 30 s -> 0.6 s
	fleet, err := StartFleet(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	rf, ip := fleet.BMCs["node-0"], fleet.IPMI["node-0"]
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 200 * time.Millisecond} //nolint:gosec // reachability only
	redfishUp := func() bool {
		req, _ := http.NewRequest("GET", rf.SystemURL(), nil)
		req.SetBasicAuth("admin", "upgradelab-bmc")
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	ipmiUp := func() bool { return ipmiAnswers(ip.Addr(), 200*time.Millisecond) == nil }
	waitBoth := func(what string, up bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for redfishUp() != up || ipmiUp() != up {
			if time.Now().After(deadline) {
				t.Fatalf("%s: Redfish up %v, IPMI up %v, want both %v", what, redfishUp(), ipmiUp(), up)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitBoth("at start", true)
	ip.Reset() // what `mc reset cold` does
	waitBoth("after an IPMI cold reset", false)
	waitBoth("after the reset's down time", true)

	req, _ := http.NewRequest("POST", rf.Endpoint()+managerPath+"/Actions/Manager.Reset", strings.NewReader(`{"ResetType": "GracefulRestart"}`))
	req.SetBasicAuth("admin", "upgradelab-bmc")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("Manager.Reset: %v %v", resp, err)
	}
	resp.Body.Close()
	waitBoth("after a Redfish Manager.Reset", false)
	waitBoth("after the reboot's down time", true)
}

// Each host's IPMI interface has an IP of its own, as a site's BMCs do:
// Ironic paces its ipmitool commands per IP, and ipmitool reaches each.
func TestEachIPMIInterfaceHasItsOwnAddress(t *testing.T) {
	l := labtest.Up(t, "three-node-ipmi", timescale.Scale(0.01))
	fleet, err := StartFleet(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	seen := map[string]string{}
	for host, b := range fleet.IPMI {
		ip, _, err := net.SplitHostPort(b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := seen[ip]; dup {
			t.Errorf("%s and %s share the IPMI address %s", host, other, ip)
		}
		seen[ip] = host
		if err := ipmiAnswers(b.Addr(), time.Second); err != nil {
			t.Errorf("%s at %s: %v", host, b.Addr(), err)
		}
	}
	if len(seen) != 3 {
		t.Errorf("%d IPMI interfaces, want 3", len(seen))
	}
}
