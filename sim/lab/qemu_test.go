package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/statefile"
	"github.com/upgradelab/upgradelab/sim/disk"
)

func waitStatus(t *testing.T, h *Host, what string, ok func(HostStatus) bool) HostStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := h.Status()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			_, console, _ := h.Guest()
			b, _ := os.ReadFile(console)
			t.Fatalf("host %s: no %s within 2 min (phase %s, power %s, %s); console tail:\n%s", h.Name(), what, st.Phase, st.Power, st.LastError, tail(string(b), 12))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(strings.ReplaceAll(s, "\r", "")), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// A qemu-backend host is a real VM: its power is the domain's, its boot
// is the VM's own (a factory disk boots recovery through GRUB), a reset is
// a real power cycle with a new boot ID, and a graceful shutdown is the
// guest powering the VM off.
func TestQEMUHostsAreRealVMs(t *testing.T) {
	def, err := Load("../../fixtures/labs/vm-two.yaml")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	l, err := Up(context.Background(), def, Options{StateDir: state, Scale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Down()
	events, cancel := l.Subscribe()
	defer cancel()
	h, _ := l.Host("vm-0")
	url, console, real := h.Guest()
	if !real || url == "" {
		t.Fatal("a qemu host has no guest")
	}
	var info Info
	if err := statefile.Read(filepath.Join(state, "lab.json"), &info); err != nil || info.Hosts[0].Guest != url || info.Hosts[0].Console != console {
		t.Fatalf("lab.json: %+v %v", info.Hosts, err)
	}

	if err := h.PowerOn(); err != nil {
		t.Fatal(err)
	}
	first := waitStatus(t, h, "recovery boot", func(s HostStatus) bool { return s.Phase == PhaseRunning && s.OS != nil })
	if first.OS.Source != FromRecovery || first.OS.Image.Name != def.Spec.RecoveryImage || first.OS.BootID == "" {
		t.Fatalf("a factory disk booted %+v", first.OS)
	}
	if im := first.Disk.Images(); im.Root(disk.SlotA).State != disk.Empty || im.Root(disk.SlotB).State != disk.Empty {
		t.Errorf("a factory disk's slots: %+v", im.Roots)
	}
	if b, _ := os.ReadFile(console); !strings.Contains(string(b), "upgradelab-grub: no bootable slot, booting recovery") {
		t.Errorf("the console shows no recovery choice by GRUB:\n%s", tail(string(b), 10))
	}

	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	second := waitStatus(t, h, "boot after the reset", func(s HostStatus) bool {
		return s.Phase == PhaseRunning && s.OS != nil && s.OS.BootID != first.OS.BootID
	})
	if second.BootCount != 2 {
		t.Errorf("boot count %d after a reset, want 2", second.BootCount)
	}

	// A graceful reboot (what the agent does for a reset): the guest
	// powers off, and the host powers on again.
	if err := h.RequestRecoveryBoot(); err != nil {
		t.Fatal(err)
	}
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatalf("reboot: %v", err)
	}
	third := waitStatus(t, h, "boot after the reboot", func(s HostStatus) bool {
		return s.Phase == PhaseRunning && s.OS != nil && s.OS.BootID != second.OS.BootID
	})
	if third.OS.Source != FromRecovery || third.Disk.RecoveryOnce {
		t.Errorf("after a reboot into recovery: %s, recovery once still %v", third.OS.Source, third.Disk.RecoveryOnce)
	}
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, err := l.backend.State("vm-0"); err != nil || st != PoweredOff {
		t.Fatalf("after a graceful shutdown the domain is %s (%v)", st, err)
	}
	if b, _ := os.ReadFile(console); !strings.Contains(string(b), "upgradelab-guest: powering off") {
		t.Error("the guest did not shut itself down")
	}

	if err := h.SetBootOverride(BootOverride{Target: BootPxe, Mode: OverrideOnce}); !errors.Is(err, ErrNotOnQEMU) {
		t.Errorf("a network boot on a VM: %v", err)
	}

	if boots := countEvents(events, "vm-0", "OSRunning", string(FromRecovery)); boots != 3 {
		t.Errorf("%d OSRunning events from recovery, want 3", boots)
	}
}

// countEvents counts the events of host with reason (and, when source is
// set, that boot source) until none has come for 200 ms.
func countEvents(events <-chan Event, host, reason, source string) int {
	n := 0
	for {
		select {
		case e := <-events:
			if e.Host == host && e.Reason == reason && (source == "" || e.Data["source"] == source) {
				n++
			}
		case <-time.After(200 * time.Millisecond):
			return n
		}
	}
}
