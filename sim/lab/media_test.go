package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/upgradelab/upgradelab/sim/image"
)

// An ISO laid out as Ironic builds its virtual media (mkisofs -r; the
// kernel and initramfs at the root, GRUB's configuration under EFI/BOOT)
// boots the kernel it names with its command line; the kernel is an
// image payload. A CD that is the payload itself boots as before.
func TestABootISOBootsTheKernelItsGRUBConfigurationNames(t *testing.T) {
	def, err := Load(filepath.Join("..", "..", "fixtures", "labs", "single-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	entry, err := def.Catalog.Get("deploy-ramdisk-2026.10")
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	const args = "nofb ipa-api-url=http://127.0.0.1:6385 ipa-agent-token=tok boot_method=vmedia --"
	for name, content := range map[string][]byte{
		"vmlinuz": image.Payload(entry), "initrd": []byte("initramfs"),
		"EFI/BOOT/grub.cfg": []byte("set default=0\nmenuentry \"boot_partition\" {\nlinuxefi /vmlinuz " + args + "\ninitrdefi /initrd\n}\n"),
	} {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	iso := filepath.Join(t.TempDir(), "boot.iso")
	if out, err := exec.Command("mkisofs", "-r", "-quiet", "-o", iso, tree).CombinedOutput(); err != nil {
		t.Fatalf("mkisofs: %v\n%s", err, out)
	}
	payload, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	m, got, err := bootMedium(payload)
	if err != nil || m.Name != entry.Name || got != args {
		t.Fatalf("bootMedium = %s, %q, %v; want %s with %q", m.Name, got, err, entry.Name, args)
	}
	if m, got, err := bootMedium(image.Payload(entry)); err != nil || m.Name != entry.Name || got != "" {
		t.Errorf("a payload CD: %s, %q, %v", m.Name, got, err)
	}
	if _, _, err := grubEntry("menuentry x {\n}\n"); err == nil {
		t.Error("a configuration without a linux command booted")
	}
}
