package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/timescale"
)

func upLab(t *testing.T, fixture string, scale timescale.Scale, stateDir string) *Lab {
	t.Helper()
	def, err := Load(filepath.Join("../../fixtures/labs", fixture+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Up(context.Background(), def, Options{StateDir: stateDir, Scale: scale})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Down() })
	return l
}

// expect reads events until one of host with reason arrives.
func expect(t *testing.T, events <-chan Event, host, reason string) Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	var seen []string
	for {
		select {
		case e := <-events:
			if e.Host == host && e.Reason == reason {
				return e
			}
			seen = append(seen, e.Host+"/"+e.Reason)
		case <-timeout:
			t.Fatalf("no %s event for %s; saw %v", reason, host, seen)
		}
	}
}

func TestShippedLabsLoad(t *testing.T) {
	want := map[string]int{"single-node": 1, "three-node": 3, "cold-spare": 6, "reset": 4}
	for name, hosts := range want {
		def, err := Load(filepath.Join("../../fixtures/labs", name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(def.Spec.Hosts) != hosts {
			t.Errorf("%s: %d hosts, want %d", name, len(def.Spec.Hosts), hosts)
		}
	}
}

func TestPowerCycleThroughTheBackendIsObservedAsEvents(t *testing.T) {
	l := upLab(t, "single-node", 0, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")

	// Power changed behind the lab's back, as `virsh start` would.
	if err := l.backend.Start("node-0"); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "DomainStarted")
	// An empty disk boots the recovery partition.
	e := expect(t, events, "node-0", "OSRunning")
	if e.Data["source"] != string(FromRecovery) {
		t.Fatalf("empty disk booted %v, want the recovery partition", e.Data)
	}
	if err := l.backend.Stop("node-0"); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "DomainStopped")
	if s := h.Status(); s.Power != PoweredOff || s.Phase != PhaseOff || s.OS != nil {
		t.Fatalf("after the domain stopped: %+v", s)
	}
	md, err := l.backend.Metadata("node-0")
	if err != nil || !strings.Contains(md, `phase="Off"`) {
		t.Fatalf("domain metadata does not follow the host: %q %v", md, err)
	}
}

// provision is what a provisioner does through BMC and deploy ramdisk:
// boot the deploy image from virtual media once, write an OS image, make
// its slot active, reboot from disk.
func provision(t *testing.T, l *Lab, h *Host, events <-chan Event, imageName string, slot disk.SlotName) {
	t.Helper()
	b, err := l.Definition().Catalog.Get(imageName)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.InsertMedia(l.ImageServer().ImageURL("deploy-ramdisk-2026.10")); err != nil {
		t.Fatal(err)
	}
	if err := h.SetBootOverride(BootOverride{Target: BootCd, Mode: OverrideOnce}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, events, h.Name(), "OSRunning"); e.Data["source"] != string(FromVirtualMedia) {
		t.Fatalf("boot override Once Cd booted %v", e.Data)
	}
	if err := h.WriteImage(context.Background(), slot, l.ImageServer().ImageURL(b.Name), b.SHA256); err != nil {
		t.Fatal(err)
	}
	if err := h.ActivateSlot(slot, 3); err != nil {
		t.Fatal(err)
	}
	h.EjectMedia()
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
}

func TestProvisionUpdateAndFallback(t *testing.T) {
	l := upLab(t, "single-node", 0, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")

	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3", disk.SlotA)
	e := expect(t, events, "node-0", "OSRunning")
	if e.Data["source"] != string(FromDiskSlot) || e.Data["slot"] != "A" || e.Data["image"] != "ubuntu-24.04-k8s-v1.35.3" {
		t.Fatalf("after provisioning (Once override used up) booted %v, want slot A from disk", e.Data)
	}
	if s := h.Status(); s.Override.Mode != OverrideDisabled {
		t.Fatalf("a Once override is still set after its boot: %+v", s.Override)
	}
	if err := h.CommitSlot(); err != nil {
		t.Fatal(err)
	}

	// An update that never passes its health check: 2 tries, then slot A.
	bad, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	if err := h.WriteImage(context.Background(), disk.SlotB, l.ImageServer().ImageURL(bad.Name), bad.SHA256); err != nil {
		t.Fatal(err)
	}
	if err := h.ActivateSlot(disk.SlotB, 2); err != nil {
		t.Fatal(err)
	}
	for try := 1; try <= 2; try++ {
		h.Reset()
		if e := expect(t, events, "node-0", "OSRunning"); e.Data["slot"] != "B" {
			t.Fatalf("try %d booted %v, want slot B on trial", try, e.Data)
		}
	}
	h.Reset()
	expect(t, events, "node-0", "Fallback")
	e = expect(t, events, "node-0", "OSRunning")
	if e.Data["slot"] != "A" || e.Data["image"] != "ubuntu-24.04-k8s-v1.35.3" {
		t.Fatalf("after the tries ran out booted %v, want the committed slot A", e.Data)
	}
	if s := h.Status(); s.OS.Image.KubernetesVersion != "v1.35.3" || s.OS.Links[0].Up != true {
		t.Fatalf("running OS %+v", s.OS)
	}
}

func TestWriteRefusesABadChecksumAndPowerLossCorruptsTheSlot(t *testing.T) {
	l := upLab(t, "single-node", 0.05, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	h.PowerOn()
	expect(t, events, "node-0", "OSRunning") // recovery

	b, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	err := h.WriteImage(context.Background(), disk.SlotB, l.ImageServer().ImageURL(b.Name), strings.Repeat("0", 64))
	if !errors.Is(err, image.ErrChecksum) {
		t.Fatalf("bad checksum: %v", err)
	}
	if s := h.Status().Disk.Slots[disk.SlotB]; s.State != disk.Empty {
		t.Fatalf("a refused image changed the slot: %+v", s)
	}

	done := make(chan error, 1)
	go func() {
		done <- h.WriteImage(context.Background(), disk.SlotB, l.ImageServer().ImageURL(b.Name), b.SHA256)
	}()
	expect(t, events, "node-0", "WriteStarted")
	h.PowerOff()
	if err := <-done; !errors.Is(err, ErrPowerLost) {
		t.Fatalf("write cut by power loss returned %v", err)
	}
	if s := h.Status().Disk.Slots[disk.SlotB]; s.State != disk.Corrupt {
		t.Fatalf("slot after power loss mid-write: %+v, want corrupt", s)
	}
	if err := h.ActivateSlot(disk.SlotB, 3); !errors.Is(err, disk.ErrNotWritten) {
		t.Fatalf("activating a corrupt slot: %v", err)
	}
}

func TestNICLinkFollowsTheBootedDriverAndFlashes(t *testing.T) {
	l := upLab(t, "single-node", 0, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	h.PowerOn()
	expect(t, events, "node-0", "OSRunning")

	// An NVM whose API major is newer than the recovery OS's driver.
	if err := h.FlashNVM(context.Background(), "eno1", "x710-nvm-10.0-next"); err != nil {
		t.Fatal(err)
	}
	if s := h.Status(); s.Ports[0].Active.Name != "x710-nvm-9.20" {
		t.Fatalf("a flashed NVM ran before the power cycle: %+v", s.Ports[0])
	}
	h.Reset()
	expect(t, events, "node-0", "OSRunning")
	e := expect(t, events, "node-0", "nvm-major-newer")
	if e.Data["up"] != "false" || !strings.Contains(e.Message, "v2.0 is newer than expected v1.15") {
		t.Fatalf("NIC event %+v", e)
	}
	if l := h.Status().OS.Links[0]; l.Up || l.Firmware != "10.0" || l.API.String() != "2.0" {
		t.Fatalf("port link %+v; want down, showing the NVM 10.0 (API 2.0) the driver found", l)
	}
}

func TestStateSurvivesALabRestart(t *testing.T) {
	dir := t.TempDir()
	l := upLab(t, "single-node", 0, dir)
	events, cancel := l.Subscribe()
	h, _ := l.Host("node-0")
	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3", disk.SlotA)
	expect(t, events, "node-0", "OSRunning")
	h.CommitSlot()
	cancel()
	l.Down()

	l2 := upLab(t, "single-node", 0, dir)
	events2, cancel2 := l2.Subscribe()
	defer cancel2()
	h2, _ := l2.Host("node-0")
	if s := h2.Status().Disk.Slots[disk.SlotA]; s.State != disk.Written || !s.Good || s.Image != "ubuntu-24.04-k8s-v1.35.3" {
		t.Fatalf("slot A after restart: %+v", s)
	}
	h2.PowerOn()
	if e := expect(t, events2, "node-0", "OSRunning"); e.Data["slot"] != "A" {
		t.Fatalf("after restart booted %v", e.Data)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab.json")); err != nil {
		t.Fatal(err)
	}
}
