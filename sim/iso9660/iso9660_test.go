package iso9660

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildISO writes files into a tree and makes an ISO of it with tool
// (mkisofs -r, as Ironic does, or plain ISO 9660 names).
func buildISO(t *testing.T, tool []string, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	for name, content := range files {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out.iso")
	args := append(append(tool[1:], "-quiet", "-o", out), tree)
	if b, err := exec.Command(tool[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(tool, " "), err, b)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var bootTree = map[string]string{
	"vmlinuz":           "the kernel",
	"initrd":            "the initramfs",
	"EFI/BOOT/grub.cfg": "menuentry boot { linuxefi /vmlinuz ipa-api-url=http://127.0.0.1:1 }",
	"boot/grub/big.img": strings.Repeat("x", 3*sector+17),
}

// Files come out of ISOs made as Ironic makes them (mkisofs with Rock
// Ridge names) and with plain ISO 9660 names only (upper case, found
// whatever the case asked).
func TestReadFileFindsEveryFile(t *testing.T) {
	for _, tool := range [][]string{{"mkisofs", "-r"}, {"mkisofs"}} {
		img := buildISO(t, tool, bootTree)
		if !IsISO(img) {
			t.Fatalf("%v: IsISO false", tool)
		}
		for name, want := range bootTree {
			got, err := ReadFile(img, name)
			if err != nil || string(got) != want {
				t.Errorf("%v %s: %q, %v; want %d bytes", tool, name, trunc(got), err, len(want))
			}
		}
		if _, err := ReadFile(img, "EFI/BOOT/missing.cfg"); err == nil {
			t.Errorf("%v: a missing file was read", tool)
		}
		if _, err := ReadFile(img, "EFI/BOOT"); err == nil {
			t.Errorf("%v: a directory was read as a file", tool)
		}
	}
	if IsISO([]byte("not an iso")) {
		t.Error("IsISO true for text")
	}
}

func trunc(b []byte) string { return string(b[:min(len(b), 20)]) }

// No image, however broken, panics the reader.
func FuzzReadFile(f *testing.F) {
	dir := f.TempDir()
	tree := filepath.Join(dir, "t")
	_ = os.MkdirAll(filepath.Join(tree, "EFI", "BOOT"), 0o755)
	_ = os.WriteFile(filepath.Join(tree, "EFI", "BOOT", "grub.cfg"), []byte("x"), 0o644)
	out := filepath.Join(dir, "o.iso")
	if b, err := exec.Command("mkisofs", "-r", "-quiet", "-o", out, tree).CombinedOutput(); err != nil {
		f.Fatalf("mkisofs: %v %s", err, b)
	}
	seed, _ := os.ReadFile(out)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, img []byte) {
		_, _ = ReadFile(img, "EFI/BOOT/grub.cfg")
	})
}
