package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/vm/boot"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

// KernelArgs are the command line GRUB gives every payload's kernel:
// the serial console, a restart one second after a panic (an init that
// fails reboots, spending the slot's try, as on hardware), a panic when a
// CPU is stuck in the kernel for 20 s (softlockup_panic), and few kernel
// messages.
//
// softlockup_panic is what a fleet's hardware watchdog does for a hung
// kernel: the machine restarts instead of hanging until someone cuts the
// power. Under TCG on a loaded 2-core host a guest once never got from its
// reboot(2) to "reboot: Restarting system": it reported "soft lockup -
// CPU#0 stuck for 27s! [init]" three times and the test's 90 s boot
// deadline passed (CI, sim/vm, case "a slot with two tries boots twice
// before the fallback"). With the panic the restart comes ~20 s late and
// the A/B outcome is unchanged: the slot choice was written and synced by
// the activation before the reboot was asked for. The panic prints its
// stack on the console (panic turns the console verbose), so the next
// such hang names where the kernel was stuck.
const KernelArgs = "console=ttyS0 panic=1 softlockup_panic=1 loglevel=4"

// GuestPackage is the guest init's Go package.
const GuestPackage = "github.com/upgradelab/upgradelab/cmd/upgradelab-guest"

// Builder makes boot media. Payloads are built once per image name.
type Builder struct {
	// Dir holds what it builds; KernelCache the unpacked kernel package
	// (shared across runs, like the kube binaries).
	Dir, KernelCache string
	// Guest is the static guest binary; empty: built from GuestPackage
	// with the go command (the module's source must be at hand).
	Guest string
	// Layout is the disks' partition table.
	Layout diskimage.Layout
	// BootScript makes the disks' grub.cfg: diskimage.GrubConfig, unless a
	// test breaks the bootloader on purpose.
	BootScript func(diskimage.Layout, string) (string, error)

	mu       sync.Mutex
	kernel   *boot.Kernel
	modules  []boot.Module
	payloads map[string]diskimage.Payload
}

// NewBuilder fetches the kernel and builds the guest if needed.
func NewBuilder(ctx context.Context, dir, kernelCache, guest string) (*Builder, error) {
	if err := diskimage.CheckTools(); err != nil {
		return nil, err
	}
	b := &Builder{Dir: dir, KernelCache: kernelCache, Guest: guest, Layout: diskimage.DefaultLayout(48), BootScript: diskimage.GrubConfig, payloads: map[string]diskimage.Payload{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	k, err := boot.FetchKernel(ctx, kernelCache, boot.KernelMeta)
	if err != nil {
		return nil, err
	}
	if b.modules, err = boot.GuestModulesOf(k); err != nil {
		return nil, err
	}
	b.kernel = k
	if b.Guest == "" {
		b.Guest = filepath.Join(dir, "upgradelab-guest")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.Guest, GuestPackage)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build the guest init (%s): %w: %s", GuestPackage, err, strings.TrimSpace(out.String()))
		}
	}
	return b, nil
}

// Kernel is the kernel package the payloads carry.
func (b *Builder) Kernel() *boot.Kernel { return b.kernel }

// Payload is the slot image of one OS image: the kernel, an initramfs
// with the guest and m, and m itself.
func (b *Builder) Payload(ctx context.Context, m imagev1.Manifest) (diskimage.Payload, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.payloads[m.Name]; ok {
		return p, nil
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		return diskimage.Payload{}, err
	}
	dir := filepath.Join(b.Dir, "payloads", m.Name)
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "boot"), 0o755); err != nil {
		return diskimage.Payload{}, err
	}
	if err := os.Link(b.kernel.Image, filepath.Join(dir, diskimage.PayloadKernel)); err != nil {
		if err := copyFile(b.kernel.Image, filepath.Join(dir, diskimage.PayloadKernel)); err != nil {
			return diskimage.Payload{}, err
		}
	}
	if err := boot.Initramfs(filepath.Join(dir, diskimage.PayloadInitrd), b.Guest, b.modules, manifest); err != nil {
		return diskimage.Payload{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, diskimage.PayloadManifest), manifest, 0o644); err != nil {
		return diskimage.Payload{}, err
	}
	p, err := diskimage.MakePayload(ctx, dir, m.Name, filepath.Join(b.Dir, "payloads", m.Name+".img"))
	if err != nil {
		return diskimage.Payload{}, err
	}
	b.payloads[m.Name] = p
	return p, nil
}

// Disk builds a factory disk for one host: slotA (nil: none) committed in
// slot A, recovery on the recovery partition.
func (b *Builder) Disk(ctx context.Context, host string, slotA *diskimage.Payload, recovery diskimage.Payload) (*diskimage.Disk, error) {
	dir := filepath.Join(b.Dir, "disks", host)
	script, err := b.BootScript(b.Layout, KernelArgs)
	if err != nil {
		return nil, err
	}
	return diskimage.Build(ctx, filepath.Join(dir, "system.img"), filepath.Join(dir, "work"), b.Layout, script, slotA, recovery)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// ISO is the virtual-media image of one OS image (a deploy ramdisk, say):
// its payload's kernel and initramfs on a UEFI-bootable CD, with mediaURL
// (the URL the BMC was given) on the kernel command line. Built once per
// image and URL.
func (b *Builder) ISO(ctx context.Context, m imagev1.Manifest, mediaURL string) (string, error) {
	if _, err := b.Payload(ctx, m); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(m.Name + "\x00" + mediaURL))
	out := filepath.Join(b.Dir, "media", m.Name+"-"+hex.EncodeToString(sum[:6])+".iso")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	work := out + ".work"
	defer os.RemoveAll(work)
	if err := diskimage.BuildISO(ctx, out, work, filepath.Join(b.Dir, "payloads", m.Name), KernelArgs, mediaURL); err != nil {
		return "", fmt.Errorf("virtual media for %s: %w", m.Name, err)
	}
	return out, nil
}
