package diskimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ParamMedia is the kernel parameter that tells a virtual-media guest the
// URL of the medium it booted from (whose query carries what a deploy
// ramdisk needs to find its provisioner).
const ParamMedia = "upgradelab.media"

// SourceVirtualMedia is ParamSource's value for a boot from a medium.
const SourceVirtualMedia = "virtual-media"

// BuildISO writes a UEFI-bootable ISO 9660 image to out, as a BMC's
// virtual CD presents it: an El Torito EFI boot image (a small FAT
// filesystem) holding GRUB's loader, and in the ISO's own tree its boot
// script and the payload directory's kernel and initramfs. (OVMF hands
// GRUB the CD itself as its boot device, so the script and the files it
// loads are read through GRUB's iso9660 driver.) mediaURL goes on the
// kernel command line. work is a folder for the intermediate files.
func BuildISO(ctx context.Context, out, work, payloadDir, kernelArgs, mediaURL string) error {
	if err := CheckTools(); err != nil {
		return err
	}
	if _, err := os.Stat("/usr/bin/xorriso"); err != nil {
		return fmt.Errorf("building virtual media needs xorriso (Debian package xorriso); scripts/install-deps.sh installs it")
	}
	if strings.ContainsAny(mediaURL, "'\n") {
		return fmt.Errorf("media URL %q: a quote or newline cannot go on the kernel command line", mediaURL)
	}
	_ = os.RemoveAll(work)
	root := filepath.Join(work, "iso")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, espDir), 0o755); err != nil {
		return err
	}
	for _, f := range []string{PayloadKernel, PayloadInitrd} {
		b, err := os.ReadFile(filepath.Join(payloadDir, f))
		if err != nil {
			return fmt.Errorf("virtual media: %w", err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			return err
		}
	}
	script := strings.Join([]string{
		"serial --unit=0 --speed=115200",
		"terminal_input serial",
		"terminal_output serial",
		`echo "upgradelab-grub: booting virtual media"`,
		fmt.Sprintf("linux %s %s %s=%s '%s=%s'", PayloadKernel, kernelArgs, ParamSource, SourceVirtualMedia, ParamMedia, mediaURL),
		"initrd " + PayloadInitrd,
		"boot",
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(root, espConfig), []byte(script), 0o644); err != nil {
		return err
	}
	loader := filepath.Join(work, "BOOTX64.EFI")
	args := append([]string{"-O", "x86_64-efi", "-d", grubEFIDir, "-p", espDir, "-o", loader, "iso9660"}, grubModules...)
	if err := run(ctx, "grub-mkimage", args...); err != nil {
		return err
	}
	img := filepath.Join(root, "efiboot.img")
	if err := run(ctx, "mkfs.fat", "-C", "-n", "UPGRADELAB", img, "4096"); err != nil {
		return err
	}
	if err := run(ctx, "mmd", "-i", img, "::/EFI", "::"+espDir); err != nil {
		return err
	}
	if err := run(ctx, "mcopy", "-i", img, loader, "::"+espLoader); err != nil {
		return err
	}
	_ = os.Remove(out)
	return run(ctx, "xorriso", "-as", "mkisofs", "-quiet", "-R", "-V", "UPGRADELAB", "-e", "efiboot.img", "-no-emul-boot", "-o", out, root)
}
