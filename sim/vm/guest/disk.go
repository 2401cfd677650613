package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"

	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

// Disk is the guest's system disk: the block device, its partitions and
// the offset of GRUB's environment block on the ESP.
type Disk struct {
	dev    *os.File
	parts  []diskimage.Partition
	envOff int64
	// Booted is the slot the kernel came from ("" when it came from the
	// recovery partition).
	Booted disk.SlotName

	mu sync.Mutex
}

// OpenDisk opens the disk device and finds its partitions and environment
// block.
func OpenDisk(device string, booted disk.SlotName) (*Disk, error) {
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	parts, err := diskimage.ReadGPT(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", device, err)
	}
	esp, err := diskimage.Find(parts, diskimage.PartESP)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", device, err)
	}
	off, _, err := diskimage.FindEnv(f, esp.Offset, esp.Size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", device, err)
	}
	return &Disk{dev: f, parts: parts, envOff: off, Booted: booted}, nil
}

// model reads the block into sim/disk's model.
func (d *Disk) model() (*disk.Disk, *diskimage.Env, error) {
	b := make([]byte, 1024)
	if _, err := d.dev.ReadAt(b, d.envOff); err != nil {
		return nil, nil, err
	}
	env, err := diskimage.ParseEnv(b)
	if err != nil {
		return nil, nil, err
	}
	m, err := diskimage.DiskState(env)
	if err != nil {
		return nil, nil, err
	}
	m.Booted = d.Booted
	return m, env, nil
}

// save writes the model back and makes it durable before returning: the
// bootloader reads it at the next boot, however that boot comes.
func (d *Disk) save(m *disk.Disk, env *diskimage.Env) error {
	if err := diskimage.SetDiskState(env, m); err != nil {
		return err
	}
	b, err := env.Encode()
	if err != nil {
		return err
	}
	if _, err := d.dev.WriteAt(b, d.envOff); err != nil {
		return err
	}
	return d.dev.Sync()
}

// update applies one contract operation to the block.
func (d *Disk) update(fn func(*disk.Disk) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, env, err := d.model()
	if err != nil {
		return err
	}
	if err := fn(m); err != nil {
		return err
	}
	return d.save(m, env)
}

// Images reports the disk in the contract's terms.
func (d *Disk) Images() (disk.Images, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, _, err := d.model()
	if err != nil {
		return disk.Images{}, err
	}
	return m.Images(), nil
}

// Activate, Commit and Rollback are the contract's.
func (d *Disk) Activate(id disk.RootID, tries int) error {
	if tries > diskimage.MaxTries {
		return fmt.Errorf("activate %s: %d tries, the bootloader counts at most %d: %w", id, tries, diskimage.MaxTries, jsonhttp.ErrBadRequest)
	}
	return d.update(func(m *disk.Disk) error { return m.Activate(id, tries) })
}

func (d *Disk) Commit() error   { return d.update((*disk.Disk).Commit) }
func (d *Disk) Rollback() error { return d.update((*disk.Disk).Rollback) }

// RequestRecoveryBoot makes the next boot the recovery partition's, once.
func (d *Disk) RequestRecoveryBoot() error {
	return d.update(func(m *disk.Disk) error { m.RecoveryOnce = true; return nil })
}

// RecoverInterruptedWrites runs at boot: a slot still marked writing was
// being written when the machine last lost power or reset, so it holds a
// partial image. It is marked corrupt, as sim/disk's PowerLoss marks it,
// and its slots are named.
func (d *Disk) RecoverInterruptedWrites() ([]disk.SlotName, error) {
	var cut []disk.SlotName
	err := d.update(func(m *disk.Disk) error {
		for _, name := range []disk.SlotName{disk.SlotA, disk.SlotB} {
			if m.Slots[name].State == disk.Writing {
				m.AbortStage(name)
				cut = append(cut, name)
			}
		}
		return nil
	})
	return cut, err
}

// Erase is metadata cleaning from an OS that did not boot from the disk (a
// deploy ramdisk, recovery): the bootloader's slots become empty (sim/disk's
// Erase) and the start of every slot, persistent and OEM partition is
// zeroed, as Ironic's metadata cleaning zeroes what identifies a
// filesystem, so no byte of the last owner's filesystems is mounted again.
func (d *Disk) Erase() error {
	if d.Booted != "" {
		return fmt.Errorf("erase: the OS runs from slot %s: %w", d.Booted, disk.ErrNotBooted)
	}
	zero := make([]byte, 1<<20)
	for _, name := range []string{diskimage.PartSlotA, diskimage.PartSlotB, diskimage.PartPersistent, diskimage.PartOEM} {
		p, err := diskimage.Find(d.parts, name)
		if err != nil {
			return err
		}
		if _, err := d.dev.WriteAt(zero[:min(int64(len(zero)), p.Size)], p.Offset); err != nil {
			return fmt.Errorf("erase %s: %w", name, err)
		}
	}
	return d.update(func(m *disk.Disk) error { m.Erase(); return nil })
}

// Progress is how far a write has come.
type Progress struct {
	Root    disk.RootID
	Written int64
	Total   int64
}

// Stage downloads url and writes it into the slot the model stages into.
// The slot is marked writing, durably, before its first byte changes; it is
// written only when the bytes on the partition hash to sha. The request
// never holds the disk lock while it writes, so status reads go on.
func (d *Disk) Stage(ctx context.Context, client *http.Client, url, sha string, progress func(Progress)) (disk.RootID, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %w", jsonhttp.ErrBadRequest, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download %s: %s", url, resp.Status)
	}
	image := strings.TrimSuffix(path.Base(req.URL.Path), ".img")
	size := resp.ContentLength
	if size < 0 {
		return "", fmt.Errorf("download %s: the server sent no Content-Length, so the image cannot be checked against the slot's size before the write", url)
	}
	var target disk.RootID
	err = d.update(func(m *disk.Disk) error {
		var err error
		// The model checks the size against RootMiB; the partition is the bound.
		target, err = m.BeginStage(image, sha, int((size+1<<20-1)>>20))
		if err != nil {
			return err
		}
		part, err := d.slotPartition(target)
		if err != nil {
			return err
		}
		if size > part.Size {
			return fmt.Errorf("image %s (%d bytes) into slot %s (%d bytes): %w", image, size, target, part.Size, disk.ErrNoSpace)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	part, _ := d.slotPartition(target)
	h := sha256.New()
	w := &progressWriter{w: io.NewOffsetWriter(d.dev, part.Offset), p: Progress{Root: target, Total: size}, report: progress}
	n, err := io.Copy(io.MultiWriter(w, h), resp.Body)
	if err == nil && n != size {
		err = fmt.Errorf("download %s: %d of %d bytes", url, n, size)
	}
	if err == nil {
		err = d.dev.Sync()
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != sha {
		err = fmt.Errorf("image %s: sha256 %s, want %s", image, hex.EncodeToString(h.Sum(nil)), sha)
	}
	if err != nil {
		_ = d.update(func(m *disk.Disk) error { m.AbortStage(target); return nil })
		return "", err
	}
	return target, d.update(func(m *disk.Disk) error { return m.FinishStage(target) })
}

func (d *Disk) slotPartition(id disk.RootID) (diskimage.Partition, error) {
	switch id {
	case disk.SlotA:
		return diskimage.Find(d.parts, diskimage.PartSlotA)
	case disk.SlotB:
		return diskimage.Find(d.parts, diskimage.PartSlotB)
	}
	return diskimage.Partition{}, fmt.Errorf("slot %q: %w", id, disk.ErrNoSuchRoot)
}

type progressWriter struct {
	w      io.Writer
	p      Progress
	report func(Progress)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.p.Written += int64(n)
	if p.report != nil {
		p.report(p.p)
	}
	return n, err
}
