package disk

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzContract drives both models through any sequence of the update
// contract's operations (a byte per operation) and checks what must hold
// after each, whatever the order: the bootloader never boots a root that
// is not whole, staging and its power cuts never touch the running root,
// Images agrees with the disk, an OSTree disk keeps at most Keep
// deployments, and Save/Load round-trips.
func FuzzContract(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0, 1, 2, 3})
	f.Add([]byte{0, 1, 6, 2, 0, 7, 2})
	f.Add([]byte{0, 1, 2, 3, 0, 1, 2, 2, 2, 4, 2, 8, 2, 9, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		for _, kind := range Kinds {
			d, err := New(kind, "recovery", 0)
			if err != nil {
				t.Fatal(err)
			}
			d.RootMiB = map[Kind]int{AB: 4096, OSTree: 8192}[kind]
			run := fuzzRun{d: d, kind: kind}
			for i, op := range ops {
				run.do(t, i, op)
				check(t, d, kind, i)
			}
			checkRoundTrip(t, d, kind)
		}
	})
}

// fuzzRun is one disk under FuzzContract's operations: the root the last
// stage began and how many images were staged so far.
type fuzzRun struct {
	d      *Disk
	kind   Kind
	last   RootID
	images int
}

// do applies operation op (the i-th) and checks what must hold at once
// after it: staging and its power cuts leave the running root alone, a
// boot is of a whole root.
func (r *fuzzRun) do(t *testing.T, i int, op byte) {
	t.Helper()
	d, kind := r.d, r.kind
	before := d.Images().Booted
	switch op % 10 {
	case 0: // stage a new image whole
		r.images++
		img := fmt.Sprintf("os-%d", r.images)
		if id, err := d.BeginStage(img, "sha-"+img, 1000+int(op/10)*300); err == nil {
			r.last = id
			if err := d.FinishStage(id); err != nil {
				t.Fatalf("%s op %d: finish the stage just begun: %v", kind, i, err)
			}
		}
		if b := d.Images().Booted; before != nil && (b == nil || *b != *before) {
			t.Fatalf("%s op %d: staging changed the running root %+v into %+v", kind, i, before, b)
		}
	case 1:
		_ = d.Activate(r.last, int(op/10)%3+1)
	case 2: // a graceful reboot, or (op/10 odd) a hard reset
		if op/10%2 == 0 {
			if _, due := d.BeginFinalise(); due {
				if err := d.FinishFinalise(); err != nil {
					t.Fatalf("%s op %d: finalise: %v", kind, i, err)
				}
			}
		}
		d.PowerLoss()
		dec := d.SelectBoot()
		if dec.Source == FromRoot {
			r := d.Images().Root(dec.Root)
			if r == nil || r.State != Written || r.Image != dec.Image {
				t.Fatalf("%s op %d: booted %+v from %+v", kind, i, dec, r)
			}
		}
	case 3:
		_ = d.Commit()
	case 4: // a write cut by a power loss
		r.images++
		img := fmt.Sprintf("os-%d", r.images)
		if id, err := d.BeginStage(img, "sha-"+img, 1000+int(op/10)*300); err == nil {
			r.last = id
		}
		d.PowerLoss()
		if r := d.Images().Root(before.idOr("")); before != nil && (r == nil || r.Image != before.Image || r.State != Written) {
			t.Fatalf("%s op %d: a cut write changed the running root %+v into %+v", kind, i, before, r)
		}
	case 5:
		_ = d.Rollback()
	case 6: // a power cut while the shutdown finalises
		d.BeginFinalise()
		d.PowerLoss()
	case 7:
		_ = d.WriteEtc("/etc/x", fmt.Sprint(i))
	case 8:
		d.RecoveryOnce = true
	case 9:
		d.Erase()
	}
}

// checkRoundTrip saves the disk and loads it back: the same images.
func checkRoundTrip(t *testing.T, d *Disk, kind Kind) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.json")
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("%s: load what was saved: %v", kind, err)
	}
	if !reflect.DeepEqual(got.Images(), d.Images()) {
		t.Fatalf("%s: Load(Save(d)).Images() = %+v, want %+v", kind, got.Images(), d.Images())
	}
}

func check(t *testing.T, d *Disk, kind Kind, i int) {
	t.Helper()
	im := d.Images()
	if im.Kind != kind {
		t.Fatalf("%s op %d: Images says kind %s", kind, i, im.Kind)
	}
	if d.Booted != "" && (im.Booted == nil || im.Booted.ID != d.Booted) {
		t.Fatalf("%s op %d: booted %s, Images says %+v", kind, i, d.Booted, im.Booted)
	}
	if fb := im.Fallback; fb != nil && (!fb.Committed || fb.State != Written || fb.ID == d.Booted) {
		t.Fatalf("%s op %d: fallback %+v", kind, i, fb)
	}
	seen := map[RootID]bool{}
	for _, r := range im.Roots {
		if seen[r.ID] {
			t.Fatalf("%s op %d: root %s twice in %+v", kind, i, r.ID, im.Roots)
		}
		seen[r.ID] = true
		if r.Committed && r.State != Written {
			t.Fatalf("%s op %d: a committed root that is not whole: %+v", kind, i, r)
		}
	}
	if kind == OSTree && len(d.Tree.Deployments) > d.Tree.Keep {
		t.Fatalf("%s op %d: %d deployments, keep %d", kind, i, len(d.Tree.Deployments), d.Tree.Keep)
	}
	used := 0
	switch kind {
	case AB:
		for _, s := range d.Slots {
			if s.SizeMiB > d.RootMiB {
				t.Fatalf("%s op %d: a slot of %d MiB holds %d MiB", kind, i, d.RootMiB, s.SizeMiB)
			}
		}
	case OSTree:
		for _, dep := range d.Tree.Deployments {
			used += dep.SizeMiB
		}
		if s := d.Tree.Staged; s != nil {
			used += s.SizeMiB
		}
		if used > d.RootMiB {
			t.Fatalf("%s op %d: %d MiB of deployments in a %d MiB root", kind, i, used, d.RootMiB)
		}
	}
}

func (r *Root) idOr(def RootID) RootID {
	if r == nil {
		return def
	}
	return r.ID
}
