package lab

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/ipxe"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// boot is the firmware and bootloader of one power cycle: POST, then each
// boot device in turn (the override first), then the OS comes up.
func (h *Host) boot(ctx context.Context) {
	timing := h.lab.def.Spec.Timing
	if h.lab.scale.Sleep(ctx, timescale.Seconds(timing.PostSeconds)) != nil {
		return
	}
	h.mu.Lock()
	h.phase = PhaseBooting
	applied := h.applyPendingLocked()
	plan := h.bootPlanLocked()
	h.saveLocked()
	h.mu.Unlock()
	if applied != "" {
		h.emit(EventBoot, "FirmwareSettingsApplied", applied, nil)
	}

	var failures []string
	for _, target := range plan.order {
		if target == BootBiosSetup {
			h.mu.Lock()
			if ctx.Err() == nil {
				h.phase = PhaseFirmwareSetup
				h.saveLocked()
			}
			h.mu.Unlock()
			h.emit(EventBoot, "FirmwareSetup", "the host waits in its firmware setup screen", nil)
			return
		}
		running, err := h.loadOS(ctx, target, plan)
		var power errNetbootPower
		if errors.As(err, &power) {
			h.scriptPower(power.end)
			return
		}
		if err == nil && plan.mode == BootModeLegacy {
			// The lab's images carry only an EFI loader (as every image
			// Metal3 deploys does): in legacy mode the firmware finds no
			// boot sector, and a UEFI-only server refuses the mode
			// outright. Either way the device does not boot.
			running, err = nil, ErrLegacyBoot
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", target, err))
			h.emit(EventBoot, "BootDeviceFailed", fmt.Sprintf("%s: %v", target, err), map[string]string{"target": string(target)})
			continue
		}
		if h.lab.scale.Sleep(ctx, timescale.Seconds(timing.BootSeconds)) != nil {
			return
		}
		h.osUp(ctx, target, running)
		return
	}
	h.mu.Lock()
	if ctx.Err() == nil {
		h.phase = PhaseNoBootDevice
		h.lastError = "no bootable device: " + strings.Join(failures, "; ")
		h.saveLocked()
	}
	h.mu.Unlock()
	h.emit(EventBoot, "NoBootDevice", "no bootable device: "+strings.Join(failures, "; "), nil)
}

// scriptPower carries out a boot script's reboot or poweroff, from
// outside the power cycle it ends.
func (h *Host) scriptPower(end ipxe.End) {
	reason, act := "NetworkBootPowerOff", h.PowerOff
	if end == ipxe.Reboot {
		reason, act = "NetworkBootReboot", h.Reset
	}
	h.emit(EventBoot, reason, "the boot script ran "+string(end), nil)
	go func() {
		err := act()
		if err != nil {
			h.emit(EventBoot, "NetworkBootPowerFailed", err.Error(), nil)
		}
	}()
}

// bootPlan is one boot's devices in order, its firmware mode and the
// UEFI HTTP boot URI an override gave.
type bootPlan struct {
	order   []BootTarget
	mode    BootMode
	httpURI string
	pxeOff  bool
}

// bootPlanLocked applies the override to the firmware's boot order: a
// Once override is used up by this boot, as Redfish BMCs do. The boot
// mode is the override's, else the BootMode firmware setting's.
func (h *Host) bootPlanLocked() bootPlan {
	plan := bootPlan{order: slices.Clone(h.firmware.BootOrder), mode: BootModeUEFI, pxeOff: h.firmware.Attributes["PxeBoot"] == "Disabled"}
	if h.firmware.Attributes["BootMode"] == "LegacyBios" {
		plan.mode = BootModeLegacy
	}
	if h.override.Mode == OverrideDisabled || h.override.Target == "" {
		return plan
	}
	first := h.override.Target
	plan.mode = cmp.Or(h.override.BootMode, plan.mode)
	plan.httpURI = h.override.HTTPBootURI
	if h.override.Mode == OverrideOnce {
		h.override = BootOverride{Mode: OverrideDisabled}
	}
	rest := []BootTarget{first}
	for _, t := range plan.order {
		if t != first {
			rest = append(rest, t)
		}
	}
	plan.order = rest
	return plan
}

// loadOS tries one boot device.
func (h *Host) loadOS(ctx context.Context, target BootTarget, plan bootPlan) (*RunningOS, error) {
	switch target {
	case BootHdd:
		h.mu.Lock()
		dec := h.disk.SelectBoot()
		h.saveLocked()
		h.mu.Unlock()
		if dec.Source == disk.FromRecovery {
			b, err := h.lab.def.Catalog.Get(dec.Image)
			if err != nil {
				return nil, err
			}
			m, _ := imagev1.ReadManifest(image.Payload(b))
			h.emit(EventBoot, "RecoveryBoot", dec.Reason, map[string]string{"image": dec.Image})
			return &RunningOS{Source: FromRecovery, Image: m}, nil
		}
		payload, err := os.ReadFile(h.rootFile(dec.Root))
		if err != nil {
			return nil, fmt.Errorf("root %s: %w", dec.Root, err)
		}
		m, err := imagev1.ReadManifest(payload)
		if err != nil {
			return nil, fmt.Errorf("root %s: %w", dec.Root, err)
		}
		if dec.Reason != "" {
			h.emit(EventBoot, "Fallback", dec.Reason, map[string]string{"root": string(dec.Root)})
		}
		return &RunningOS{Source: FromDisk, Root: dec.Root, Trial: dec.Trial, Image: m}, nil
	case BootCd:
		h.mu.Lock()
		url := h.media
		h.mu.Unlock()
		if url == "" {
			return nil, ErrNoMedia
		}
		payload, err := readMedia(ctx, url, mediaBytes)
		if err != nil {
			return nil, fmt.Errorf("virtual media: %w", err)
		}
		m, args, err := bootMedium(payload)
		if err != nil {
			return nil, fmt.Errorf("virtual media %s: %w", url, err)
		}
		return &RunningOS{Source: FromVirtualMedia, Image: m, Media: url, KernelArgs: args}, nil
	case BootPxe:
		if plan.pxeOff {
			return nil, fmt.Errorf("PXE boot is disabled in the firmware settings (PxeBoot)")
		}
		return h.netboot(ctx)
	case BootUefiHttp:
		if plan.httpURI == "" {
			return nil, fmt.Errorf("HTTP boot: no boot URI offered by DHCP")
		}
		payload, err := readMedia(ctx, plan.httpURI, image.PayloadBytes)
		if err != nil {
			return nil, fmt.Errorf("HTTP boot: %w", err)
		}
		m, err := imagev1.ReadManifest(payload)
		if err != nil {
			return nil, fmt.Errorf("HTTP boot %s: %w", plan.httpURI, err)
		}
		return &RunningOS{Source: FromNetwork, Image: m, Media: plan.httpURI}, nil
	}
	return nil, fmt.Errorf("unknown boot device %q", target)
}

// mediaBytes bounds what a virtual CD may hold: an image's payload, or
// an ISO such as Ironic builds (its boot loader's EFI partition, the
// deploy kernel and initramfs).
const mediaBytes = 64 << 20

// readMedia downloads an image whole, as firmware does, up to limit bytes.
func readMedia(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err // names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than the %d bytes a host reads", url, limit)
	}
	return b, err
}

// osUp records the running OS and how its driver found each port.
func (h *Host) osUp(ctx context.Context, target BootTarget, running *RunningOS) {
	driver := running.Image.I40eDriver()
	h.mu.Lock()
	if ctx.Err() != nil { // power went while booting
		h.mu.Unlock()
		return
	}
	for _, p := range h.ports {
		running.Links = append(running.Links, PortLink{Port: p.Name, Firmware: p.Active.Firmware, API: p.Active.API,
			Recovery: p.Flash == nic.FlashRecovery, Link: h.lab.def.NICRules.Evaluate(p, driver)})
	}
	if running.BootID == "" { // a real guest reports its own
		running.BootID = newBootID()
	}
	running.BootedAt = time.Now()
	h.os, h.phase = running, PhaseRunning
	h.bootCount++
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventBoot, vocab.LabOSRunning, fmt.Sprintf("booted %s from %s", running.Image.Name, running.Source),
		map[string]string{"target": string(target), vocab.FieldLabSource: string(running.Source), "root": string(running.Root), "image": running.Image.Name,
			vocab.FieldKubernetesVersion: running.Image.KubernetesVersion})
	for _, l := range running.Links {
		if l.Message != "" || !l.Up {
			h.emit(EventNIC, l.Rule, l.Message, map[string]string{"port": l.Port, "up": fmt.Sprint(l.Up)})
		}
	}
}

func (h *Host) rootFile(id disk.RootID) string {
	return filepath.Join(h.dir, h.disk.FileName(id))
}

// finalise is the last thing a graceful shutdown of the OS does on an
// OSTree host: ostree-finalize-staged writes the activated staged
// deployment into the bootloader, for the modelled time. A power cut
// inside that window loses the staged deployment (PowerLoss), and so does
// any power-off that skips the shutdown (a hard reset). It answers false
// when the power went meanwhile.
func (h *Host) finalise(ctx context.Context) bool {
	h.mu.Lock()
	cycle := h.cycle
	id, due := h.disk.BeginFinalise()
	if due {
		h.saveLocked()
	}
	h.mu.Unlock()
	if !due {
		return true
	}
	h.emit(EventDisk, "Finalising", "writing deployment "+string(id)+" into the bootloader", map[string]string{"root": string(id)})
	waitCtx, stop := untilPowerLoss(ctx, cycle)
	defer stop()
	if h.lab.scale.Sleep(waitCtx, timescale.Seconds(h.lab.def.Spec.Timing.FinaliseSeconds)) != nil {
		return false
	}
	h.mu.Lock()
	if h.cycle != cycle || h.detached {
		h.mu.Unlock()
		return false
	}
	err := h.disk.FinishFinalise()
	h.saveLocked()
	h.mu.Unlock()
	if err != nil {
		h.emit(EventDisk, "FinaliseFailed", err.Error(), map[string]string{"root": string(id)})
		return true
	}
	h.emit(EventDisk, "Finalised", "deployment "+string(id)+" is the bootloader's default", map[string]string{"root": string(id)})
	return true
}

// newBootID is a random UUID, as the kernel makes its boot_id.
func newBootID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
