package disk

import "fmt"

// The update contract: what an OS update agent does with the disk,
// whichever kind it is. The agent's API (sim/agent) serves exactly these.

// BeginStage starts writing image (sizeMiB large) into the root the kind
// stages into: the slot that is not running on an A/B disk, a new staged
// deployment on an OSTree one. That root is unbootable until FinishStage.
// An image the root has no room for is refused (ErrNoSpace) before
// anything changes, and so is a second write while one is under way
// (ErrWriteUnderWay), as RAUC refuses an install while one runs and
// rpm-ostree a transaction while another is in progress: two writers
// interleaving into one partition would leave neither image whole.
func (d *Disk) BeginStage(image, checksum string, sizeMiB int) (RootID, error) {
	if id, busy := d.writeUnderWay(); busy {
		return "", fmt.Errorf("write %s: root %s is being written: %w", image, id, ErrWriteUnderWay)
	}
	return d.model().beginStage(d, image, checksum, sizeMiB)
}

// writeUnderWay names the root being written, if one is.
func (d *Disk) writeUnderWay() (RootID, bool) {
	if t := d.Tree; t != nil {
		if s := t.Staged; s != nil && s.State == Writing {
			return s.ID, true
		}
		return "", false
	}
	for id, s := range d.Slots {
		if s.State == Writing {
			return id, true
		}
	}
	return "", false
}

// FinishStage marks a stage complete. The root still does not boot until
// Activate gives it tries.
func (d *Disk) FinishStage(id RootID) error { return d.model().finishStage(d, id) }

// AbortStage stops a write under way: an A/B slot is left corrupt, an
// OSTree staged deployment is dropped (the booted one never changed).
func (d *Disk) AbortStage(id RootID) { d.model().abortStage(d, id) }

// Activate makes a staged root the one to boot next, with tries boots to
// prove itself before the bootloader falls back. (On an OSTree disk that
// runs from one of its deployments, "next" means after a graceful
// shutdown: see BeginFinalise.)
func (d *Disk) Activate(id RootID, tries int) error {
	if tries < 1 {
		return fmt.Errorf("activate %s: tries must be at least 1, got %d", id, tries)
	}
	return d.model().activate(d, id, tries)
}

// Rollback makes the fallback image (committed, not running) boot next and
// stay the default, as `rauc status mark-active other` and `rpm-ostree
// rollback` do.
func (d *Disk) Rollback() error { return d.model().rollback(d) }

// BeginFinalise starts what a graceful shutdown of the running OS does
// last: an OSTree disk writes an activated staged deployment into the
// bootloader (ostree-finalize-staged). It answers false when there is
// nothing to do (always, on an A/B disk).
func (d *Disk) BeginFinalise() (RootID, bool) { return d.model().beginFinalise(d) }

// FinishFinalise completes BeginFinalise: the staged deployment, its /etc
// merged, is the bootloader's default; old deployments are pruned.
func (d *Disk) FinishFinalise() error { return d.model().finishFinalise(d) }

// Commit marks the running root good after its health check passed; the
// fallback stays.
func (d *Disk) Commit() error {
	if d.Booted == "" {
		return fmt.Errorf("commit: %w", ErrNotBooted)
	}
	return d.model().commit(d)
}

// Root is one root as the contract reports it.
type Root struct {
	ID       RootID    `json:"id"`
	State    SlotState `json:"state"`
	Image    string    `json:"image,omitempty"`
	Checksum string    `json:"checksum,omitempty"`
	// Committed is set once the root passed its health check.
	Committed bool `json:"committed"`
	// TriesLeft is how many more boots an activated, uncommitted root gets.
	TriesLeft int `json:"triesLeft"`
}

// Images is what a disk holds, in the contract's terms.
type Images struct {
	Kind Kind `json:"kind"`
	// Booted is the running root; Staged a root written (or being written)
	// that has not yet proven itself: what an update stages into and then
	// activates; Fallback the committed root the bootloader falls back to.
	Booted   *Root `json:"booted,omitempty"`
	Staged   *Root `json:"staged,omitempty"`
	Fallback *Root `json:"fallback,omitempty"`
	// Roots are every root, in the kind's order (slots A, B; deployments
	// staged first, then the bootloader's order).
	Roots []Root `json:"roots"`
}

// Images reports the disk in the contract's terms.
func (d Disk) Images() Images { return d.model().images(&d) }

// Root finds one root by id.
func (im Images) Root(id RootID) *Root {
	for i := range im.Roots {
		if im.Roots[i].ID == id {
			return &im.Roots[i]
		}
	}
	return nil
}
