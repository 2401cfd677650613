package boot

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GuestModules are the kernel modules a guest loads, named by what it
// needs: the virtio PCI transport, its disk and its network card. Their
// dependencies come along (moduleClosure).
var GuestModules = []string{"virtio_pci", "virtio_blk", "virtio_net"}

// Module is one kernel module file to load.
type Module struct {
	Name string
	Path string
}

// moduleName is the kernel's name for a module file ("virtio-pci" and
// "virtio_pci" are one module).
func moduleName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".ko"), "-", "_")
}

// moduleDepends reads a module's "depends=" from its .modinfo section, as
// depmod does (the unpacked package has no modules.dep: depmod runs at
// installation).
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", path)
	}
	b, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// moduleClosure resolves roots and their dependencies in the kernel's
// module tree, in load order (each after what it depends on). A module the
// kernel has built in is not in the tree and needs no loading, so a root
// must be found but a dependency may be built in only if the tree lacks it;
// modules.builtin tells which.
func moduleClosure(modDir string, roots []string) ([]Module, error) {
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ko") {
			files[moduleName(p)] = p
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[moduleName(l)] = true
		}
	}
	var order []Module
	done := map[string]bool{}
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		if done[name] {
			return nil
		}
		for _, p := range path {
			if p == name {
				return fmt.Errorf("kernel modules: dependency cycle %s", strings.Join(append(path, name), " -> "))
			}
		}
		file, ok := files[name]
		if !ok {
			if builtin[name] {
				done[name] = true
				return nil
			}
			return fmt.Errorf("kernel module %s (needed by %s) is neither in %s nor built in", name, strings.Join(path, " -> "), modDir)
		}
		deps, err := moduleDepends(file)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(moduleName(d), append(path, name)); err != nil {
				return err
			}
		}
		done[name] = true
		order = append(order, Module{Name: name, Path: file})
		return nil
	}
	for _, r := range roots {
		if err := visit(r, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}
