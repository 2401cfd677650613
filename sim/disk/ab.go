package disk

import (
	"cmp"
	"fmt"
	"strings"
)

// SlotName is "A" or "B".
type SlotName = RootID

const (
	SlotA SlotName = "A"
	SlotB SlotName = "B"
)

func otherSlot(s SlotName) SlotName {
	if s == SlotA {
		return SlotB
	}
	return SlotA
}

// Slot is one root slot of an A/B disk and its bootloader variables.
type Slot struct {
	State SlotState `json:"state"`
	// Image names what was (or is being) written; Checksum is its sha256.
	Image    string `json:"image,omitempty"`
	Checksum string `json:"checksum,omitempty"`
	// Priority orders bootable slots; the highest boots.
	Priority int `json:"priority"`
	// TriesLeft is how many more boots an uncommitted slot gets.
	TriesLeft int `json:"triesLeft"`
	// Good is set by a health commit after a successful boot.
	Good bool `json:"good"`
	// SizeMiB is the image's size.
	SizeMiB int `json:"sizeMiB,omitempty"`
	// Etc is the slot's /etc: its image's, plus what the admin edited
	// while it ran. A slot switch does not carry edits over (what must
	// survive belongs on the persistent partition).
	Etc map[string]string `json:"etc,omitempty"`
}

func (s Slot) bootable() bool {
	return s.State == Written && (s.Good || s.TriesLeft > 0)
}

func emptySlots() map[SlotName]*Slot {
	return map[SlotName]*Slot{SlotA: {State: Empty}, SlotB: {State: Empty}}
}

// abModel is the A/B disk, RAUC-style.
type abModel struct{}

func (abModel) slot(d *Disk, name RootID) (*Slot, error) {
	s, ok := d.Slots[name]
	if !ok {
		return nil, fmt.Errorf("slot %q (slots are A and B): %w", name, ErrNoSuchRoot)
	}
	return s, nil
}

// beginStage writes into the slot that is not running; with none running
// (a deploy ramdisk, recovery), into the slot the bootloader would boot
// last, so a committed image stays as the fallback (A on a blank disk).
func (m abModel) beginStage(d *Disk, image, checksum string, sizeMiB int) (RootID, error) {
	target := SlotA
	if d.Booted != "" {
		target = otherSlot(d.Booted)
	} else if a, b := d.Slots[SlotA], d.Slots[SlotB]; a.bootable() && (!b.bootable() || a.Priority > b.Priority) {
		target = SlotB
	}
	s, err := m.slot(d, target)
	if err != nil {
		return "", err
	}
	if d.RootMiB > 0 && sizeMiB > d.RootMiB {
		return "", fmt.Errorf("write %s (%d MiB) into slot %s, which holds %d MiB: %w", image, sizeMiB, target, d.RootMiB, ErrNoSpace)
	}
	// The slot loses its old image and bootloader state at once, as a
	// real write does.
	*s = Slot{State: Writing, Image: image, Checksum: checksum, SizeMiB: sizeMiB, Etc: ImageEtc(image)}
	return target, nil
}

func (m abModel) finishStage(d *Disk, id RootID) error {
	s, err := m.slot(d, id)
	if err != nil {
		return err
	}
	if s.State != Writing {
		return fmt.Errorf("finish write on slot %s (%s): %w", id, s.State, ErrNotWriting)
	}
	s.State = Written
	return nil
}

func corrupt(s *Slot) {
	s.State = Corrupt
	s.Priority, s.TriesLeft, s.Good = 0, 0, false
}

func (abModel) abortStage(d *Disk, id RootID) {
	if s, ok := d.Slots[id]; ok && s.State == Writing {
		corrupt(s)
	}
}

func (m abModel) activate(d *Disk, id RootID, tries int) error {
	s, err := m.slot(d, id)
	if err != nil {
		return err
	}
	if s.State != Written {
		return fmt.Errorf("activate slot %s (%s): %w", id, s.State, ErrNotWritten)
	}
	s.Priority = d.Slots[otherSlot(id)].Priority + 1
	s.TriesLeft = tries
	s.Good = false
	return nil
}

func (m abModel) rollback(d *Disk) error {
	fb := m.images(d).Fallback
	if fb == nil {
		return fmt.Errorf("roll back: %w", ErrNoFallback)
	}
	s := d.Slots[fb.ID]
	s.Priority = d.Slots[otherSlot(fb.ID)].Priority + 1
	return nil
}

func (abModel) beginFinalise(*Disk) (RootID, bool) { return "", false }
func (abModel) finishFinalise(*Disk) error         { return nil }

// selectBoot: the bootable slot with the highest priority boots, spending
// a try when it is not yet good.
func (abModel) selectBoot(d *Disk) BootDecision {
	var best SlotName
	var reasons []string
	for _, name := range []SlotName{SlotA, SlotB} {
		s := d.Slots[name]
		if !s.bootable() {
			if s.State == Written && !s.Good && s.Image != "" && s.Priority > 0 {
				reasons = append(reasons, fmt.Sprintf("slot %s (%s) has no tries left", name, s.Image))
			} else if s.State == Corrupt {
				reasons = append(reasons, fmt.Sprintf("slot %s is corrupt", name))
			}
			continue
		}
		if best == "" || s.Priority > d.Slots[best].Priority {
			best = name
		}
	}
	if best == "" {
		return BootDecision{Source: FromRecovery, Image: d.Recovery, Reason: joinReasons(reasons, "no bootable slot")}
	}
	s := d.Slots[best]
	dec := BootDecision{Source: FromRoot, Root: best, Image: s.Image, Reason: joinReasons(reasons, "")}
	if !s.Good {
		s.TriesLeft--
		dec.Trial = true
	}
	return dec
}

func (abModel) commit(d *Disk) error {
	s := d.Slots[d.Booted]
	s.Good = true
	s.TriesLeft = 0
	return nil
}

func (abModel) powerLoss(d *Disk) []Loss {
	var cut []Loss
	for _, name := range []SlotName{SlotA, SlotB} {
		if s := d.Slots[name]; s.State == Writing {
			corrupt(s)
			cut = append(cut, Loss{Reason: "WriteInterrupted", Message: fmt.Sprintf("power lost during the write of slot %s (%s): the slot is corrupt", name, s.Image)})
		}
	}
	return cut
}

func (abModel) erase(d *Disk) { d.Slots = emptySlots() }

func (abModel) images(d *Disk) Images {
	im := Images{Kind: AB}
	for _, name := range []SlotName{SlotA, SlotB} {
		s := d.Slots[name]
		im.Roots = append(im.Roots, Root{ID: name, State: s.State, Image: s.Image, Checksum: s.Checksum, Committed: s.Good, TriesLeft: s.TriesLeft})
	}
	for i := range im.Roots {
		r := &im.Roots[i]
		switch {
		case r.ID == d.Booted:
			im.Booted = r
		case r.State == Writing || (r.State == Written && !r.Committed):
			im.Staged = r
		case r.State == Written && r.Committed:
			im.Fallback = r
		}
	}
	return im
}

func (abModel) etc(d *Disk, id RootID) map[string]string {
	s := d.Slots[id]
	if s == nil {
		return map[string]string{}
	}
	if s.Etc == nil {
		s.Etc = ImageEtc(s.Image)
	}
	return s.Etc
}

func (abModel) fileName(id RootID) string { return "slot-" + string(id) + ".img" }

// joinReasons is why a bootloader passed roots over, or fallback when it
// passed none.
func joinReasons(reasons []string, fallback string) string {
	return cmp.Or(strings.Join(reasons, "; "), fallback)
}
