package disk

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

// step is one thing that happens to a disk, and what the bootloader must
// choose when the step is a boot.
type step struct {
	do       string // write A img | activate A n | boot | commit | powerloss | begin A img | reset
	slot     SlotName
	image    string
	tries    int
	want     *BootDecision
	wantErr  error
	wantSlot *Slot // state of `slot` after the step
}

func TestABStateMachine(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "install: a fresh disk boots recovery until a slot is written and activated",
			steps: []step{
				{do: "boot", want: &BootDecision{Source: FromRecovery, Image: "recovery-1", Reason: "no bootable slot"}},
				{do: "write", slot: SlotA, image: "os-1"},
				{do: "boot", want: &BootDecision{Source: FromRecovery, Image: "recovery-1", Reason: "no bootable slot"}},
				{do: "activate", slot: SlotA, tries: 3},
				{do: "boot", slot: SlotA, want: &BootDecision{Source: FromSlot, Slot: SlotA, Image: "os-1", Trial: true},
					wantSlot: &Slot{State: Written, Image: "os-1", Priority: 1, TriesLeft: 2}},
				{do: "commit", slot: SlotA, wantSlot: &Slot{State: Written, Image: "os-1", Priority: 1, Good: true}},
				{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotA, Image: "os-1"}},
			},
		},
		{
			name: "update: the new slot is tried, committed, and the old one stays as fallback",
			steps: append(installed("os-1"),
				step{do: "write", slot: SlotB, image: "os-2"},
				step{do: "activate", slot: SlotB, tries: 2},
				step{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotB, Image: "os-2", Trial: true}},
				step{do: "commit", slot: SlotB, wantSlot: &Slot{State: Written, Image: "os-2", Priority: 2, Good: true}},
				step{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotB, Image: "os-2"}},
			),
		},
		{
			name: "fallback: a slot that never commits uses its tries, then the old good slot boots",
			steps: append(installed("os-1"),
				step{do: "write", slot: SlotB, image: "os-bad"},
				step{do: "activate", slot: SlotB, tries: 2},
				step{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotB, Image: "os-bad", Trial: true}},
				step{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotB, Image: "os-bad", Trial: true}},
				step{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotA, Image: "os-1", Reason: "slot B (os-bad) has no tries left"}},
			),
		},
		{
			name: "recovery: neither slot can boot",
			steps: []step{
				{do: "write", slot: SlotA, image: "os-bad"},
				{do: "activate", slot: SlotA, tries: 1},
				{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotA, Image: "os-bad", Trial: true}},
				{do: "begin", slot: SlotB, image: "os-2"},
				{do: "powerloss", slot: SlotB, wantSlot: &Slot{State: Corrupt, Image: "os-2"}},
				{do: "boot", want: &BootDecision{Source: FromRecovery, Image: "recovery-1", Reason: "slot A (os-bad) has no tries left; slot B is corrupt"}},
			},
		},
		{
			name: "a write cut by power loss leaves the slot corrupt and it cannot be activated",
			steps: append(installed("os-1"),
				step{do: "begin", slot: SlotB, image: "os-2"},
				step{do: "powerloss", slot: SlotB, wantSlot: &Slot{State: Corrupt, Image: "os-2"}},
				step{do: "activate", slot: SlotB, tries: 3, wantErr: ErrNotWritten},
				step{do: "boot", want: &BootDecision{Source: FromSlot, Slot: SlotA, Image: "os-1", Reason: "slot B is corrupt"}},
			),
		},
		{
			name: "the running slot cannot be overwritten",
			steps: append(installed("os-1"),
				step{do: "begin", slot: SlotA, image: "os-2", wantErr: ErrSlotBooted},
			),
		},
		{
			name: "commit needs a booted slot",
			steps: []step{
				{do: "commit", wantErr: ErrNotBooted},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New("recovery-1")
			for i, s := range tt.steps {
				var err error
				var got BootDecision
				switch s.do {
				case "write":
					if err = d.BeginWrite(s.slot, s.image, "sha256:"+s.image); err == nil {
						err = d.FinishWrite(s.slot)
					}
				case "begin":
					err = d.BeginWrite(s.slot, s.image, "")
				case "activate":
					err = d.Activate(s.slot, s.tries)
				case "boot":
					d.Shutdown()
					got = d.SelectBoot()
				case "commit":
					err = d.Commit()
				case "powerloss":
					d.PowerLoss()
				default:
					t.Fatalf("step %d: unknown step %q", i, s.do)
				}
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d (%s %s): error %v, want %v", i, s.do, s.slot, err, s.wantErr)
				}
				if s.want != nil && !reflect.DeepEqual(got, *s.want) {
					t.Fatalf("step %d (boot): got %+v, want %+v", i, got, *s.want)
				}
				if s.wantSlot != nil {
					gotSlot := *d.Slots[s.slot]
					gotSlot.Checksum = ""
					if !reflect.DeepEqual(gotSlot, *s.wantSlot) {
						t.Fatalf("step %d (%s): slot %s = %+v, want %+v", i, s.do, s.slot, gotSlot, *s.wantSlot)
					}
				}
			}
		})
	}
}

// installed is a disk with image in slot A, booted and committed.
func installed(image string) []step {
	return []step{
		{do: "write", slot: SlotA, image: image},
		{do: "activate", slot: SlotA, tries: 1},
		{do: "boot"},
		{do: "commit"},
	}
}

func TestPartitionsSurviveSlotSwitchAndResetWipesThem(t *testing.T) {
	d := New("recovery-1")
	for _, s := range installed("os-1") {
		if s.do == "write" {
			d.BeginWrite(s.slot, s.image, "")
			d.FinishWrite(s.slot)
		}
	}
	d.Activate(SlotA, 1)
	d.SelectBoot()
	d.Commit()
	d.Persistent["marker"] = "kept"
	d.OEM["bmc-user"] = "oem"
	d.BeginWrite(SlotB, "os-2", "")
	d.FinishWrite(SlotB)
	d.Activate(SlotB, 1)
	d.Shutdown()
	if got := d.SelectBoot(); got.Slot != SlotB {
		t.Fatalf("booted %+v, want slot B", got)
	}
	if d.Persistent["marker"] != "kept" || d.OEM["bmc-user"] != "oem" {
		t.Fatalf("a slot switch lost data: persistent %v, oem %v", d.Persistent, d.OEM)
	}
	d.ConfigDrive = []byte("#cloud-config")
	d.Erase()
	if len(d.Persistent) != 0 || len(d.OEM) != 0 || d.ConfigDrive != nil {
		t.Fatalf("erase kept data: persistent %v, oem %v, config drive %q", d.Persistent, d.OEM, d.ConfigDrive)
	}
	if d.Slots[SlotA].State != Empty || d.Slots[SlotB].State != Empty || d.Recovery != "recovery-1" {
		t.Fatalf("erase: slots %+v %+v, recovery %q; want both empty and recovery kept", d.Slots[SlotA], d.Slots[SlotB], d.Recovery)
	}
	if got := d.SelectBoot(); got.Source != FromRecovery {
		t.Fatalf("an erased disk booted %+v, want recovery", got)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	d := New("recovery-1")
	d.BeginWrite(SlotA, "os-1", "abc")
	d.Persistent["k"] = "v"
	path := filepath.Join(t.TempDir(), "disk.json")
	if err := d.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("Load(Save(d)) = %+v, want %+v", got, d)
	}
}
