package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
)

func upLab(t *testing.T, fixture string, scale timescale.Scale, stateDir string) *Lab {
	return upLabOS(t, fixture, vocab.HostOSAB, scale, stateDir)
}

// upLabOS is upLab with every host's OS kind set by mode (WithHostOS),
// then each edit applied to the definition.
func upLabOS(t *testing.T, fixture, mode string, scale timescale.Scale, stateDir string, edits ...func(*Definition)) *Lab {
	t.Helper()
	def, err := Load(filepath.Join("../../fixtures/labs", fixture+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if def, err = def.WithHostOS(mode); err != nil {
		t.Fatal(err)
	}
	for _, edit := range edits {
		edit(def)
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

// A power-on the host undoes at once (a boot script that powers it off)
// still returns: the wait saw the host come on, even though it is off
// again by the time the wait looks.
func TestAPowerOnUndoneAtOnceStillReturns(t *testing.T) {
	dir := t.TempDir()
	uri, err := TestDriverURI(dir)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := NewLibvirtBackend(uri)
	if err != nil {
		t.Fatal(err)
	}
	b := &flickerBackend{Backend: inner}
	def, err := Load("../../fixtures/labs/single-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Up(context.Background(), def, Options{StateDir: dir, Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Down() })
	h, _ := l.Host("node-0")
	b.host = h
	if err := h.PowerOn(); err != nil {
		t.Fatalf("a power-on undone at once: %v", err)
	}
	if s := h.Status(); s.Power != PoweredOff {
		t.Fatalf("power after the flicker: %s, want %s", s.Power, PoweredOff)
	}
}

// flickerBackend's Start powers the machine on and, once the host has
// seen it on, off again before it returns.
type flickerBackend struct {
	Backend
	host *Host
}

func (b *flickerBackend) Start(name string) error {
	if err := b.Backend.Start(name); err != nil {
		return err
	}
	for b.host.Status().Power != PoweredOn {
		time.Sleep(time.Millisecond)
	}
	if err := b.Backend.Stop(name); err != nil {
		return err
	}
	for b.host.Status().Power != PoweredOff {
		time.Sleep(time.Millisecond)
	}
	return nil
}

// provision is what a provisioner does through BMC and deploy ramdisk:
// boot the deploy image from virtual media once, stage an OS image,
// activate it, reboot from disk.
func provision(t *testing.T, l *Lab, h *Host, events <-chan Event, imageName string) {
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
	root, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(b.Name), b.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Activate(root, 3); err != nil {
		t.Fatal(err)
	}
	h.EjectMedia()
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
}

// firstRoot and secondRoot are where each kind puts its first image (a
// fresh install) and its second (the first update).
var firstRoot = map[disk.Kind]string{disk.AB: "A", disk.OSTree: "1"}
var secondRoot = map[disk.Kind]string{disk.AB: "B", disk.OSTree: "2"}

func TestProvisionUpdateAndFallback(t *testing.T) {
	for _, kind := range disk.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			l := upLabOS(t, "single-node", string(kind), 0, t.TempDir())
			events, cancel := l.Subscribe()
			defer cancel()
			h, _ := l.Host("node-0")

			provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3")
			e := expect(t, events, "node-0", "OSRunning")
			if e.Data["source"] != string(FromDisk) || e.Data["root"] != firstRoot[kind] || e.Data["image"] != "ubuntu-24.04-k8s-v1.35.3" {
				t.Fatalf("after provisioning (Once override used up) booted %v, want root %s from disk", e.Data, firstRoot[kind])
			}
			if s := h.Status(); s.Override.Mode != OverrideDisabled {
				t.Fatalf("a Once override is still set after its boot: %+v", s.Override)
			}
			if err := h.Commit(); err != nil {
				t.Fatal(err)
			}

			// An update that never passes its health check: 2 tries, then
			// the committed image.
			bad, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
			root, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(bad.Name), bad.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if string(root) != secondRoot[kind] {
				t.Fatalf("the update went to root %s, want %s", root, secondRoot[kind])
			}
			if err := h.Activate(root, 2); err != nil {
				t.Fatal(err)
			}
			// Graceful reboots (an OSTree host finalises the staged
			// deployment as it shuts down).
			for try := 1; try <= 2; try++ {
				h.Reboot(context.Background())
				if e := expect(t, events, "node-0", "OSRunning"); e.Data["root"] != string(root) {
					t.Fatalf("try %d booted %v, want root %s on trial", try, e.Data, root)
				}
			}
			h.Reboot(context.Background())
			expect(t, events, "node-0", "Fallback")
			e = expect(t, events, "node-0", "OSRunning")
			if e.Data["root"] != firstRoot[kind] || e.Data["image"] != "ubuntu-24.04-k8s-v1.35.3" {
				t.Fatalf("after the tries ran out booted %v, want the committed root %s", e.Data, firstRoot[kind])
			}
			if s := h.Status(); s.OS.Image.KubernetesVersion != "v1.35.3" || s.OS.Links[0].Up != true {
				t.Fatalf("running OS %+v", s.OS)
			}
		})
	}
}

// inRecovery is the single-node lab with its host of kind powered on into
// its recovery OS (the disk holds nothing yet), and the lab's events.
func inRecovery(t *testing.T, kind disk.Kind, scale timescale.Scale, edits ...func(*Definition)) (*Lab, *Host, <-chan Event) {
	t.Helper()
	l := upLabOS(t, "single-node", string(kind), scale, t.TempDir(), edits...)
	events, cancel := l.Subscribe()
	t.Cleanup(cancel)
	h, _ := l.Host("node-0")
	h.PowerOn()
	expect(t, events, "node-0", "OSRunning")
	return l, h, events
}

func TestWriteRefusesABadChecksumAndPowerLossCutsTheWrite(t *testing.T) {
	for _, kind := range disk.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			l, h, events := inRecovery(t, kind, 0.05)

			b, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
			_, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(b.Name), strings.Repeat("0", 64))
			if !errors.Is(err, image.ErrChecksum) {
				t.Fatalf("bad checksum: %v", err)
			}
			if im := h.Status().Disk.Images(); im.Staged != nil {
				t.Fatalf("a refused image was staged: %+v", im.Staged)
			}

			done := make(chan error, 1)
			go func() {
				_, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(b.Name), b.SHA256)
				done <- err
			}()
			started := expect(t, events, "node-0", "WriteStarted")
			h.PowerOff()
			if err := <-done; !errors.Is(err, ErrPowerLost) {
				t.Fatalf("write cut by power loss returned %v", err)
			}
			cut := expect(t, events, "node-0", "WriteInterrupted")
			root := disk.RootID(started.Data["root"])
			im := h.Status().Disk.Images()
			switch kind {
			case disk.AB:
				if r := im.Root(root); r == nil || r.State != disk.Corrupt {
					t.Fatalf("slot %s after power loss mid-write: %+v, want corrupt", root, r)
				}
				if err := h.Activate(root, 3); !errors.Is(err, disk.ErrNotWritten) {
					t.Fatalf("activating a corrupt slot: %v", err)
				}
			case disk.OSTree:
				if im.Root(root) != nil || im.Staged != nil {
					t.Fatalf("deployment %s after power loss mid-pull: %+v, want gone", root, im)
				}
				if err := h.Activate(root, 3); !errors.Is(err, disk.ErrNoSuchRoot) {
					t.Fatalf("activating a dropped deployment: %v", err)
				}
			}
			if !strings.Contains(cut.Message, string(root)) {
				t.Fatalf("WriteInterrupted %q does not name root %s", cut.Message, root)
			}
		})
	}
}

// A second image write while one is under way is refused (WriteBusy),
// and the first goes on to finish, on either kind of disk.
func TestASecondWriteWhileOneIsUnderWayIsRefused(t *testing.T) {
	for _, kind := range disk.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			l, h, events := inRecovery(t, kind, 0.05)
			b, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
			url := l.ImageServer().ImageURL(b.Name)
			first := make(chan error, 1)
			go func() {
				_, err := h.WriteImage(context.Background(), url, b.SHA256)
				first <- err
			}()
			expect(t, events, "node-0", "WriteStarted")
			if _, err := h.WriteImage(context.Background(), url, b.SHA256); !errors.Is(err, disk.ErrWriteUnderWay) {
				t.Fatalf("a second write while one is under way: %v, want refused", err)
			}
			expect(t, events, "node-0", vocab.LabWriteBusy)
			if err := <-first; err != nil {
				t.Fatalf("the first write: %v", err)
			}
			if im := h.Status().Disk.Images(); im.Staged == nil || im.Staged.State != disk.Written {
				t.Fatalf("after the first write: %+v", im.Staged)
			}
		})
	}
}

// An image the host's disk has no room for is refused before a byte is
// written, on either kind: a 1 GiB root cannot take a 2 GiB image.
func TestWriteRefusesAnImageTheDiskHasNoRoomFor(t *testing.T) {
	for _, kind := range disk.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			l, h, events := inRecovery(t, kind, 0, func(d *Definition) { d.Spec.Hosts[0].OS.RootGiB = 1 })
			b, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
			if _, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(b.Name), b.SHA256); !errors.Is(err, disk.ErrNoSpace) {
				t.Fatalf("a %d MiB image on a 1 GiB root: %v, want no space", b.SizeMiB, err)
			}
			if e := expect(t, events, "node-0", "WriteRefused"); !strings.Contains(e.Message, "no space left") {
				t.Fatalf("refusal event %+v", e)
			}
			if im := h.Status().Disk.Images(); im.Staged != nil {
				t.Fatalf("a refused image was staged: %+v", im.Staged)
			}
		})
	}
}

// An OSTree host's staged deployment is finalised as the running OS shuts
// down gracefully; a power cut then, or a hard reset that skips the
// shutdown, loses it and the old deployment boots, its /etc as the admin
// left it. One that finalises carries the admin's /etc edits over.
func TestOSTreeFinalisationAndEtcMerge(t *testing.T) {
	// Quick boots and writes; a finalisation long enough to cut.
	quick := Timing{PostSeconds: 1, BootSeconds: 1, ShutdownSeconds: 1, DiskWriteMBps: 1e5, FinaliseSeconds: 10}
	l := upLabOS(t, "single-node", vocab.HostOSOSTree, 0.05, t.TempDir(), func(d *Definition) { d.Spec.Timing = quick })
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3")
	expect(t, events, "node-0", "OSRunning")
	if err := h.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteEtc("/etc/marker", "set by the admin"); err != nil {
		t.Fatal(err)
	}
	next, _ := l.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	stage := func() disk.RootID {
		root, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(next.Name), next.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Activate(root, 1); err != nil {
			t.Fatal(err)
		}
		return root
	}

	// A hard reset: nothing finalised it.
	stage()
	h.Reset()
	if e := expect(t, events, "node-0", "StagedDropped"); !strings.Contains(e.Message, "without a graceful shutdown") {
		t.Fatalf("a hard reset after the activation: %+v", e)
	}
	if e := expect(t, events, "node-0", "OSRunning"); e.Data["image"] != "ubuntu-24.04-k8s-v1.35.3" {
		t.Fatalf("after a hard reset booted %v, want the old deployment", e.Data)
	}

	// Cut while finalising: the old deployment boots again.
	stage()
	go h.Reboot(context.Background())
	expect(t, events, "node-0", "Finalising")
	h.PowerOff()
	if e := expect(t, events, "node-0", "WriteInterrupted"); !strings.Contains(e.Message, "finalisation") {
		t.Fatalf("power cut while finalising: %+v", e)
	}
	h.PowerOn()
	if e := expect(t, events, "node-0", "OSRunning"); e.Data["image"] != "ubuntu-24.04-k8s-v1.35.3" {
		t.Fatalf("after a cut finalisation booted %v, want the old deployment", e.Data)
	}
	if im := h.Status().Disk.Images(); im.Staged != nil || len(im.Roots) != 1 {
		t.Fatalf("after a cut finalisation the disk holds %+v, want the one old deployment", im)
	}

	// Finalised: the new deployment boots with the admin's marker.
	root := stage()
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "Finalised")
	if e := expect(t, events, "node-0", "OSRunning"); e.Data["root"] != string(root) || e.Data["image"] != next.Name {
		t.Fatalf("booted %v, want deployment %s", e.Data, root)
	}
	etc := h.Etc()
	if etc["/etc/marker"] != "set by the admin" || etc["/etc/upgradelab/release"] != next.Name+"\n" {
		t.Fatalf("/etc after the update: %v; want the admin's marker and the new image's release", etc)
	}
}

func TestNICLinkFollowsTheBootedDriverAndFlashes(t *testing.T) {
	l := upLab(t, "single-node", 0.005, t.TempDir())
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
	if l := h.Status().OS.Links[0]; l.Up || l.Firmware != "10.0" || l.API.String() != "2.0" || l.Recovery {
		t.Fatalf("port link %+v; want down, showing the NVM 10.0 (API 2.0) the driver found, not in recovery", l)
	}
	bootID := h.Status().OS.BootID

	// Power lost while the NVM is written: the NIC runs its recovery
	// firmware, and the OS that boots next says so in the link's field
	// (what the agent reports), under a new boot ID.
	flashed := make(chan error, 1)
	go func() { flashed <- h.FlashNVM(context.Background(), "eno1", "x710-nvm-9.50") }()
	expect(t, events, "node-0", "FlashStarted")
	h.PowerOff()
	if err := <-flashed; !errors.Is(err, ErrPowerLost) {
		t.Fatalf("flash cut by a power loss: %v; want ErrPowerLost", err)
	}
	h.PowerOn()
	expect(t, events, "node-0", "OSRunning")
	running := h.Status().OS
	if l := running.Links[0]; !l.Recovery || l.Up {
		t.Fatalf("port link after a cut flash %+v; want in recovery and down", l)
	}
	if running.BootID == "" || running.BootID == bootID {
		t.Fatalf("boot ID %q after a power cycle; the one before was %q", running.BootID, bootID)
	}
}

func TestStateSurvivesALabRestart(t *testing.T) {
	dir := t.TempDir()
	l := upLab(t, "single-node", 0, dir)
	events, cancel := l.Subscribe()
	h, _ := l.Host("node-0")
	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3")
	expect(t, events, "node-0", "OSRunning")
	h.Commit()
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
	if e := expect(t, events2, "node-0", "OSRunning"); e.Data["root"] != "A" {
		t.Fatalf("after restart booted %v", e.Data)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab.json")); err != nil {
		t.Fatal(err)
	}
}

// A hung OS keeps its power and ignores a graceful shutdown; a power
// cycle brings it back. A failed power supply refuses every power-on, and
// a lab brought up again on the same state still has it.
func TestAHungHostNeedsAPowerCycleAndADeadSupplyNeverPowersOn(t *testing.T) {
	dir := t.TempDir()
	l := upLab(t, "single-node", 0, dir)
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	if err := h.Hang(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("hang of a host that is off: %v, want ErrNotRunning", err)
	}
	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3")
	expect(t, events, "node-0", "OSRunning")

	if err := h.Hang(); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", EventOSHung)
	if err := h.Shutdown(context.Background()); !errors.Is(err, ErrHung) {
		t.Fatalf("graceful shutdown of a hung OS: %v, want ErrHung", err)
	}
	if s := h.Status(); s.Power != PoweredOn || s.Phase != PhaseHung {
		t.Fatalf("hung host after a graceful shutdown: power %s phase %s, want on and hung", s.Power, s.Phase)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "OSRunning")

	if err := h.FailPowerSupply(); err != nil {
		t.Fatal(err)
	}
	expect(t, events, "node-0", "PowerSupplyFailed")
	if err := h.PowerOn(); !errors.Is(err, ErrPowerSupplyFailed) {
		t.Fatalf("power on with a failed supply: %v, want ErrPowerSupplyFailed", err)
	}
	if s := h.Status(); s.Power != PoweredOff || !s.PowerSupplyFailed {
		t.Fatalf("after the supply failed: power %s, failed %v", s.Power, s.PowerSupplyFailed)
	}
	// A power on that checked the supply before it failed (a reboot's)
	// starts the domain; the host stays off all the same.
	if err := l.backend.Start("node-0"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st, _ := l.backend.State("node-0"); st != PoweredOff && time.Now().Before(deadline); st, _ = l.backend.State("node-0") {
		time.Sleep(10 * time.Millisecond)
	}
	if st, _ := l.backend.State("node-0"); st != PoweredOff || h.Status().Power != PoweredOff {
		t.Fatalf("a domain started past a failed supply: domain %s, host %s; want both off", st, h.Status().Power)
	}
	cancel()
	l.Down()
	h2, _ := upLab(t, "single-node", 0, dir).Host("node-0")
	if err := h2.PowerOn(); !errors.Is(err, ErrPowerSupplyFailed) {
		t.Fatalf("power on after a lab restart: %v, want the supply still failed", err)
	}
}

// A one-time override set while the host is in POST is read at the end of
// that POST, as a real BMC's boot flags are: that boot uses it up, and a
// restart after it boots the default order. A provisioner that sets the
// override on a running host and then restarts it can so lose its deploy
// boot to a POST already under way; the provider powers off first.
func TestAnOverrideSetDuringPOSTIsUsedUpByThatBoot(t *testing.T) {
	l := upLab(t, "single-node", 0.01, t.TempDir())
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	if err := h.PowerOn(); err != nil {
		t.Fatal(err)
	}
	if ph := h.Status().Phase; ph != PhasePOST {
		t.Fatalf("just powered on: phase %s, want %s", ph, PhasePOST)
	}
	if err := h.InsertMedia(l.ImageServer().ImageURL("deploy-ramdisk-2026.10")); err != nil {
		t.Fatal(err)
	}
	if err := h.SetBootOverride(BootOverride{Target: BootCd, Mode: OverrideOnce}); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, events, "node-0", "OSRunning"); e.Data["source"] != string(FromVirtualMedia) {
		t.Fatalf("the boot in POST when the override came booted %v, want the virtual media", e.Data)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, events, "node-0", "OSRunning"); e.Data["source"] == string(FromVirtualMedia) {
		t.Fatalf("the restart booted the virtual media again (%v): the Once override was not used up", e.Data)
	}
}

// A graceful shutdown is a phase of its own, with the host still on: its
// agent answers that it is shutting down. A second request meanwhile
// starts nothing and returns when the power goes, and a hard reset in
// the middle ends the shutdown for good: the next boot is not powered
// off by the shutdown it cut.
func TestAShutdownIsAPhaseAResetEnds(t *testing.T) {
	slow := Timing{PostSeconds: 1, BootSeconds: 1, ShutdownSeconds: 1, DiskWriteMBps: 1e5, FinaliseSeconds: 1}
	l := upLabOS(t, "single-node", vocab.HostOSAB, 0.05, t.TempDir(), func(d *Definition) { d.Spec.Timing = slow })
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("node-0")
	provision(t, l, h, events, "ubuntu-24.04-k8s-v1.35.3")
	expect(t, events, "node-0", "OSRunning")
	h.SetShutdownTime(40 * time.Second) // 2 s of wall time
	go h.Reboot(context.Background())
	expect(t, events, "node-0", EventOSShuttingDown)
	if st := h.Status(); st.Power != PoweredOn || st.Phase != PhaseShuttingDown {
		t.Fatalf("during the shutdown the host is %s/%s, want On/ShuttingDown", st.Power, st.Phase)
	}
	second := make(chan error, 1)
	go func() { second <- h.Shutdown(context.Background()) }()
	select {
	case err := <-second:
		t.Fatalf("a second shutdown request returned (%v) while the first still ran", err)
	case <-time.After(200 * time.Millisecond):
	}
	if p := h.Status().Phase; p != PhaseShuttingDown {
		t.Fatalf("after a second shutdown request the host is %s, want still ShuttingDown", p)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("the second shutdown request, once the power went: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second shutdown request did not return when the power went")
	}
	expect(t, events, "node-0", "OSRunning")
	time.Sleep(3 * time.Second) // past the cut shutdown's end
	if st := h.Status(); st.Power != PoweredOn || st.Phase != PhaseRunning {
		t.Fatalf("after the reset cut the shutdown short the host is %s/%s, want On/Running", st.Power, st.Phase)
	}
}
