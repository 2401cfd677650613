package disk

import (
	"errors"
	"fmt"
	"maps"

	"github.com/upgradelab/upgradelab/internal/statefile"
)

// Kind is how a host keeps its OS images.
type Kind string

const (
	AB     Kind = "ab"
	OSTree Kind = "ostree"
)

// Kinds are the kinds a lab file may name.
var Kinds = []Kind{AB, OSTree}

// RootID names one root an image lives in: "A" or "B" on an A/B disk, a
// deployment's serial ("1", "2", ...) on an OSTree disk.
type RootID string

// SlotState is what a root's bytes hold.
type SlotState string

const (
	Empty   SlotState = "empty"
	Writing SlotState = "writing" // an image write is under way
	Written SlotState = "written" // a whole image, checksum verified
	Corrupt SlotState = "corrupt" // a write was cut off: unbootable
)

// BootSource says what the bootloader chose.
type BootSource string

const (
	FromRoot     BootSource = "root"
	FromRecovery BootSource = "recovery"
)

// BootDecision is the bootloader's choice for one boot.
type BootDecision struct {
	Source BootSource `json:"source"`
	Root   RootID     `json:"root,omitempty"`
	Image  string     `json:"image"`
	// Trial is true when the root is not yet committed: this boot spent a try.
	Trial bool `json:"trial,omitempty"`
	// Reason explains a fallback or a recovery boot.
	Reason string `json:"reason,omitempty"`
}

// Disk is the whole system disk.
type Disk struct {
	Kind Kind `json:"kind"`
	// Slots are an A/B disk's roots (ab.go).
	Slots map[SlotName]*Slot `json:"slots,omitempty"`
	// Tree is an OSTree disk's deployments (ostree.go).
	Tree *Tree `json:"tree,omitempty"`
	// Booted is the root the running OS came from ("" when not booted from
	// a root).
	Booted RootID `json:"booted,omitempty"`
	// RootMiB is the space for OS images: each A/B slot's size, an OSTree
	// root's size for every deployment it holds (staged or in the
	// bootloader; the model gives each its image's whole size, sharing no
	// objects between them, so it errs on the full side). 0: unbounded.
	RootMiB int `json:"rootMiB,omitempty"`
	// Recovery is the image on the recovery partition.
	Recovery string `json:"recovery"`
	// Persistent is /var: both kinds keep it across image switches.
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

// New is a factory-fresh disk of kind: no OS image, a recovery image,
// empty data partitions. keep bounds an OSTree disk's deployments (0: the
// default, 2).
func New(kind Kind, recoveryImage string, keep int) (*Disk, error) {
	d := &Disk{Kind: kind, Recovery: recoveryImage, Persistent: map[string]string{}, OEM: map[string]string{}}
	switch kind {
	case AB:
		d.Slots = emptySlots()
	case OSTree:
		if keep == 0 {
			keep = DefaultKeep
		}
		if keep < 2 {
			return nil, fmt.Errorf("an OSTree disk keeps at least 2 deployments (the default and its rollback), got %d", keep)
		}
		d.Tree = &Tree{Keep: keep}
	default:
		return nil, fmt.Errorf("host OS kind %q is not one of %v", kind, Kinds)
	}
	return d, nil
}

// Errors a caller can act on.
var (
	ErrNotWritten = errors.New("root holds no complete image")
	ErrNotWriting = errors.New("no write under way on root")
	// ErrWriteUnderWay: another image write is not finished.
	ErrWriteUnderWay = errors.New("an image write is under way")
	ErrNotBooted     = errors.New("not booted from a root")
	ErrNoFallback    = errors.New("no committed fallback image to roll back to")
	ErrNoSuchRoot    = errors.New("no such root")
	ErrNoSpace       = errors.New("no space left on device")
	ErrEtcPathBad    = errors.New("an /etc file path must be absolute and under /etc/")
	errUnknownKind   = errors.New("unknown disk kind")
)

// model is what each kind implements; Disk dispatches to it.
type model interface {
	beginStage(d *Disk, image, checksum string, sizeMiB int) (RootID, error)
	finishStage(d *Disk, id RootID) error
	abortStage(d *Disk, id RootID)
	activate(d *Disk, id RootID, tries int) error
	rollback(d *Disk) error
	beginFinalise(d *Disk) (RootID, bool)
	finishFinalise(d *Disk) error
	selectBoot(d *Disk) BootDecision
	commit(d *Disk) error
	powerLoss(d *Disk) []Loss
	erase(d *Disk)
	images(d *Disk) Images
	etc(d *Disk, id RootID) map[string]string
	fileName(id RootID) string
}

func (d *Disk) model() model {
	switch d.OSKind() {
	case AB:
		return abModel{}
	case OSTree:
		return treeModel{}
	}
	return nil
}

// SelectBoot is the bootloader choosing what one boot runs: a requested
// recovery boot first, then the kind's own choice; with no bootable root,
// the recovery partition.
func (d *Disk) SelectBoot() BootDecision {
	if d.RecoveryOnce {
		d.RecoveryOnce = false
		d.Booted = ""
		return BootDecision{Source: FromRecovery, Image: d.Recovery, Reason: "a recovery boot was requested"}
	}
	dec := d.model().selectBoot(d)
	d.Booted = dec.Root
	return dec
}

// OSKind is the disk's kind (a disk saved before OSTree existed is A/B).
func (d *Disk) OSKind() Kind {
	if d.Kind == "" {
		return AB
	}
	return d.Kind
}

// Shutdown records that no OS runs from the disk any more.
func (d *Disk) Shutdown() { d.Booted = "" }

// Loss is something a power-off cost the disk, for the lab's events.
type Loss struct {
	// Reason is WriteInterrupted (a write or a finalisation was cut) or
	// StagedDropped (an OSTree staged deployment that was not finalised).
	Reason, Message string
}

// PowerLoss is the power going off (after a graceful shutdown or not):
// writes under way are cut, and so is a finalisation; an OSTree staged
// deployment not finalised by then is gone with /run. It answers what
// was lost.
func (d *Disk) PowerLoss() []Loss {
	cut := d.model().powerLoss(d)
	d.Booted = ""
	return cut
}

// Erase wipes everything but the recovery partition: every root, the
// persistent and OEM partitions and the config drive. A provisioner's
// metadata cleaning and a reset's reinstall both leave this, so the next
// owner of the host finds nothing of the last one.
func (d *Disk) Erase() {
	d.Persistent = map[string]string{}
	d.OEM = map[string]string{}
	d.ConfigDrive = nil
	d.MetaData = nil
	d.model().erase(d)
	d.Booted = ""
	d.RecoveryOnce = false
}

// FileName is the file, in the host's state folder, that holds root id's
// bytes.
func (d *Disk) FileName(id RootID) string { return d.model().fileName(id) }

// Etc is the /etc of the running root (nil when none runs).
func (d *Disk) Etc() map[string]string {
	if d.Booted == "" {
		return nil
	}
	return maps.Clone(d.model().etc(d, d.Booted))
}

// WriteEtc is an admin editing a file in the running OS's /etc ("" as
// content deletes it). On an A/B disk the edit lives in the booted slot
// (a new slot starts from its image's /etc); on an OSTree disk the next
// deployment's finalisation carries it over.
func (d *Disk) WriteEtc(path, content string) error {
	if !etcPath(path) {
		return fmt.Errorf("%q: %w", path, ErrEtcPathBad)
	}
	if d.Booted == "" {
		return fmt.Errorf("edit %s: %w", path, ErrNotBooted)
	}
	etc := d.model().etc(d, d.Booted)
	if content == "" {
		delete(etc, path)
	} else {
		etc[path] = content
	}
	return nil
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
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Validate checks that a disk read back holds what its kind needs.
func (d *Disk) Validate() error {
	switch d.Kind {
	case AB, "":
		for _, name := range []SlotName{SlotA, SlotB} {
			if d.Slots[name] == nil {
				return fmt.Errorf("slot %s missing", name)
			}
		}
	case OSTree:
		if d.Tree == nil {
			return errors.New("kind ostree but no deployments")
		}
	default:
		return fmt.Errorf("%w %q", errUnknownKind, d.Kind)
	}
	return nil
}

// Clone is a deep copy, so a snapshot can be read while the disk changes.
func (d *Disk) Clone() Disk {
	c := *d
	c.Persistent, c.OEM, c.MetaData = maps.Clone(d.Persistent), maps.Clone(d.OEM), maps.Clone(d.MetaData)
	c.ConfigDrive = append([]byte(nil), d.ConfigDrive...)
	if d.ConfigDrive == nil {
		c.ConfigDrive = nil
	}
	if d.Slots != nil {
		c.Slots = map[SlotName]*Slot{}
		for n, s := range d.Slots {
			sc := *s
			sc.Etc = maps.Clone(s.Etc)
			c.Slots[n] = &sc
		}
	}
	if d.Tree != nil {
		t := *d.Tree
		cloneDep := func(dep *Deployment) *Deployment {
			if dep == nil {
				return nil
			}
			dc := *dep
			dc.Etc = maps.Clone(dep.Etc)
			return &dc
		}
		t.Staged = cloneDep(d.Tree.Staged)
		t.Deployments = nil
		for _, dep := range d.Tree.Deployments {
			t.Deployments = append(t.Deployments, cloneDep(dep))
		}
		c.Tree = &t
	}
	return c
}
