package rehearsal

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// anonymise renames the site's hosts (host-01, ...) and clusters
// (cluster-01, ...), gives every port a generated MAC and every network
// a 192.168.x.0/24 of its own, replaces label values by value-N (the
// same value, the same N: failure domains stay), and removes the site's
// names (private: hosts, clusters, namespaces, addresses, MACs,
// applications) from what was left out. Shapes, versions, firmware and
// budgets stay.
func anonymise(s *Site, private map[string]bool) {
	a := &anonymiser{hosts: map[string]string{}, networks: map[string]string{}, values: map[string]string{}}
	var pairs []string
	for i, c := range s.Clusters {
		name := fmt.Sprintf("cluster-%02d", i+1)
		pairs = append(pairs, c.Source, name, c.Name, name)
		c.Name, c.Source = name, ""
		a.rename(c.Hosts)
	}
	a.rename(s.Idle)
	for old, name := range a.hosts {
		pairs = append(pairs, old, name)
	}
	for old := range private {
		pairs = append(pairs, old, "<site's>")
	}
	r := replacer(pairs)
	for i := range s.Unmapped {
		u := &s.Unmapped[i]
		u.Object, u.Reason = r.Replace(u.Object), r.Replace(u.Reason)
	}
}

type anonymiser struct {
	hosts, networks, values map[string]string
	macs                    int
}

func (a *anonymiser) rename(hosts []lab.HostSpec) {
	for i := range hosts {
		h := &hosts[i]
		if a.hosts[h.Name] == "" {
			a.hosts[h.Name] = fmt.Sprintf("host-%02d", len(a.hosts)+1)
		}
		h.Name = a.hosts[h.Name]
		labels := map[string]string{}
		for k, v := range h.Labels {
			if v != "" && a.values[v] == "" {
				a.values[v] = fmt.Sprintf("value-%d", len(a.values)+1)
			}
			labels[k] = a.values[v]
		}
		h.Labels = labels
		for j := range h.NICs {
			a.macs++
			h.NICs[j].MAC = fmt.Sprintf("52:54:00:%02x:%02x:%02x", (a.macs>>16)&0xff, (a.macs>>8)&0xff, a.macs&0xff)
			net := h.NICs[j].Network
			if a.networks[net] == "" {
				a.networks[net] = fmt.Sprintf("192.168.%d.0/24", 110+len(a.networks))
			}
			h.NICs[j].Network = a.networks[net]
		}
	}
}

// replacer replaces each old of pairs (old, new, ...) by its new, the
// longest first (a cluster's NAMESPACE/NAME before its NAME).
func replacer(pairs []string) *strings.Replacer {
	type pair struct{ old, new string }
	var ps []pair
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != "" {
			ps = append(ps, pair{pairs[i], pairs[i+1]})
		}
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Or(len(b.old)-len(a.old), strings.Compare(a.old, b.old)) })
	var flat []string
	for _, p := range ps {
		flat = append(flat, p.old, p.new)
	}
	return strings.NewReplacer(flat...)
}
