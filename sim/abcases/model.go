package abcases

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

// RecoveryImage is the recovery partition's image in the table.
const RecoveryImage = "recovery"

// Model is sim/disk's A/B model as a Machine: what the lab's default
// backend boots by.
type Model struct {
	d       *disk.Disk
	running bool
}

// NewModel is a factory disk holding factory in slot A ("" for none), as
// sim/vm/diskimage builds one.
func NewModel(factory string) *Model {
	var slotA *diskimage.Payload
	if factory != "" {
		slotA = &diskimage.Payload{Image: factory, SHA256: checksum(factory)}
	}
	d := diskimage.FactoryState(slotA)
	d.Recovery = RecoveryImage
	return &Model{d: d}
}

func checksum(image string) string {
	h := sha256.Sum256([]byte(image))
	return hex.EncodeToString(h[:])
}

// Boot implements Machine.
func (m *Model) Boot(context.Context) (Booted, error) {
	if m.running {
		m.d.Shutdown()
	}
	dec := m.d.SelectBoot()
	m.running = true
	b := Booted{Source: "disk", Slot: string(dec.Root), Trial: dec.Trial, Image: dec.Image}
	if dec.Source == disk.FromRecovery {
		b.Source = "recovery"
	}
	return b, nil
}

// Stage implements Machine.
func (m *Model) Stage(_ context.Context, image string, cut bool) (string, error) {
	root, err := m.d.BeginStage(image, checksum(image), 24)
	if err != nil {
		return "", err
	}
	if cut {
		m.d.PowerLoss()
		m.running = false
		return string(root), nil
	}
	return string(root), m.d.FinishStage(root)
}

// Activate implements Machine.
func (m *Model) Activate(_ context.Context, root string, tries int) error {
	return m.d.Activate(disk.RootID(root), tries)
}

// Commit implements Machine.
func (m *Model) Commit(context.Context) error { return m.d.Commit() }

// Rollback implements Machine.
func (m *Model) Rollback(context.Context) error { return m.d.Rollback() }

// Reset implements Machine.
func (m *Model) Reset(ctx context.Context) (Booted, error) {
	m.d.RecoveryOnce = true
	return m.Boot(ctx)
}

// Images implements Machine.
func (m *Model) Images(context.Context) (agentv1.Images, error) { return m.d.Images().Wire(), nil }

// Clean implements Machine: what the lab's EraseDisk does, from an OS not
// booted from the disk.
func (m *Model) Clean(context.Context) error {
	if m.d.Booted != "" {
		return disk.ErrNotBooted
	}
	m.d.Erase()
	return nil
}
