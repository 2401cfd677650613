package diskimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/upgradelab/upgradelab/sim/disk"
)

// The host tools a build runs, and the Debian package each comes from, so
// a missing one is named with what installs it.
var tools = map[string]string{
	"grub-mkimage": "grub-efi-amd64-bin (and grub-common)",
	"mkfs.fat":     "dosfstools",
	"mmd":          "mtools",
	"mcopy":        "mtools",
	"mkfs.ext4":    "e2fsprogs",
	"sfdisk":       "fdisk",
}

// grubModules are the GRUB modules the EFI loader embeds: GPT, the ESP's
// FAT, the slots' ext4, the environment block, the script's tests, the
// serial console, and the Linux loader.
var grubModules = []string{"part_gpt", "fat", "ext2", "normal", "configfile", "loadenv", "test", "echo", "linux", "serial", "terminal", "halt", "reboot"}

// grubEFIDir holds the x86_64-efi modules grub-mkimage reads.
const grubEFIDir = "/usr/lib/grub/x86_64-efi"

// CheckTools says which build tools are missing, naming their packages.
func CheckTools() error {
	var missing []string
	for tool, pkg := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", tool, pkg))
		}
	}
	if _, err := os.Stat(filepath.Join(grubEFIDir, "linux.mod")); err != nil {
		missing = append(missing, fmt.Sprintf("%s (Debian package grub-efi-amd64-bin)", grubEFIDir))
	}
	if len(missing) > 0 {
		return fmt.Errorf("building a VM disk needs %s; scripts/install-deps.sh installs them", strings.Join(missing, ", "))
	}
	return nil
}

// Payload is a slot image: an ext4 filesystem holding a kernel, an
// initramfs and the image's manifest, as MakePayload builds it.
type Payload struct {
	Path string
	// Image is the catalog image's name; SHA256 the payload file's.
	Image  string
	SHA256 string
	Size   int64
}

// MakePayload builds the slot image for one OS image from dir (which holds
// PayloadKernel, PayloadInitrd and PayloadManifest) into out.
func MakePayload(ctx context.Context, dir, image, out string) (Payload, error) {
	var total int64
	for _, f := range []string{PayloadKernel, PayloadInitrd, PayloadManifest} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return Payload{}, fmt.Errorf("payload %s: %w", image, err)
		}
		total += fi.Size()
	}
	// ext4's metadata and a margin: the image is written whole into a
	// slot, so it is kept small.
	mib := total>>20 + 4 + total>>23
	_ = os.Remove(out)
	if err := run(ctx, "mkfs.ext4", "-q", "-F", "-L", image, "-O", "^has_journal", "-E", "root_owner=0:0", "-d", dir, out, fmt.Sprintf("%dM", mib)); err != nil {
		return Payload{}, fmt.Errorf("payload %s: %w", image, err)
	}
	return HashPayload(out, image)
}

// HashPayload describes an existing payload file.
func HashPayload(path, image string) (Payload, error) {
	f, err := os.Open(path)
	if err != nil {
		return Payload{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Payload{}, err
	}
	return Payload{Path: path, Image: image, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// Disk is what Build made: the image file and where its pieces are.
type Disk struct {
	Path   string
	Layout Layout
	// EnvOffset is the environment block's byte offset in the image.
	EnvOffset int64
}

// Build writes a factory-installed disk image to out: GRUB on the ESP with
// bootScript as its grub.cfg (GrubConfig's), slotA written and committed
// in slot A (nil: both slots empty), recovery on the recovery partition,
// empty data partitions. work is a folder for the intermediate files.
func Build(ctx context.Context, out, work string, l Layout, bootScript string, slotA *Payload, recovery Payload) (*Disk, error) {
	if err := CheckTools(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	for name, p := range map[string]*Payload{PartSlotA: slotA, PartRecovery: &recovery} {
		if p == nil {
			continue
		}
		for _, part := range l.Partitions {
			if part.Name == name && p.Size > int64(part.SizeMiB)<<20 {
				return nil, fmt.Errorf("payload %s (%d bytes) does not fit partition %s (%d MiB)", p.Image, p.Size, name, part.SizeMiB)
			}
		}
	}
	_ = os.Remove(out)
	f, err := os.OpenFile(out, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(int64(l.SizeMiB()) << 20); err != nil {
		return nil, err
	}
	if err := runStdin(ctx, l.sfdiskScript(), "sfdisk", "--no-reread", "--no-tell-kernel", "-q", out); err != nil {
		return nil, err
	}

	esp, err := buildESP(ctx, work, bootScript, l.Partitions[0].SizeMiB, slotA)
	if err != nil {
		return nil, err
	}
	d := &Disk{Path: out, Layout: l}
	if err := place(f, l, PartESP, esp); err != nil {
		return nil, err
	}
	if slotA != nil {
		if err := place(f, l, PartSlotA, slotA.Path); err != nil {
			return nil, err
		}
	}
	if err := place(f, l, PartRecovery, recovery.Path); err != nil {
		return nil, err
	}
	espStart, _ := l.StartMiB(PartESP)
	espSize := int64(l.Partitions[0].SizeMiB) << 20
	if d.EnvOffset, _, err = FindEnv(f, int64(espStart)<<20, espSize); err != nil {
		return nil, fmt.Errorf("disk %s: %w", out, err)
	}
	return d, f.Sync()
}

// FactoryState is the bootloader's part of a factory disk: slotA (nil:
// nothing) written and committed in slot A, slot B empty.
func FactoryState(slotA *Payload) *disk.Disk {
	slots := map[disk.SlotName]*disk.Slot{disk.SlotA: {State: disk.Empty}, disk.SlotB: {State: disk.Empty}}
	if slotA != nil {
		slots[disk.SlotA] = &disk.Slot{State: disk.Written, Image: slotA.Image, Checksum: slotA.SHA256, Priority: 1, Good: true}
	}
	return &disk.Disk{Kind: disk.AB, Slots: slots}
}

// buildESP makes the FAT image of the ESP. The environment block is copied
// first, so it takes the first clusters in one piece, as GRUB's save_env
// needs (it writes through the file's block list and refuses a fragmented
// file).
func buildESP(ctx context.Context, work, bootScript string, sizeMiB int, slotA *Payload) (string, error) {
	env := NewEnv()
	if err := SetDiskState(env, FactoryState(slotA)); err != nil {
		return "", err
	}
	block, err := env.Encode()
	if err != nil {
		return "", err
	}
	files := map[string][]byte{"grubenv": block, "grub.cfg": []byte(bootScript)}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			return "", err
		}
	}
	loader := filepath.Join(work, "BOOTX64.EFI")
	args := append([]string{"-O", "x86_64-efi", "-d", grubEFIDir, "-p", espDir, "-o", loader}, grubModules...)
	if err := run(ctx, "grub-mkimage", args...); err != nil {
		return "", err
	}
	img := filepath.Join(work, "esp.img")
	_ = os.Remove(img)
	if err := run(ctx, "mkfs.fat", "-C", "-n", "ESP", img, fmt.Sprint(sizeMiB*1024)); err != nil {
		return "", err
	}
	if err := run(ctx, "mmd", "-i", img, "::/EFI", "::"+espDir); err != nil {
		return "", err
	}
	for _, c := range [][2]string{{"grubenv", espGrubenv}, {"grub.cfg", espConfig}, {"BOOTX64.EFI", espLoader}} {
		if err := run(ctx, "mcopy", "-i", img, filepath.Join(work, c[0]), "::"+c[1]); err != nil {
			return "", err
		}
	}
	return img, nil
}

// place copies a file into a partition.
func place(f *os.File, l Layout, part, path string) error {
	start, err := l.StartMiB(part)
	if err != nil {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := io.Copy(io.NewOffsetWriter(f, int64(start)<<20), src); err != nil {
		return fmt.Errorf("write %s into partition %s: %w", path, part, err)
	}
	return nil
}

// ReadEnv reads a built disk's environment block (the host inspecting a
// powered-off VM's disk).
func ReadEnv(path string, offset int64) (*Env, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, envSize)
	if _, err := f.ReadAt(b, offset); err != nil {
		return nil, err
	}
	env, err := ParseEnv(b)
	if err != nil {
		return nil, fmt.Errorf("%s at %d: %w", path, offset, err)
	}
	return env, nil
}

// WriteEnv rewrites a powered-off disk's environment block in place.
func WriteEnv(path string, offset int64, env *Env) error {
	b, err := env.Encode()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(b, offset); err != nil {
		return err
	}
	return f.Sync()
}

func run(ctx context.Context, name string, args ...string) error {
	return runStdin(ctx, "", name, args...)
}

func runStdin(ctx context.Context, stdin, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
