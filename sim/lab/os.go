package lab

import (
	"fmt"
	"maps"

	"github.com/upgradelab/upgradelab/sim/disk"
)

// What the OS on a host (the agent) and a provisioner do to its disk
// besides writing slots.

// WriteConfigDrive stores the OS's user data and meta data on the config
// drive, as a provisioner does beside the image.
func (h *Host) WriteConfigDrive(userData []byte, metaData map[string]string) error {
	return h.diskOp("ConfigDriveWritten", fmt.Sprintf("%d bytes of user data and %d meta data keys on the config drive", len(userData), len(metaData)), func(d *disk.Disk) error {
		d.ConfigDrive = append([]byte(nil), userData...)
		d.MetaData = maps.Clone(metaData)
		return nil
	})
}

// MetaData reads the config drive's meta data.
func (h *Host) MetaData() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.disk.MetaData)
}

// UserData reads the config drive.
func (h *Host) UserData() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.disk.ConfigDrive...)
}

// RequestRecoveryBoot makes the next boot use the recovery partition.
func (h *Host) RequestRecoveryBoot() error {
	if err := h.machine.recoveryOnce(); err != nil {
		return err
	}
	return h.diskOp("RecoveryBootRequested", "the next boot uses the recovery partition", func(d *disk.Disk) error {
		d.RecoveryOnce = true
		return nil
	})
}

// WipeData is a reset's wipe and reinstall: persistent and OEM
// partitions, config drive and both slots (disk.Erase). Only an OS running
// from the recovery partition may, so a host that holds a live workload is
// never wiped by mistake.
func (h *Host) WipeData() error {
	if st := h.Status(); st.OS != nil && st.OS.Source == FromRecovery {
		if err := h.machine.erase(); err != nil {
			return err
		}
	}
	return h.diskOp("DataWiped", "persistent, OEM, config drive and slots wiped for a reinstall", func(d *disk.Disk) error {
		if h.os == nil || h.os.Source != FromRecovery {
			return fmt.Errorf("wipe: only the recovery OS wipes data: %w", ErrNotRunning)
		}
		d.Erase()
		return nil
	})
}

// EraseDisk is metadata cleaning (disk.Erase); only a deploy ramdisk
// cleans, so a disk an installed OS runs from is never erased under it.
func (h *Host) EraseDisk() error {
	if st := h.Status(); st.OS.DeployRamdisk() {
		if err := h.machine.erase(); err != nil {
			return err
		}
	}
	return h.diskOp("DiskErased", "slots, data partitions and config drive erased", func(d *disk.Disk) error {
		if !h.os.DeployRamdisk() {
			return fmt.Errorf("erase: only a deploy ramdisk erases the disk: %w", ErrNotRunning)
		}
		d.Erase()
		return nil
	})
}

// SetPersistent writes a file on the persistent partition.
func (h *Host) SetPersistent(name, content string) error {
	return h.diskOp("PersistentWritten", "wrote "+name+" on the persistent partition", func(d *disk.Disk) error {
		if h.phase != PhaseRunning {
			return ErrNotRunning
		}
		d.Persistent[name] = content
		return nil
	})
}

// Persistent reads the persistent partition.
func (h *Host) Persistent() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.disk.Persistent)
}

// Record adds an event of an upper layer (the agent, a BMC) to the lab's
// one timeline.
func (h *Host) Record(kind EventKind, reason, message string, data map[string]string) {
	h.emit(kind, reason, message, data)
}
