package lab

import (
	"context"

	"github.com/upgradelab/upgradelab/sim/disk"
)

// machine runs one host's boot and disk. On the test backend the lab
// models both (modelled: boot.go and sim/disk); on the qemu backend a real
// VM's firmware, GRUB and guest do, and the host follows what the guest
// reports (vmHost, qemu.go). A Host reaches its machine only through this
// interface, and the Backend that defined the host's domain supplies it.
type machine interface {
	// prepareBoot readies the next boot before the power goes on.
	prepareBoot(ctx context.Context) error
	// run is one power cycle's boot and what follows, until ctx (the
	// cycle) ends.
	run(ctx context.Context)
	// shutdown stops the running OS gracefully and returns once the power
	// is off.
	shutdown(ctx context.Context) error
	// writeImage stages an image into the root the disk stages into.
	writeImage(ctx context.Context, url, wantSHA256 string) (disk.RootID, error)
	// activate, commit and rollback are the update contract on the disk
	// (sim/disk).
	activate(root disk.RootID, tries int) error
	commit() error
	rollback() error
	// recoveryOnce and erase act on the machine's own disk before the host
	// records the change in its disk model.
	recoveryOnce() error
	erase() error
	// guest is the agent API of the OS inside a VM and its console log;
	// ok is false where the lab's agents (sim/agent) are the hosts' OS.
	guest() (url, console string, ok bool)
	// lacks answers an error wrapping ErrNotOnQEMU when op needs hardware
	// the machine does not have yet, nil otherwise.
	lacks(op string) error
}

// modelled is the test backend's machine: the boot, the disk and the
// writes into it are the lab's models, run in the lab's time.
type modelled struct{ h *Host }

func (modelled) prepareBoot(context.Context) error { return nil }

func (m modelled) run(ctx context.Context) { m.h.boot(ctx) }

func (m modelled) shutdown(ctx context.Context) error { return m.h.modelShutdown(ctx) }

func (m modelled) writeImage(ctx context.Context, url, wantSHA256 string) (disk.RootID, error) {
	return m.h.modelWriteImage(ctx, url, wantSHA256)
}

func (m modelled) activate(root disk.RootID, tries int) error {
	return m.h.diskOp(reasonActivated, activatedMsg(root, tries), func(d *disk.Disk) error {
		return d.Activate(root, tries)
	})
}

func (m modelled) commit() error {
	h := m.h
	return h.diskOp(reasonCommitted, committedMsg, func(d *disk.Disk) error {
		if h.phase != PhaseRunning {
			return ErrNotRunning
		}
		return d.Commit()
	})
}

func (m modelled) rollback() error {
	return m.h.diskOp(reasonRolledBack, rolledBackMsg, func(d *disk.Disk) error { return d.Rollback() })
}

func (modelled) recoveryOnce() error { return nil }

func (modelled) erase() error { return nil }

func (modelled) guest() (url, console string, ok bool) { return "", "", false }

func (modelled) lacks(string) error { return nil }
