package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// SetBootOverride sets the next boot device (Once) or a standing one
// (Continuous); Disabled clears it.
func (h *Host) SetBootOverride(o BootOverride) error {
	switch o.Mode {
	case OverrideDisabled, OverrideOnce, OverrideContinuous:
	default:
		return fmt.Errorf("host %s: boot override mode %q is not Disabled, Once or Continuous", h.spec.Name, o.Mode)
	}
	switch o.Target {
	case "", BootHdd, BootCd, BootPxe, BootUefiHttp, BootBiosSetup:
	default:
		return fmt.Errorf("host %s: boot override target %q is not Hdd, Cd, Pxe, UefiHttp or BiosSetup", h.spec.Name, o.Target)
	}
	switch o.BootMode {
	case "", BootModeUEFI, BootModeLegacy:
	default:
		return fmt.Errorf("host %s: boot mode %q is not UEFI or Legacy", h.spec.Name, o.BootMode)
	}
	if u := o.HTTPBootURI; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("host %s: HTTP boot URI %q is not http(s)", h.spec.Name, u)
	}
	if o.Target != "" && o.Target != BootHdd && o.Target != BootCd && o.Mode != OverrideDisabled {
		if err := h.machine.lacks("boot override to " + string(o.Target)); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.override = o
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventBoot, "BootOverrideSet", strings.TrimSpace(fmt.Sprintf("%s %s %s", o.Mode, o.Target, o.BootMode)),
		map[string]string{"mode": string(o.Mode), "target": string(o.Target), "bootMode": string(o.BootMode)})
	return nil
}

// InsertMedia attaches an image URL as the virtual CD.
func (h *Host) InsertMedia(url string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.media != "" {
		return fmt.Errorf("host %s: insert %s: %w (%s)", h.spec.Name, url, ErrMediaBusy, h.media)
	}
	h.media = url
	h.saveLocked()
	go h.emit(EventMedia, "MediaInserted", url, nil)
	return nil
}

// EjectMedia detaches the virtual CD.
func (h *Host) EjectMedia() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.media == "" {
		return fmt.Errorf("host %s: eject: %w", h.spec.Name, ErrNoMedia)
	}
	h.media = ""
	h.saveLocked()
	go h.emit(EventMedia, "MediaEjected", "", nil)
	return nil
}

// WriteImage is what an OS running on the host (the deploy ramdisk or an
// update agent) does to stage an image: download it, refuse it before
// writing a byte if its sha256 is not wantSHA256, then write it into the
// root its disk stages into (the inactive slot, a new deployment) for the
// modelled time (size / disk speed). It answers that root. Power lost
// meanwhile leaves a slot corrupt and drops a deployment being pulled.
func (h *Host) WriteImage(ctx context.Context, url, wantSHA256 string) (disk.RootID, error) {
	return h.machine.writeImage(ctx, url, wantSHA256)
}

// modelWriteImage is WriteImage on the modelled machine: the payload is
// kept as the root's file and the write takes its modelled time.
func (h *Host) modelWriteImage(ctx context.Context, url, wantSHA256 string) (disk.RootID, error) {
	h.mu.Lock()
	cycle := h.cycle
	running := h.phase == PhaseRunning
	h.mu.Unlock()
	if !running {
		return "", fmt.Errorf("host %s: stage %s: %w", h.spec.Name, url, ErrNotRunning)
	}
	payload, m, err := h.fetchImage(ctx, url, wantSHA256)
	if err != nil {
		return "", err
	}
	sizeMiB := 1
	if b, err := h.lab.def.Catalog.Get(m.Name); err == nil {
		sizeMiB = b.SizeMiB
	}

	h.mu.Lock()
	if h.cycle != cycle {
		h.mu.Unlock()
		return "", fmt.Errorf("host %s: stage %s: %w", h.spec.Name, m.Name, ErrPowerLost)
	}
	root, err := h.disk.BeginStage(m.Name, wantSHA256, sizeMiB)
	where := h.rootNameLocked(root)
	h.saveLocked()
	h.mu.Unlock()
	if err != nil {
		h.emit(EventDisk, writeRefusal(err), err.Error(), map[string]string{"url": url, "image": m.Name})
		return "", fmt.Errorf("host %s: %w", h.spec.Name, err)
	}
	h.emit(EventDisk, "WriteStarted", fmt.Sprintf("writing %s (%d MiB) to %s", m.Name, sizeMiB, where), map[string]string{"root": string(root), "image": m.Name})

	writeTime := timescale.Seconds(float64(sizeMiB) * 1.048576 / h.lab.def.Spec.Timing.DiskWriteMBps)
	waitCtx, stop := untilPowerLoss(ctx, cycle)
	defer stop()
	if err := h.lab.scale.Sleep(waitCtx, writeTime); err != nil {
		if cycle.Err() != nil {
			return "", fmt.Errorf("host %s: write %s: %w", h.spec.Name, where, ErrPowerLost)
		}
		// The caller gave up: the OS stops writing, the root is unusable.
		h.mu.Lock()
		h.disk.AbortStage(root)
		h.saveLocked()
		h.mu.Unlock()
		return "", err
	}
	h.mu.Lock()
	if h.cycle != cycle || h.detached {
		h.mu.Unlock()
		return "", fmt.Errorf("host %s: write %s: %w", h.spec.Name, where, ErrPowerLost)
	}
	if err := os.WriteFile(h.rootFile(root), payload, 0o644); err != nil {
		h.mu.Unlock()
		return "", fmt.Errorf("host %s: write %s: %w", h.spec.Name, where, err)
	}
	err = h.disk.FinishStage(root)
	h.saveLocked()
	h.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("host %s: %w", h.spec.Name, err)
	}
	h.emit(EventDisk, "WriteFinished", fmt.Sprintf("%s written to %s", m.Name, where), map[string]string{"root": string(root), "image": m.Name})
	return root, nil
}

// rootNameLocked names a root for events: "slot B", "deployment 3".
func (h *Host) rootNameLocked(id disk.RootID) string {
	if h.disk.OSKind() == disk.OSTree {
		return "deployment " + string(id)
	}
	return "slot " + string(id)
}

// Activate makes a staged root the next to boot with tries attempts.
func (h *Host) Activate(root disk.RootID, tries int) error { return h.machine.activate(root, tries) }

// Commit marks the running root good (the OS passed its health check).
func (h *Host) Commit() error { return h.machine.commit() }

// Rollback makes the committed fallback boot next and stay the default.
func (h *Host) Rollback() error { return h.machine.rollback() }

// The update contract's disk events, the same on both machines.
const (
	reasonActivated  = "RootActivated"
	reasonCommitted  = "RootCommitted"
	reasonRolledBack = "RolledBack"
	committedMsg     = "running root marked good"
	rolledBackMsg    = "the fallback boots next"
)

func activatedMsg(root disk.RootID, tries int) string {
	return fmt.Sprintf("%s boots next with %d tries", root, tries)
}

// WriteEtc edits a file in the running OS's /etc ("" deletes it).
func (h *Host) WriteEtc(path, content string) error {
	return h.diskOp("EtcWritten", "edited "+path, func(d *disk.Disk) error {
		if h.phase != PhaseRunning {
			return ErrNotRunning
		}
		return d.WriteEtc(path, content)
	})
}

// Etc reads the running OS's /etc.
func (h *Host) Etc() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.disk.Etc()
}

func (h *Host) diskOp(reason, msg string, fn func(*disk.Disk) error) error {
	h.mu.Lock()
	err := fn(h.disk)
	if err == nil {
		h.saveLocked()
	}
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("host %s: %w", h.spec.Name, err)
	}
	h.emit(EventDisk, reason, msg, nil)
	return nil
}

// FlashNVM writes an NVM image into a port's flash for its modelled time;
// it runs after the next power cycle. Power lost meanwhile leaves the NIC
// in recovery mode.
func (h *Host) FlashNVM(ctx context.Context, port, nvmName string) error {
	img, ok := h.lab.def.NVMImages[nvmName]
	if !ok {
		return fmt.Errorf("host %s: NVM image %q is not in the lab's NVM catalog", h.spec.Name, nvmName)
	}
	h.mu.Lock()
	p := h.portLocked(port)
	cycle := h.cycle
	var err error
	switch {
	case p == nil:
		err = fmt.Errorf("no port %q", port)
	case h.power != PoweredOn:
		err = fmt.Errorf("flash %s: the host is powered off", port)
	default:
		err = p.BeginFlash(img)
	}
	if err == nil {
		h.saveLocked()
	}
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("host %s: %w", h.spec.Name, err)
	}
	h.emit(EventNIC, "FlashStarted", fmt.Sprintf("flashing %s on %s", nvmName, port), map[string]string{"port": port, "nvm": nvmName})
	waitCtx, stop := untilPowerLoss(ctx, cycle)
	defer stop()
	if err := h.lab.scale.Sleep(waitCtx, timescale.Seconds(img.FlashSeconds)); err != nil {
		return fmt.Errorf("host %s: flash %s: %w", h.spec.Name, port, ErrPowerLost)
	}
	h.mu.Lock()
	if h.cycle != cycle {
		h.mu.Unlock()
		return fmt.Errorf("host %s: flash %s: %w", h.spec.Name, port, ErrPowerLost)
	}
	err = p.FinishFlash()
	h.saveLocked()
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("host %s: %w", h.spec.Name, err)
	}
	h.emit(EventNIC, "FlashFinished", fmt.Sprintf("%s flashed on %s; active after the next power cycle", nvmName, port), map[string]string{"port": port, "nvm": nvmName})
	return nil
}

func (h *Host) portLocked(name string) *nic.Port {
	for _, p := range h.ports {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// untilPowerLoss is ctx that also ends when the power cycle does.
func untilPowerLoss(ctx, cycle context.Context) (context.Context, context.CancelFunc) {
	waitCtx, stop := context.WithCancel(ctx)
	go func() {
		select {
		case <-cycle.Done():
			stop()
		case <-waitCtx.Done():
		}
	}()
	return waitCtx, stop
}

// fetchImage downloads an image for staging and verifies it against the
// provider's checksum (a refusal is a WriteRefused event), then reads its
// manifest: what both backends do before anything is written.
func (h *Host) fetchImage(ctx context.Context, url, wantSHA256 string) ([]byte, imagev1.Manifest, error) {
	payload, err := image.Fetch(ctx, http.DefaultClient, url, wantSHA256)
	if err != nil {
		h.emit(EventDisk, "WriteRefused", err.Error(), map[string]string{"url": url})
		return nil, imagev1.Manifest{}, fmt.Errorf("host %s: stage: %w", h.spec.Name, err)
	}
	m, err := imagev1.ReadManifest(payload)
	if err != nil {
		return nil, imagev1.Manifest{}, fmt.Errorf("host %s: stage: %s: %w", h.spec.Name, url, err)
	}
	return payload, m, nil
}

// writeRefusal is the event reason of an image write the disk refused:
// vocab.LabWriteBusy when another write was under way (the rules judge
// an updater by it), WriteRefused otherwise.
func writeRefusal(err error) string {
	if errors.Is(err, disk.ErrWriteUnderWay) {
		return vocab.LabWriteBusy
	}
	return "WriteRefused"
}
