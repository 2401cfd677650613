package diskimage

import (
	"fmt"
	"strconv"

	"github.com/upgradelab/upgradelab/sim/disk"
)

// MaxTries is the most boot tries an activation may give a slot: GRUB's
// script has no arithmetic, so it lowers the count through an if-chain of
// this length.
const MaxTries = 9

// The environment variables of one slot X ("A" or "B"): X_STATE (sim/disk's
// SlotState), X_PRIO, X_TRIES, X_GOOD ("1" once committed), X_IMAGE,
// X_SHA256 and X_SIZE (bytes of payload). GRUB reads STATE, PRIO, TRIES
// and GOOD; the rest is the guest's record of what the slot holds.
func slotVar(slot disk.SlotName, field string) string { return string(slot) + "_" + field }

// recoveryOnce is the variable that makes GRUB boot the recovery
// partition once (sim/disk's RecoveryOnce); GRUB clears it as it does so.
const recoveryOnce = "RECOVERY_ONCE"

// DiskState reads the A/B state from an environment block into sim/disk's
// model, so the guest applies the update contract with the model's own
// rules and GRUB, not Go, decides each boot. Only the bootloader's part of
// the disk is there: slots and the one-time recovery boot.
func DiskState(e *Env) (*disk.Disk, error) {
	slots, err := slotsOf(e)
	if err != nil {
		return nil, err
	}
	return &disk.Disk{Kind: disk.AB, Slots: slots, RecoveryOnce: e.Get(recoveryOnce) == "1"}, nil
}

// SetDiskState writes the model's bootloader part back into the block.
func SetDiskState(e *Env, d *disk.Disk) error {
	once := "0"
	if d.RecoveryOnce {
		once = "1"
	}
	e.Set(recoveryOnce, once)
	return setSlots(e, d.Slots)
}

func slotsOf(e *Env) (map[disk.SlotName]*disk.Slot, error) {
	slots := map[disk.SlotName]*disk.Slot{}
	for _, name := range []disk.SlotName{disk.SlotA, disk.SlotB} {
		s := &disk.Slot{
			State:    disk.SlotState(e.Get(slotVar(name, "STATE"))),
			Image:    e.Get(slotVar(name, "IMAGE")),
			Checksum: e.Get(slotVar(name, "SHA256")),
			Good:     e.Get(slotVar(name, "GOOD")) == "1",
		}
		switch s.State {
		case disk.Empty, disk.Writing, disk.Written, disk.Corrupt:
		case "":
			s.State = disk.Empty
		default:
			return nil, fmt.Errorf("grubenv %s=%q: not a slot state", slotVar(name, "STATE"), s.State)
		}
		var err error
		if s.Priority, err = intVar(e, slotVar(name, "PRIO")); err != nil {
			return nil, err
		}
		if s.TriesLeft, err = intVar(e, slotVar(name, "TRIES")); err != nil {
			return nil, err
		}
		if s.TriesLeft > MaxTries {
			return nil, fmt.Errorf("grubenv %s=%d: GRUB counts at most %d tries", slotVar(name, "TRIES"), s.TriesLeft, MaxTries)
		}
		slots[name] = s
	}
	return slots, nil
}

func intVar(e *Env, name string) (int, error) {
	v := e.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("grubenv %s=%q: not a count", name, v)
	}
	return n, nil
}

func setSlots(e *Env, slots map[disk.SlotName]*disk.Slot) error {
	for _, name := range []disk.SlotName{disk.SlotA, disk.SlotB} {
		s := slots[name]
		if s == nil {
			return fmt.Errorf("slot %s missing", name)
		}
		if s.TriesLeft > MaxTries {
			return fmt.Errorf("slot %s: %d tries, GRUB counts at most %d", name, s.TriesLeft, MaxTries)
		}
		good := "0"
		if s.Good {
			good = "1"
		}
		e.Set(slotVar(name, "STATE"), string(s.State))
		e.Set(slotVar(name, "PRIO"), strconv.Itoa(s.Priority))
		e.Set(slotVar(name, "TRIES"), strconv.Itoa(s.TriesLeft))
		e.Set(slotVar(name, "GOOD"), good)
		e.Set(slotVar(name, "IMAGE"), s.Image)
		e.Set(slotVar(name, "SHA256"), s.Checksum)
	}
	return nil
}
