package ipa

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// inspectedHost has the facts an inspection must carry.
type inspectedHost struct{ fakeHost }

func (h *inspectedHost) Inventory() lab.Inventory {
	return lab.Inventory{Hostname: "node-0", CPUs: 8, MemoryMiB: 16384, DiskGiB: 100, Serial: "SN0",
		NICs: []lab.InventoryNIC{{Name: "eno1", MAC: "52:54:00:00:00:01", Driver: "i40e", Firmware: "9.20", Up: true},
			{Name: "eno2", MAC: "52:54:00:00:00:02", Driver: "i40e", Firmware: "9.20"}}}
}

// A boot whose command line names inspector's callback posts the host's
// own inventory there, in IPA's format, before anything else, and with
// only the callback (no Ironic API) it does nothing more.
func TestAnInspectionBootReportsTheHostsHardware(t *testing.T) {
	got := make(chan map[string]any, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method != http.MethodPost || r.URL.Path != "/v1/continue" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		got <- body
		_, _ = w.Write([]byte(`{"uuid": "uuid-0"}`))
	}))
	defer srv.Close()
	p, ok := ParseKernelArgs("ipa-inspection-callback-url=" + srv.URL + "/v1/continue ipa-inspection-collectors=default,extra-hardware")
	if !ok || p.APIURL != "" || len(p.Collectors) != 2 {
		t.Fatalf("ParseKernelArgs = %+v, %v", p, ok)
	}
	var events []string
	done := make(chan struct{})
	go func() {
		Run(context.Background(), &inspectedHost{}, p, func(reason, _ string) { events = append(events, reason) }, func() bool { return true })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an inspection-only boot did not finish")
	}
	var body map[string]any
	select {
	case body = <-got:
	default:
		t.Fatalf("inspector got no report; events %v", events)
	}
	b, _ := json.Marshal(body)
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	inv := r.Inventory
	if inv.CPU.Count != 8 || inv.Memory.PhysicalMB != 16384 || r.RootDisk.Size != 100<<30 || len(inv.Disks) != 1 || inv.SystemVendor.SerialNumber != "SN0" || inv.Hostname != "node-0" {
		t.Errorf("inventory %+v, root disk %+v", inv, r.RootDisk)
	}
	if len(inv.Interfaces) != 2 || inv.Interfaces[0].MAC != "52:54:00:00:00:01" || !inv.Interfaces[0].HasCarrier || inv.Interfaces[1].HasCarrier {
		t.Errorf("interfaces %+v", inv.Interfaces)
	}
	if !hasFact(r.Extra, "eno2", "driver", "i40e") || !hasFact(r.Extra, "eno1", "firmware", "9.20") {
		t.Errorf("extra hardware %v: want each NIC's driver and firmware", r.Extra)
	}
	if body["error"] != nil {
		t.Errorf("error %v: want null", body["error"])
	}
	if len(events) != 1 || events[0] != "IronicInspectionSent" {
		t.Errorf("events %v", events)
	}
	if r := newReport((&inspectedHost{}).Inventory(), []string{"default"}); r.Extra != nil {
		t.Errorf("the default collector alone sent extra hardware %v", r.Extra)
	}
}

func hasFact(facts [][]string, nic, key, value string) bool {
	for _, f := range facts {
		if len(f) == 4 && f[0] == "network" && f[1] == nic && f[2] == key && f[3] == value {
			return true
		}
	}
	return false
}

// A report inspector refuses ends the inspection with the refusal
// recorded; it is not sent again.
func TestARefusedReportIsRecordedOnce(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		http.Error(w, `{"error": {"message": "Look up error"}}`, http.StatusNotFound)
	}))
	defer srv.Close()
	var events []string
	Run(context.Background(), &inspectedHost{}, Params{InspectionURL: srv.URL + "/v1/continue"}, func(reason, _ string) { events = append(events, reason) }, func() bool { return true })
	if posts.Load() != 1 || len(events) != 1 || events[0] != "IronicInspectionRefused" {
		t.Errorf("%d posts, events %v", posts.Load(), events)
	}
}
