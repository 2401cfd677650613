// Package disk models a server's A/B system disk the way RAUC and Flatcar
// do: two root slots with priority, remaining boot tries and a good flag; a
// bootloader that picks the best bootable slot and spends a try on an
// uncommitted one; a recovery partition when neither slot can boot; and
// persistent and OEM partitions that slot switches keep and a reset wipes.
//
// Disk is a plain value with no clock and no I/O, so the state machine is
// tested as a table; the lab persists it with Save and Load.
package disk

import (
	"errors"
	"fmt"

	"github.com/upgradelab/upgradelab/sim/statefile"
)

// SlotName is "A" or "B".
type SlotName string

const (
	SlotA SlotName = "A"
	SlotB SlotName = "B"
)

// Other is the slot that is not s.
func (s SlotName) Other() SlotName {
	if s == SlotA {
		return SlotB
	}
	return SlotA
}

// SlotState is what a slot's bytes hold.
type SlotState string

const (
	Empty   SlotState = "empty"
	Writing SlotState = "writing" // an image write is under way
	Written SlotState = "written" // a whole image, checksum verified
	Corrupt SlotState = "corrupt" // a write was cut off: unbootable
)

// Slot is one root slot and its bootloader variables.
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
}

func (s Slot) bootable() bool {
	return s.State == Written && (s.Good || s.TriesLeft > 0)
}

// BootSource says what the bootloader chose.
type BootSource string

const (
	FromSlot     BootSource = "slot"
	FromRecovery BootSource = "recovery"
)

// BootDecision is the bootloader's choice for one boot.
type BootDecision struct {
	Source BootSource `json:"source"`
	Slot   SlotName   `json:"slot,omitempty"`
	Image  string     `json:"image"`
	// Trial is true when the slot is not yet committed: this boot spent a try.
	Trial bool `json:"trial,omitempty"`
	// Reason explains a fallback or a recovery boot.
	Reason string `json:"reason,omitempty"`
}

// Disk is the whole system disk.
type Disk struct {
	Slots map[SlotName]*Slot `json:"slots"`
	// Booted is the slot the running OS came from ("" when not booted from
	// a slot).
	Booted SlotName `json:"booted,omitempty"`
	// Recovery is the image on the recovery partition.
	Recovery   string            `json:"recovery"`
	Persistent map[string]string `json:"persistent"`
	OEM        map[string]string `json:"oem"`
	// ConfigDrive holds the user data a provisioner wrote for the OS
	// (cloud-init's config drive).
	ConfigDrive []byte `json:"configDrive,omitempty"`
	// MetaData is the config drive's meta_data: local-hostname (the node
	// name) and provider-id, as a provisioner writes them per machine.
	MetaData map[string]string `json:"metaData,omitempty"`
	// RecoveryOnce makes the next boot use the recovery partition, as a
	// reset-based reprovisioning asks for.
	RecoveryOnce bool `json:"recoveryOnce,omitempty"`
}

// New is a factory-fresh disk: empty slots, a recovery image, empty data
// partitions.
func New(recoveryImage string) *Disk {
	return &Disk{
		Slots:      map[SlotName]*Slot{SlotA: {State: Empty}, SlotB: {State: Empty}},
		Recovery:   recoveryImage,
		Persistent: map[string]string{},
		OEM:        map[string]string{},
	}
}

// Errors a caller can act on.
var (
	ErrSlotBooted = errors.New("slot holds the running OS")
	ErrNotWritten = errors.New("slot holds no complete image")
	ErrNotWriting = errors.New("no write under way on slot")
	ErrNotBooted  = errors.New("not booted from a slot")
)

func (d *Disk) slot(name SlotName) (*Slot, error) {
	s, ok := d.Slots[name]
	if !ok {
		return nil, fmt.Errorf("no slot %q (slots are A and B)", name)
	}
	return s, nil
}

// BeginWrite starts writing image into a slot that is not running. The
// slot loses its old image and bootloader state at once, as a real write
// does: it is unbootable until FinishWrite.
func (d *Disk) BeginWrite(name SlotName, image, checksum string) error {
	s, err := d.slot(name)
	if err != nil {
		return err
	}
	if d.Booted == name {
		return fmt.Errorf("write slot %s: %w", name, ErrSlotBooted)
	}
	*s = Slot{State: Writing, Image: image, Checksum: checksum}
	return nil
}

// FinishWrite marks a slot's write complete. The slot still does not boot
// until Activate gives it tries.
func (d *Disk) FinishWrite(name SlotName) error {
	s, err := d.slot(name)
	if err != nil {
		return err
	}
	if s.State != Writing {
		return fmt.Errorf("finish write on slot %s (%s): %w", name, s.State, ErrNotWriting)
	}
	s.State = Written
	return nil
}

// PowerLoss cuts every write under way: those slots are corrupt.
func (d *Disk) PowerLoss() {
	for _, s := range d.Slots {
		if s.State == Writing {
			s.State = Corrupt
			s.Priority, s.TriesLeft, s.Good = 0, 0, false
		}
	}
	d.Booted = ""
}

// AbortWrite stops a write under way on one slot: the slot is corrupt.
func (d *Disk) AbortWrite(name SlotName) {
	if s, ok := d.Slots[name]; ok && s.State == Writing {
		s.State = Corrupt
		s.Priority, s.TriesLeft, s.Good = 0, 0, false
	}
}

// Activate makes a written slot the one to boot next, with tries boots to
// prove itself before the bootloader falls back.
func (d *Disk) Activate(name SlotName, tries int) error {
	s, err := d.slot(name)
	if err != nil {
		return err
	}
	if s.State != Written {
		return fmt.Errorf("activate slot %s (%s): %w", name, s.State, ErrNotWritten)
	}
	if tries < 1 {
		return fmt.Errorf("activate slot %s: tries must be at least 1, got %d", name, tries)
	}
	other := d.Slots[name.Other()]
	s.Priority = other.Priority + 1
	s.TriesLeft = tries
	s.Good = false
	return nil
}

// SelectBoot is the bootloader: the bootable slot with the highest
// priority boots, spending a try when it is not yet good; with none, the
// recovery partition boots.
func (d *Disk) SelectBoot() BootDecision {
	if d.RecoveryOnce {
		d.RecoveryOnce = false
		d.Booted = ""
		return BootDecision{Source: FromRecovery, Image: d.Recovery, Reason: "a recovery boot was requested"}
	}
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
		d.Booted = ""
		return BootDecision{Source: FromRecovery, Image: d.Recovery, Reason: joinReasons(reasons, "no bootable slot")}
	}
	s := d.Slots[best]
	dec := BootDecision{Source: FromSlot, Slot: best, Image: s.Image, Reason: joinReasons(reasons, "")}
	if !s.Good {
		s.TriesLeft--
		dec.Trial = true
	}
	d.Booted = best
	return dec
}

func joinReasons(reasons []string, fallback string) string {
	if len(reasons) == 0 {
		return fallback
	}
	out := reasons[0]
	for _, r := range reasons[1:] {
		out += "; " + r
	}
	return out
}

// Commit marks the running slot good after its health check passed; the
// other slot keeps its image as the fallback.
func (d *Disk) Commit() error {
	if d.Booted == "" {
		return fmt.Errorf("commit: %w", ErrNotBooted)
	}
	s := d.Slots[d.Booted]
	s.Good = true
	s.TriesLeft = 0
	return nil
}

// Shutdown records that no OS runs from the disk any more.
func (d *Disk) Shutdown() { d.Booted = "" }

// Erase wipes everything but the recovery partition: both slots, the
// persistent and OEM partitions and the config drive. A provisioner's
// metadata cleaning and a reset's reinstall both leave this, so the next
// owner of the host finds nothing of the last one.
func (d *Disk) Erase() {
	d.Persistent = map[string]string{}
	d.OEM = map[string]string{}
	d.ConfigDrive = nil
	d.MetaData = nil
	d.Slots = map[SlotName]*Slot{SlotA: {State: Empty}, SlotB: {State: Empty}}
	d.Booted = ""
	d.RecoveryOnce = false
}

// Save writes the disk to path atomically, so a harness killed mid-write
// loses nothing.
func (d *Disk) Save(path string) error { return statefile.Write(path, d) }

// Load reads a disk that Save wrote.
func Load(path string) (*Disk, error) {
	d := &Disk{}
	if err := statefile.Read(path, d); err != nil {
		return nil, err
	}
	for _, name := range []SlotName{SlotA, SlotB} {
		if d.Slots[name] == nil {
			return nil, fmt.Errorf("%s: slot %s missing", path, name)
		}
	}
	return d, nil
}
