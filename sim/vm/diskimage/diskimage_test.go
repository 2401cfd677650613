package diskimage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/sim/disk"
)

func TestEnvRoundTripsAndIsStrict(t *testing.T) {
	e := NewEnv()
	e.Set("A_STATE", "written")
	e.Set("B_TRIES", "2")
	e.Set("A_STATE", "corrupt")
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1024 || !bytes.HasPrefix(b, []byte("# GRUB Environment Block\nA_STATE=corrupt\nB_TRIES=2\n#")) {
		t.Fatalf("block %q", b[:80])
	}
	back, err := ParseEnv(b)
	if err != nil || back.Get("A_STATE") != "corrupt" || strings.Join(back.Names(), ",") != "A_STATE,B_TRIES" {
		t.Fatalf("parsed %v %v", back, err)
	}
	for name, bad := range map[string][]byte{
		"short":        b[:1000],
		"no header":    append([]byte("# GRUB Environment Blocx\n"), b[25:]...),
		"junk padding": append(append([]byte{}, b[:1020]...), 'x', '#', '#', '#'),
	} {
		if _, err := ParseEnv(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	e.Set("X", "a\nb")
	if _, err := e.Encode(); err == nil {
		t.Error("a newline in a value was written")
	}
	big := NewEnv()
	big.Set("X", strings.Repeat("y", 1000))
	if _, err := big.Encode(); err == nil || !strings.Contains(err.Error(), "holds 1024") {
		t.Errorf("an oversized block: %v", err)
	}
}

func TestSlotsRefuseWhatGRUBCannotCount(t *testing.T) {
	e := NewEnv()
	if err := SetDiskState(e, FactoryState(&Payload{Image: "os-a", SHA256: "ab"})); err != nil {
		t.Fatal(err)
	}
	d, err := DiskState(e)
	if err != nil || d.Slots[disk.SlotA].State != disk.Written || !d.Slots[disk.SlotA].Good || d.Slots[disk.SlotB].State != disk.Empty {
		t.Fatalf("factory state read back as %+v, %v", d, err)
	}
	d.Slots[disk.SlotB].TriesLeft = MaxTries + 1
	if err := SetDiskState(e, d); err == nil {
		t.Error("more tries than GRUB's chain counts were written")
	}
	e.Set("B_TRIES", "-1")
	if _, err := DiskState(e); err == nil || !strings.Contains(err.Error(), "B_TRIES") {
		t.Errorf("a negative count: %v", err)
	}
	e.Set("B_TRIES", "0")
	e.Set("A_STATE", "half")
	if _, err := DiskState(e); err == nil || !strings.Contains(err.Error(), "A_STATE") {
		t.Errorf("an unknown state: %v", err)
	}
}

func TestGrubConfigCountsEveryTry(t *testing.T) {
	s, err := GrubConfig(DefaultLayout(48), "console=ttyS0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`if [ "$B_TRIES" = "9" ]; then set B_TRIES=8`,
		`elif [ "$A_TRIES" = "1" ]; then set A_TRIES=0`,
		"save_env --file $prefix/grubenv A_TRIES",
		"linux (hd0,gpt2)/boot/vmlinuz console=ttyS0 upgradelab.source=disk upgradelab.slot=A upgradelab.trial=$trial",
		"linux (hd0,gpt6)/boot/vmlinuz console=ttyS0 upgradelab.source=recovery",
		`elif [ "$B_PRIO" -gt "$A_PRIO" ]; then set slot=B`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("grub.cfg lacks %q", want)
		}
	}
	if _, err := GrubConfig(Layout{}, ""); err == nil {
		t.Error("a layout without slots made a boot script")
	}
}

// A built disk has the layout's partitions, by name, where the guest will
// look for them, and its environment block where the host and the guest
// will edit it.
func TestBuildMakesTheDiskTheGuestReads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	payload := func(name string) Payload {
		src := filepath.Join(dir, name)
		os.MkdirAll(filepath.Join(src, "boot"), 0o755)
		for _, f := range []string{PayloadKernel, PayloadInitrd, PayloadManifest} {
			os.WriteFile(filepath.Join(src, f), []byte(name+f), 0o644)
		}
		p, err := MakePayload(ctx, src, name, filepath.Join(dir, name+".img"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, rec := payload("os-a"), payload("recovery")
	l := DefaultLayout(8)
	script, _ := GrubConfig(l, "")
	d, err := Build(ctx, filepath.Join(dir, "disk.img"), filepath.Join(dir, "work"), l, script, &a, rec)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parts, err := ReadGPT(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != len(l.Partitions) {
		t.Fatalf("%d partitions, want %d", len(parts), len(l.Partitions))
	}
	for i, spec := range l.Partitions {
		start, _ := l.StartMiB(spec.Name)
		p, err := Find(parts, spec.Name)
		if err != nil || p.Number != i+1 || p.Offset != int64(start)<<20 || p.Size != int64(spec.SizeMiB)<<20 {
			t.Errorf("partition %s: %+v %v", spec.Name, p, err)
		}
	}
	slotA, _ := Find(parts, PartSlotA)
	head := make([]byte, a.Size)
	f.ReadAt(head, slotA.Offset)
	if !bytes.Equal(head, mustRead(t, a.Path)) {
		t.Error("slot A does not hold the payload")
	}
	env, err := ReadEnv(d.Path, d.EnvOffset)
	if err != nil {
		t.Fatal(err)
	}
	state, err := DiskState(env)
	if err != nil || state.Slots[disk.SlotA].Checksum != a.SHA256 || !state.Slots[disk.SlotA].Good {
		t.Fatalf("factory block %+v %v", state, err)
	}
	esp, _ := Find(parts, PartESP)
	if off, _, err := FindEnv(f, esp.Offset, esp.Size); err != nil || off != d.EnvOffset {
		t.Errorf("the guest's search finds the block at %d (%v), the build wrote it at %d", off, err, d.EnvOffset)
	}

	big := a
	big.Size = 9 << 20
	if _, err := Build(ctx, filepath.Join(dir, "big.img"), filepath.Join(dir, "work2"), l, script, &big, rec); err == nil || !strings.Contains(err.Error(), "does not fit partition slot-a") {
		t.Errorf("an oversized payload: %v", err)
	}
}

func TestMissingToolsAreNamedWithTheirPackages(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := CheckTools()
	if err == nil || !strings.Contains(err.Error(), "mkfs.fat (Debian package dosfstools)") || !strings.Contains(err.Error(), "install-deps.sh installs") {
		t.Fatalf("CheckTools with an empty PATH: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
