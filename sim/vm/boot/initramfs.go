package boot

import (
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"strings"
)

// Paths inside the initramfs the guest reads.
const (
	// InitrdModules lists the modules to load, in order, one file name per
	// line; the files are beside it.
	InitrdModules = "/lib/modules/load-order"
	// InitrdManifest is the image's manifest (api/image/v1), so the guest
	// knows what it runs without reading its slot.
	InitrdManifest = "/etc/upgradelab/manifest.json"
)

// Initramfs writes a gzip'd cpio archive to out with init as /init, the
// modules (in load order) and the manifest.
func Initramfs(out, init string, modules []Module, manifest []byte) error {
	bin, err := os.ReadFile(init)
	if err != nil {
		return fmt.Errorf("initramfs: the guest init: %w", err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	c := &cpioWriter{w: gz}
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "etc", "etc/upgradelab", "lib", "lib/modules"} {
		c.Dir(d)
	}
	c.File("init", 0o755, bin)
	var order []string
	for _, m := range modules {
		b, err := os.ReadFile(m.Path)
		if err != nil {
			return fmt.Errorf("initramfs: module %s: %w", m.Name, err)
		}
		file := path.Join(path.Dir(InitrdModules), m.Name+".ko")
		c.File(file, 0o644, b)
		order = append(order, m.Name+".ko")
	}
	c.File(InitrdModules, 0o644, []byte(strings.Join(order, "\n")+"\n"))
	c.File(InitrdManifest, 0o644, manifest)
	if err := c.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// GuestModulesOf resolves GuestModules in a kernel.
func GuestModulesOf(k *Kernel) ([]Module, error) { return moduleClosure(k.ModDir, GuestModules) }
