package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

func TestKernelParams(t *testing.T) {
	got := KernelParams("BOOT_IMAGE=/boot/vmlinuz console=ttyS0 upgradelab.source=disk upgradelab.slot=B upgradelab.trial=1 quiet")
	if len(got) != 3 || got[diskimage.ParamSlot] != "B" || got[diskimage.ParamTrial] != "1" {
		t.Fatalf("%v", got)
	}
}

// builtDisk is a factory disk file, which the guest's Disk opens as it
// opens /dev/vda.
func builtDisk(t *testing.T) (string, diskimage.Payload) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "os-a")
	os.MkdirAll(filepath.Join(src, "boot"), 0o755)
	for _, f := range []string{diskimage.PayloadKernel, diskimage.PayloadInitrd, diskimage.PayloadManifest} {
		os.WriteFile(filepath.Join(src, f), []byte(f), 0o644)
	}
	a, err := diskimage.MakePayload(ctx, src, "os-a", filepath.Join(dir, "os-a.img"))
	if err != nil {
		t.Fatal(err)
	}
	l := diskimage.DefaultLayout(8)
	script, _ := diskimage.GrubConfig(l, "")
	d, err := diskimage.Build(ctx, filepath.Join(dir, "disk.img"), filepath.Join(dir, "work"), l, script, &a, a)
	if err != nil {
		t.Fatal(err)
	}
	return d.Path, a
}

func TestStageWritesTheInactiveSlotAndRecordsItForGRUB(t *testing.T) {
	path, _ := builtDisk(t)
	image := []byte(strings.Repeat("os-b payload ", 100000))
	sum := sha256.Sum256(image)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(image)))
		w.Write(image)
	}))
	defer srv.Close()

	d, err := OpenDisk(path, disk.SlotA)
	if err != nil {
		t.Fatal(err)
	}
	var seen []Progress
	root, err := d.Stage(context.Background(), srv.Client(), srv.URL+"/os-b.img", hex.EncodeToString(sum[:]), func(p Progress) { seen = append(seen, p) })
	if err != nil || root != disk.SlotB {
		t.Fatalf("stage: %v %v", root, err)
	}
	if len(seen) == 0 || seen[len(seen)-1].Written != int64(len(image)) {
		t.Errorf("progress %v", seen)
	}
	if err := d.Activate(disk.SlotB, 2); err != nil {
		t.Fatal(err)
	}
	if err := d.Activate(disk.SlotB, diskimage.MaxTries+1); err == nil {
		t.Error("more tries than GRUB counts were accepted")
	}
	// What GRUB will read: the block on the disk, not the guest's memory.
	f, _ := os.Open(path)
	defer f.Close()
	parts, _ := diskimage.ReadGPT(f)
	esp, _ := diskimage.Find(parts, diskimage.PartESP)
	_, env, err := diskimage.FindEnv(f, esp.Offset, esp.Size)
	if err != nil {
		t.Fatal(err)
	}
	if env.Get("B_STATE") != "written" || env.Get("B_TRIES") != "2" || env.Get("B_PRIO") != "2" || env.Get("B_GOOD") != "0" || env.Get("B_IMAGE") != "os-b" {
		t.Fatalf("block after stage and activate: B=%s/%s/%s/%s/%s", env.Get("B_STATE"), env.Get("B_TRIES"), env.Get("B_PRIO"), env.Get("B_GOOD"), env.Get("B_IMAGE"))
	}
	slotB, _ := diskimage.Find(parts, diskimage.PartSlotB)
	got := make([]byte, len(image))
	f.ReadAt(got, slotB.Offset)
	if string(got) != string(image) {
		t.Error("slot B does not hold the image")
	}

	// A wrong checksum leaves the slot corrupt, never written.
	if _, err := d.Stage(context.Background(), srv.Client(), srv.URL+"/os-b.img", strings.Repeat("0", 64), nil); err == nil {
		t.Fatal("a payload with the wrong checksum was staged")
	}
	im, _ := d.Images()
	if r := im.Root(disk.SlotB); r.State != disk.Corrupt {
		t.Errorf("slot B after a bad checksum: %s", r.State)
	}
}

func TestAWriteCutByAPowerLossIsCorruptAtTheNextBoot(t *testing.T) {
	path, _ := builtDisk(t)
	// The guest of the boot that lost power marked B writing and died.
	d, _ := OpenDisk(path, disk.SlotA)
	if err := d.update(func(m *disk.Disk) error { _, err := m.BeginStage("os-b", "ab", 1); return err }); err != nil {
		t.Fatal(err)
	}
	next, err := OpenDisk(path, disk.SlotA)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := next.RecoverInterruptedWrites()
	if err != nil || len(cut) != 1 || cut[0] != disk.SlotB {
		t.Fatalf("recovered %v %v", cut, err)
	}
	im, _ := next.Images()
	if im.Root(disk.SlotB).State != disk.Corrupt || im.Root(disk.SlotA).State != disk.Written {
		t.Errorf("images %+v", im.Roots)
	}
}

func TestAnImageLargerThanTheSlotIsRefusedBeforeAnyWrite(t *testing.T) {
	path, _ := builtDisk(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "9437184") // 9 MiB into an 8 MiB slot
		w.WriteHeader(200)
	}))
	defer srv.Close()
	d, _ := OpenDisk(path, disk.SlotA)
	_, err := d.Stage(context.Background(), srv.Client(), srv.URL+"/big.img", strings.Repeat("0", 64), nil)
	if !errors.Is(err, disk.ErrNoSpace) {
		t.Fatalf("an oversized image: %v", err)
	}
	im, _ := d.Images()
	if im.Root(disk.SlotB).State != disk.Empty {
		t.Errorf("slot B after a refused stage: %s", im.Root(disk.SlotB).State)
	}
}

func TestEraseZeroesTheSlotsOnlyFromOutsideThem(t *testing.T) {
	path, _ := builtDisk(t)
	fromA, _ := OpenDisk(path, disk.SlotA)
	if err := fromA.Erase(); !errors.Is(err, disk.ErrNotBooted) {
		t.Fatalf("an OS running from slot A erased its disk: %v", err)
	}
	fromRecovery, _ := OpenDisk(path, "")
	if err := fromRecovery.Erase(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	parts, _ := diskimage.ReadGPT(f)
	a, _ := diskimage.Find(parts, diskimage.PartSlotA)
	head := make([]byte, 4096)
	f.ReadAt(head, a.Offset)
	if strings.Trim(string(head), "\x00") != "" {
		t.Error("slot A's filesystem survived the erase")
	}
	im, _ := fromRecovery.Images()
	if im.Root(disk.SlotA).State != disk.Empty {
		t.Errorf("slot A after the erase: %s", im.Root(disk.SlotA).State)
	}
}
