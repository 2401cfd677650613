package lab

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	netbootv1 "github.com/upgradelab/upgradelab/api/netboot/v1"
)

// A PXE boot fetches the boot server's script for the port's MAC: a
// chained image boots FromNetwork with its URL (where a deploy ramdisk
// finds its provisioner); a 404 or an exit passes to the next device; no
// offer on the network is PXE-E16. The boot server is a stand-in for the
// provider's (providers/baremetal serves the real one).
func TestNetworkBootRunsTheBootServersScriptForTheMAC(t *testing.T) {
	l := upLab(t, "single-node", 0, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	var mu sync.Mutex
	scripts := map[string]netbootv1.Script{}
	raw := map[string]string{} // scripts beyond the wire API's
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mac := r.URL.Query().Get(netbootv1.MACParam)
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, mac)
		if b, ok := raw[mac]; ok {
			w.Write([]byte(b))
			return
		}
		s, ok := scripts[mac]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(s.Format())
	}))
	defer srv.Close()

	boot := func() Event { return pxeBootOnce(t, h, events) }
	// No offer: PXE fails (then the boot order goes on).
	if e := boot(); e.Reason != "BootDeviceFailed" || !strings.Contains(e.Message, "PXE-E16") {
		t.Fatalf("PXE without a boot server: %s %s", e.Reason, e.Message)
	}
	if err := l.SetNetworkBoot("provisioning", srv.URL+"/boot"); err != nil {
		t.Fatal(err)
	}
	if e := boot(); e.Reason != "BootDeviceFailed" || !strings.Contains(e.Message, "404 Not Found") {
		t.Fatalf("PXE with no script for the MAC: %s %s", e.Reason, e.Message)
	}
	mac := h.Spec().NICs[0].MAC
	deploy := l.ImageServer().ImageURL("deploy-ramdisk-2026.10") + "?ipa-api-url=https://provider"
	mu.Lock()
	scripts[mac] = netbootv1.Script{Chain: deploy}
	mu.Unlock()
	e := boot()
	if e.Reason != "OSRunning" || e.Data["source"] != string(FromNetwork) {
		t.Fatalf("PXE with a chain script: %s %v", e.Reason, e.Data)
	}
	if os := h.Status().OS; os == nil || os.Media != deploy || !os.DeployRamdisk() {
		t.Fatalf("running OS after the network boot: %+v", os)
	}
	mu.Lock()
	scripts[mac] = netbootv1.Script{}
	mu.Unlock()
	if e := boot(); e.Reason != "BootDeviceFailed" || !strings.Contains(e.Message, "the boot script exits") {
		t.Fatalf("PXE with an exit script: %s %s", e.Reason, e.Message)
	}
	if asked[len(asked)-1] != mac {
		t.Fatalf("the firmware asked for MAC %q, want %q", asked[len(asked)-1], mac)
	}
	// A script may power the host off (Ironic's config does when the
	// deploy kernel never comes).
	mu.Lock()
	raw[mac] = "#!ipxe\nkernel " + srv.URL + "/missing || poweroff\n"
	mu.Unlock()
	if err := h.SetBootOverride(BootOverride{Target: BootPxe, Mode: OverrideOnce}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "NetworkBootPowerOff")
	deadline := time.Now().Add(10 * time.Second)
	for h.Status().Power != PoweredOff {
		if time.Now().After(deadline) {
			t.Fatal("the boot script's poweroff left the host on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.SetNetworkBoot("storage", srv.URL); err == nil {
		t.Fatal("network boot on a network the lab lacks was accepted")
	}
}

// pxeBootOnce resets h with a one-time PXE override and answers the
// PXE failure if any, else the OS it ran; either way it reads on to this
// boot's OSRunning (a failed PXE goes on to the disk's recovery
// partition) so the next boot starts clean.
func pxeBootOnce(t *testing.T, h *Host, events <-chan Event) Event {
	t.Helper()
	if err := h.SetBootOverride(BootOverride{Target: BootPxe, Mode: OverrideOnce}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	var failed *Event
	for {
		select {
		case e := <-events:
			if e.Reason == "BootDeviceFailed" && e.Data["target"] == string(BootPxe) {
				failed = &e
			}
			if e.Reason == "OSRunning" {
				if failed != nil {
					return *failed
				}
				return e
			}
		case <-timeout:
			t.Fatal("the PXE boot neither ran an OS nor failed")
		}
	}
}

// A legacy-mode override finds no loader; the same device in UEFI mode
// boots.
func TestALegacyBootOverrideFindsNoLoader(t *testing.T) {
	l := upLab(t, "single-node", 0, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3")
	expect(t, events, "node-0", "OSRunning")
	if err := h.SetBootOverride(BootOverride{Target: BootHdd, Mode: OverrideOnce, BootMode: BootModeLegacy}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, events, "node-0", "NoBootDevice"); !strings.Contains(e.Message, "legacy boot") {
		t.Fatalf("legacy boot: %s", e.Message)
	}
	if err := h.SetBootOverride(BootOverride{Target: BootHdd, Mode: OverrideOnce, BootMode: BootModeUEFI}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "OSRunning")
	if err := h.SetBootOverride(BootOverride{Target: BootHdd, Mode: OverrideOnce, BootMode: "CSM"}); err == nil {
		t.Fatal("boot mode CSM was accepted")
	}
}
