package diskimage

import "fmt"

// SectorSize is the disk's logical sector size.
const SectorSize = 512

// Partition names, as GPT partition labels. The guest finds its partitions
// by these, never by number.
const (
	PartESP        = "esp"
	PartSlotA      = "slot-a"
	PartSlotB      = "slot-b"
	PartPersistent = "persistent"
	PartOEM        = "oem"
	PartRecovery   = "recovery"
)

// GPT partition type GUIDs.
const (
	typeESP   = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
	typeLinux = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
)

// PartitionSpec is one partition of the layout.
type PartitionSpec struct {
	Name    string
	Type    string
	SizeMiB int
}

// Layout is the partition table, in disk order. GRUB names partitions by
// number, so grub.cfg is generated from the same table.
type Layout struct {
	Partitions []PartitionSpec
}

// DefaultLayout sizes each slot to hold slotMiB of image.
func DefaultLayout(slotMiB int) Layout {
	return Layout{Partitions: []PartitionSpec{
		{PartESP, typeESP, 16},
		{PartSlotA, typeLinux, slotMiB},
		{PartSlotB, typeLinux, slotMiB},
		{PartPersistent, typeLinux, 8},
		{PartOEM, typeLinux, 4},
		{PartRecovery, typeLinux, slotMiB},
	}}
}

// firstMiB is where the first partition starts (1 MiB, for alignment and
// the primary GPT); the backup GPT takes the last MiB.
const firstMiB = 1

// Number is a partition's GPT number (1-based), as GRUB's (hd0,gptN).
func (l Layout) Number(name string) (int, error) {
	for i, p := range l.Partitions {
		if p.Name == name {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("layout has no partition %q", name)
}

// StartMiB is where a partition starts.
func (l Layout) StartMiB(name string) (int, error) {
	at := firstMiB
	for _, p := range l.Partitions {
		if p.Name == name {
			return at, nil
		}
		at += p.SizeMiB
	}
	return 0, fmt.Errorf("layout has no partition %q", name)
}

// SizeMiB is the whole disk's size.
func (l Layout) SizeMiB() int {
	n := firstMiB + 1
	for _, p := range l.Partitions {
		n += p.SizeMiB
	}
	return n
}

// sfdiskScript is the partition table as sfdisk's input.
func (l Layout) sfdiskScript() string {
	s := "label: gpt\nunit: sectors\nfirst-lba: 2048\n"
	at := firstMiB
	for _, p := range l.Partitions {
		s += fmt.Sprintf("start=%d, size=%d, type=%s, name=%q\n", at*2048, p.SizeMiB*2048, p.Type, p.Name)
		at += p.SizeMiB
	}
	return s
}
