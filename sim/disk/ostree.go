package disk

import (
	"fmt"
	"slices"
	"strconv"
)

// DefaultKeep is how many deployments an OSTree disk keeps after a
// finalisation when the lab file does not say: the new default and its
// rollback, as ostree's own pruning leaves them.
const DefaultKeep = 2

// Tree is an OSTree disk's root filesystem: deployments of images in one
// repository, the bootloader's entries pointing at them.
type Tree struct {
	// Staged is a deployment pulled (or being pulled) that the bootloader
	// does not know yet: ostree's staged deployment, which lives in /run
	// until finalisation writes it into the bootloader.
	Staged *Deployment `json:"staged,omitempty"`
	// Finalising is set while the staged deployment is being written into
	// the bootloader; a power cut then loses it.
	Finalising bool `json:"finalising,omitempty"`
	// Deployments are the bootloader's entries, the default first.
	Deployments []*Deployment `json:"deployments"`
	// Serial is the last deployment serial handed out.
	Serial int `json:"serial"`
	// Keep bounds Deployments after a finalisation.
	Keep int `json:"keep"`
}

// Deployment is one image checked out in the root filesystem.
type Deployment struct {
	ID       RootID    `json:"id"`
	State    SlotState `json:"state"`
	Image    string    `json:"image"`
	Checksum string    `json:"checksum"`
	// Activated is set on a staged deployment once it should boot next.
	Activated bool `json:"activated,omitempty"`
	// SizeMiB is the image's size.
	SizeMiB int `json:"sizeMiB,omitempty"`
	// TriesLeft is greenboot's boot counter; Good its boot_success.
	TriesLeft int  `json:"triesLeft"`
	Good      bool `json:"good"`
	// Etc is the deployment's /etc: its image's until finalisation merges
	// the admin's edits in, then whatever the admin edits while it runs.
	Etc map[string]string `json:"etc,omitempty"`
}

func (dep *Deployment) bootable() bool {
	return dep.State == Written && (dep.Good || dep.TriesLeft > 0)
}

// treeModel is the OSTree disk.
type treeModel struct{}

// beginStage pulls image into a new staged deployment; an earlier staged
// one is replaced, as `ostree admin deploy --stage` replaces it. The
// running deployment is never touched. The deployments in the bootloader
// and the new one must fit the root: nothing is pruned to make room
// (ostree prunes after a deployment, not before).
func (treeModel) beginStage(d *Disk, image, checksum string, sizeMiB int) (RootID, error) {
	t := d.Tree
	if d.RootMiB > 0 {
		used := 0
		for _, dep := range t.Deployments {
			used += dep.SizeMiB
		}
		if used+sizeMiB > d.RootMiB {
			return "", fmt.Errorf("pull %s (%d MiB): the root holds %d deployments in %d MiB of %d MiB: %w", image, sizeMiB, len(t.Deployments), used, d.RootMiB, ErrNoSpace)
		}
	}
	t.Serial++
	id := RootID(strconv.Itoa(t.Serial))
	t.Staged = &Deployment{ID: id, State: Writing, Image: image, Checksum: checksum, SizeMiB: sizeMiB, Etc: ImageEtc(image)}
	t.Finalising = false
	return id, nil
}

func (treeModel) finishStage(d *Disk, id RootID) error {
	s := d.Tree.Staged
	if s == nil || s.ID != id || s.State != Writing {
		return fmt.Errorf("finish staging deployment %s: %w", id, ErrNotWriting)
	}
	s.State = Written
	return nil
}

func (treeModel) abortStage(d *Disk, id RootID) {
	if s := d.Tree.Staged; s != nil && s.ID == id && s.State == Writing {
		d.Tree.Staged = nil
	}
}

// activate marks the staged deployment for finalisation when the running
// OS shuts down, with tries boots to prove itself. An installer (a deploy
// ramdisk or recovery OS: nothing runs from the tree) writes the
// bootloader entry at once, as `ostree admin deploy` does outside a
// booted deployment. A deployment already in the bootloader becomes the
// default with tries.
func (m treeModel) activate(d *Disk, id RootID, tries int) error {
	t := d.Tree
	if s := t.Staged; s != nil && s.ID == id {
		if s.State != Written {
			return fmt.Errorf("activate deployment %s (%s): %w", id, s.State, ErrNotWritten)
		}
		s.Activated, s.TriesLeft, s.Good = true, tries, false
		if d.Booted == "" {
			t.Finalising = true
			return m.finishFinalise(d)
		}
		return nil
	}
	i := m.index(d, id)
	if i < 0 {
		return fmt.Errorf("activate deployment %s: %w", id, ErrNoSuchRoot)
	}
	dep := t.Deployments[i]
	dep.TriesLeft, dep.Good = tries, false
	m.makeDefault(d, i)
	return nil
}

func (treeModel) index(d *Disk, id RootID) int {
	return slices.IndexFunc(d.Tree.Deployments, func(dep *Deployment) bool { return dep.ID == id })
}

func (treeModel) makeDefault(d *Disk, i int) {
	t := d.Tree
	dep := t.Deployments[i]
	t.Deployments = append([]*Deployment{dep}, slices.Delete(t.Deployments, i, i+1)...)
}

func (m treeModel) rollback(d *Disk) error {
	fb := m.images(d).Fallback
	if fb == nil {
		return fmt.Errorf("roll back: %w", ErrNoFallback)
	}
	m.makeDefault(d, m.index(d, fb.ID))
	return nil
}

func (treeModel) beginFinalise(d *Disk) (RootID, bool) {
	s := d.Tree.Staged
	if s == nil || s.State != Written || !s.Activated {
		return "", false
	}
	d.Tree.Finalising = true
	return s.ID, true
}

// finishFinalise writes the staged deployment into the bootloader as the
// default. Its /etc is the three-way merge of the deployment that ran
// last (the default) onto the new image's; then the list is pruned to
// Keep entries.
func (treeModel) finishFinalise(d *Disk) error {
	t := d.Tree
	if !t.Finalising || t.Staged == nil {
		return nil
	}
	dep := t.Staged
	if len(t.Deployments) > 0 {
		from := t.Deployments[0]
		dep.Etc = mergeEtc(ImageEtc(from.Image), from.Etc, dep.Etc)
	}
	dep.Activated = false
	t.Deployments = append([]*Deployment{dep}, t.Deployments...)
	if len(t.Deployments) > t.Keep {
		t.Deployments = t.Deployments[:t.Keep]
	}
	t.Staged, t.Finalising = nil, false
	return nil
}

// selectBoot: the first bootable entry boots, spending a try when not yet
// good. An entry passed over for want of tries is greenboot's fallback:
// the entry that boots becomes the default (`rpm-ostree rollback`).
func (m treeModel) selectBoot(d *Disk) BootDecision {
	var reasons []string
	for i, dep := range d.Tree.Deployments {
		if !dep.bootable() {
			reasons = append(reasons, fmt.Sprintf("deployment %s (%s) has no tries left", dep.ID, dep.Image))
			continue
		}
		if i > 0 {
			m.makeDefault(d, i)
		}
		dec := BootDecision{Source: FromRoot, Root: dep.ID, Image: dep.Image, Reason: joinReasons(reasons, "")}
		if !dep.Good {
			dep.TriesLeft--
			dec.Trial = true
		}
		return dec
	}
	return BootDecision{Source: FromRecovery, Image: d.Recovery, Reason: joinReasons(reasons, "no deployment")}
}

func (m treeModel) commit(d *Disk) error {
	i := m.index(d, d.Booted)
	if i < 0 {
		return fmt.Errorf("commit: %w", ErrNotBooted)
	}
	dep := d.Tree.Deployments[i]
	dep.Good, dep.TriesLeft = true, 0
	return nil
}

// powerLoss drops the staged deployment, however far it got: being
// pulled, pulled, activated or being finalised, it lived in /run (and a
// half-written bootloader entry); the deployments already in the
// bootloader are intact.
func (treeModel) powerLoss(d *Disk) []Loss {
	t := d.Tree
	s := t.Staged
	if s == nil {
		return nil
	}
	finalising := t.Finalising
	t.Staged, t.Finalising = nil, false
	switch {
	case finalising:
		return []Loss{{Reason: "WriteInterrupted", Message: fmt.Sprintf("power lost during the finalisation of deployment %s (%s): the staged deployment is lost", s.ID, s.Image)}}
	case s.State == Writing:
		return []Loss{{Reason: "WriteInterrupted", Message: fmt.Sprintf("power lost during the pull of deployment %s (%s): dropped, the deployments in the bootloader are intact", s.ID, s.Image)}}
	case s.Activated:
		return []Loss{{Reason: "StagedDropped", Message: fmt.Sprintf("the staged deployment %s (%s) was activated but the power went off without a graceful shutdown to finalise it: dropped (it lived in /run)", s.ID, s.Image)}}
	}
	return []Loss{{Reason: "StagedDropped", Message: fmt.Sprintf("the staged deployment %s (%s) was never activated: dropped at power-off (it lived in /run)", s.ID, s.Image)}}
}

func (treeModel) erase(d *Disk) {
	d.Tree = &Tree{Serial: d.Tree.Serial, Keep: d.Tree.Keep}
}

func (treeModel) images(d *Disk) Images {
	t := d.Tree
	im := Images{Kind: OSTree}
	root := func(dep *Deployment) Root {
		return Root{ID: dep.ID, State: dep.State, Image: dep.Image, Checksum: dep.Checksum, Committed: dep.Good, TriesLeft: dep.TriesLeft}
	}
	if t.Staged != nil {
		im.Roots = append(im.Roots, root(t.Staged))
	}
	for _, dep := range t.Deployments {
		im.Roots = append(im.Roots, root(dep))
	}
	for i := range im.Roots {
		r := &im.Roots[i]
		switch {
		case t.Staged != nil && r.ID == t.Staged.ID:
			im.Staged = r
		case r.ID == d.Booted:
			im.Booted = r
		case im.Fallback == nil && r.Committed && (d.Booted != "" || len(t.Deployments) == 0 || r.ID != t.Deployments[0].ID):
			im.Fallback = r
		}
	}
	return im
}

func (m treeModel) etc(d *Disk, id RootID) map[string]string {
	t := d.Tree
	var dep *Deployment
	if t.Staged != nil && t.Staged.ID == id {
		dep = t.Staged
	} else if i := m.index(d, id); i >= 0 {
		dep = t.Deployments[i]
	}
	if dep == nil {
		return map[string]string{}
	}
	if dep.Etc == nil {
		dep.Etc = ImageEtc(dep.Image)
	}
	return dep.Etc
}

func (treeModel) fileName(id RootID) string { return "deployment-" + string(id) + ".img" }
