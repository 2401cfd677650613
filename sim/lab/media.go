package lab

import (
	"errors"
	"fmt"
	"strings"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/iso9660"
)

// grubConfig is where a UEFI boot ISO keeps its GRUB configuration (the
// path Ironic's ISOs use, on the ISO and on its EFI partition).
const grubConfig = "EFI/BOOT/grub.cfg"

// bootMedium is what a host boots from a virtual CD: either the medium is
// an image payload itself (the lab's own deploy media), or it is an ISO
// 9660 image whose GRUB configuration names a kernel on the ISO and its
// command line, as the ISOs Ironic builds do. The kernel file must be an
// image payload; its manifest says what runs. The firmware's El Torito
// load and GRUB itself are not modelled: the first menu entry boots.
func bootMedium(payload []byte) (imagev1.Manifest, string, error) {
	if !iso9660.IsISO(payload) {
		m, err := imagev1.ReadManifest(payload)
		return m, "", err
	}
	cfg, err := iso9660.ReadFile(payload, grubConfig)
	if err != nil {
		return imagev1.Manifest{}, "", fmt.Errorf("ISO without a UEFI boot configuration: %w", err)
	}
	kernel, args, err := grubEntry(string(cfg))
	if err != nil {
		return imagev1.Manifest{}, "", fmt.Errorf("%s: %w", grubConfig, err)
	}
	k, err := iso9660.ReadFile(payload, kernel)
	if err != nil {
		return imagev1.Manifest{}, "", fmt.Errorf("%s names kernel %s: %w", grubConfig, kernel, err)
	}
	m, err := imagev1.ReadManifest(k)
	if err != nil {
		return imagev1.Manifest{}, "", fmt.Errorf("kernel %s: %w", kernel, err)
	}
	return m, args, nil
}

// grubEntry is the kernel and command line of the first linux (or
// linuxefi) command of a GRUB configuration.
func grubEntry(cfg string) (kernel, args string, err error) {
	for _, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "linux" || f[0] == "linuxefi") {
			return f[1], strings.Join(f[2:], " "), nil
		}
	}
	return "", "", errors.New("no linux command")
}
