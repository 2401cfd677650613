package disk

import agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"

// Wire is the images as an agent reports them (api/hostagent/v1).
func (im Images) Wire() agentv1.Images {
	root := func(r *Root) *agentv1.Root {
		if r == nil {
			return nil
		}
		w := r.wire()
		return &w
	}
	out := agentv1.Images{Kind: agentv1.DiskKind(im.Kind), Booted: root(im.Booted), Staged: root(im.Staged), Fallback: root(im.Fallback),
		Roots: make([]agentv1.Root, 0, len(im.Roots))}
	for _, r := range im.Roots {
		out.Roots = append(out.Roots, r.wire())
	}
	return out
}

func (r Root) wire() agentv1.Root {
	return agentv1.Root{ID: agentv1.RootID(r.ID), State: agentv1.RootState(r.State), Image: r.Image, Checksum: r.Checksum,
		Committed: r.Committed, TriesLeft: r.TriesLeft}
}
