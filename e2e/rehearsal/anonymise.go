package rehearsal

import (
	"fmt"
	"strings"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// anonymise renames the site's hosts (host-01, ...) and clusters
// (cluster-01, ...), gives every port a generated MAC and every network
// a 192.168.x.0/24 of its own, and drops host labels' values that name
// a host. The shapes, versions, firmware and budgets stay.
func anonymise(s *Site) {
	hostNames := map[string]string{}
	networks := map[string]string{}
	n, mac := 0, 0
	rename := func(hosts []lab.HostSpec) {
		for i := range hosts {
			h := &hosts[i]
			old := h.Name
			if hostNames[old] == "" {
				n++
				hostNames[old] = fmt.Sprintf("host-%02d", n)
			}
			h.Name = hostNames[old]
			h.Labels = anonymousLabels(h.Labels, old)
			for j := range h.NICs {
				mac++
				h.NICs[j].MAC = fmt.Sprintf("52:54:00:%02x:%02x:%02x", (mac>>16)&0xff, (mac>>8)&0xff, mac&0xff)
				net := h.NICs[j].Network
				if networks[net] == "" {
					networks[net] = fmt.Sprintf("192.168.%d.0/24", 110+len(networks))
				}
				h.NICs[j].Network = networks[net]
			}
		}
	}
	for i, c := range s.Clusters {
		c.Name, c.Source = fmt.Sprintf("cluster-%02d", i+1), ""
		rename(c.Hosts)
	}
	rename(s.Idle)
	for i := range s.Unmapped {
		u := &s.Unmapped[i]
		u.Object = anonymousObject(u.Object)
	}
}

// anonymousLabels keeps a host's labels but those whose value is its
// name.
func anonymousLabels(labels map[string]string, host string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !strings.Contains(v, host) {
			out[k] = v
		}
	}
	return out
}

// anonymousObject keeps an unmapped object's kind, not its name (nor
// its file's: "hosts.yaml: items[3] (Secret ns/name)").
func anonymousObject(object string) string {
	if _, inner, ok := strings.Cut(object, "("); ok {
		object = inner
	}
	kind, _, _ := strings.Cut(object, " ")
	return kind + " (anonymised)"
}
