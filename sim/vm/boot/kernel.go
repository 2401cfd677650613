package boot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KernelMeta is the Debian metapackage whose dependency is the cloud
// kernel: the smallest Debian kernel, made for virtual machines.
const KernelMeta = "linux-image-cloud-amd64"

// Kernel is an unpacked kernel package.
type Kernel struct {
	Package string
	// Image is the vmlinuz; ModDir its /lib/modules/VERSION.
	Image  string
	ModDir string
}

// FetchKernel downloads the kernel package that pkg depends on (or pkg
// itself, when it names one linux-image-VERSION package) into cacheDir and
// unpacks it there without installing it, once: a later call finds it.
func FetchKernel(ctx context.Context, cacheDir, pkg string) (*Kernel, error) {
	name := pkg
	if pkg == KernelMeta {
		out, err := output(ctx, "", "apt-cache", "depends", pkg)
		if err != nil {
			return nil, fmt.Errorf("kernel package %s: %w", pkg, err)
		}
		name = ""
		for _, l := range strings.Split(out, "\n") {
			if dep, ok := strings.CutPrefix(strings.TrimSpace(l), "Depends: "); ok && strings.HasPrefix(dep, "linux-image-") {
				name = dep
				break
			}
		}
		if name == "" {
			return nil, fmt.Errorf("kernel package %s depends on no linux-image package (apt-cache depends said: %s)", pkg, strings.TrimSpace(out))
		}
	}
	root := filepath.Join(cacheDir, name)
	if k, err := findKernel(name, root); err == nil {
		return k, nil
	}
	// Labs that start at once on a cold cache each fetch it: each into a
	// folder of its own, and the first to finish puts its copy in place.
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(cacheDir, name+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := output(ctx, tmp, "apt-get", "download", name); err != nil {
		return nil, fmt.Errorf("kernel package %s: %w (is it in Debian's index? `apt-get update` first)", name, err)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, name+"_*.deb"))
	if len(debs) != 1 {
		return nil, fmt.Errorf("kernel package %s: apt-get download left %d .deb files", name, len(debs))
	}
	if _, err := output(ctx, "", "dpkg-deb", "-x", debs[0], filepath.Join(tmp, "root")); err != nil {
		return nil, fmt.Errorf("kernel package %s: %w", name, err)
	}
	if k, err := findKernel(name, root); err == nil {
		return k, nil // another fetch finished first
	}
	_ = os.RemoveAll(root) // a broken copy
	if err := os.Rename(filepath.Join(tmp, "root"), root); err != nil {
		if k, err2 := findKernel(name, root); err2 == nil {
			return k, nil // another fetch put its copy in place meanwhile
		}
		return nil, fmt.Errorf("kernel package %s: %w", name, err)
	}
	return findKernel(name, root)
}

func findKernel(name, root string) (*Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	mods, _ := filepath.Glob(filepath.Join(root, "lib", "modules", "*"))
	if len(images) != 1 || len(mods) != 1 {
		return nil, fmt.Errorf("kernel package %s in %s: want one vmlinuz and one module tree, found %d and %d", name, root, len(images), len(mods))
	}
	return &Kernel{Package: name, Image: images[0], ModDir: mods[0]}, nil
}

func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
