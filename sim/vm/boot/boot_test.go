package boot

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/internal/cachedir"
)

// readCpio reads a newc archive back: name to content, in order.
func readCpio(t *testing.T, b []byte) ([]string, map[string][]byte) {
	t.Helper()
	var names []string
	files := map[string][]byte{}
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if len(b) < off+110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		field := func(i int) int {
			n, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
		size, nameSize := field(6), field(11)
		name := string(b[off+110 : off+110+nameSize-1])
		data := off + align(110+nameSize)
		if name == "TRAILER!!!" {
			return names, files
		}
		names = append(names, name)
		files[name] = b[data : data+size]
		off = align(data + size)
	}
}

func TestInitramfsHoldsInitModulesAndManifest(t *testing.T) {
	dir := t.TempDir()
	init := filepath.Join(dir, "init")
	os.WriteFile(init, []byte("#!init"), 0o755)
	mod := filepath.Join(dir, "virtio.ko")
	os.WriteFile(mod, []byte("ELF..."), 0o644)
	out := filepath.Join(dir, "initrd.img")
	if err := Initramfs(out, init, []Module{{Name: "virtio", Path: mod}}, []byte(`{"name":"os-a"}`)); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(out)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(gz)
	names, files := readCpio(t, raw)
	if string(files["init"]) != "#!init" || string(files["lib/modules/virtio.ko"]) != "ELF..." ||
		string(files[strings.TrimPrefix(InitrdModules, "/")]) != "virtio.ko\n" || string(files[strings.TrimPrefix(InitrdManifest, "/")]) != `{"name":"os-a"}` {
		t.Fatalf("archive holds %v", names)
	}
	if slices.Index(names, "lib/modules") > slices.Index(names, "lib/modules/virtio.ko") {
		t.Error("a file comes before its folder")
	}
	if err := Initramfs(out, filepath.Join(dir, "missing"), nil, nil); err == nil || !strings.Contains(err.Error(), "the guest init") {
		t.Errorf("a missing init: %v", err)
	}
}

// The kernel the VMs boot: Debian's cloud kernel, fetched from the
// package index and unpacked. Its virtio drivers resolve, each after what
// it needs.
func TestCloudKernelModulesResolveInLoadOrder(t *testing.T) {
	k, err := FetchKernel(context.Background(), filepath.Join(cachedir.Dir(), "vm", "kernel"), KernelMeta)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := GuestModulesOf(k)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for i, m := range mods {
		at[m.Name] = i + 1
	}
	for _, pair := range [][2]string{{"virtio", "virtio_pci"}, {"virtio_ring", "virtio_blk"}, {"net_failover", "virtio_net"}} {
		if at[pair[0]] == 0 || at[pair[1]] == 0 || at[pair[0]] > at[pair[1]] {
			t.Errorf("%s must load before %s: order %v", pair[0], pair[1], mods)
		}
	}
	if _, err := moduleClosure(k.ModDir, []string{"no_such_driver"}); err == nil || !strings.Contains(err.Error(), "no_such_driver") {
		t.Errorf("an unknown module: %v", err)
	}
}

func TestAMissingKernelPackageIsNamed(t *testing.T) {
	_, err := FetchKernel(context.Background(), t.TempDir(), "linux-image-0.0.0-none-amd64")
	if err == nil || !strings.Contains(err.Error(), "kernel package linux-image-0.0.0-none-amd64") {
		t.Fatalf("a package Debian does not have: %v", err)
	}
}
