package monitor

import (
	"context"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/ironic"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// ironicPoll is how often RecordIronic reads Ironic's nodes: Ironic's own
// steps take seconds.
const ironicPoll = 250 * time.Millisecond

// RecordIronic records every change of the nodes of the lab's Ironic,
// named by their host, until ctx ends: provision state, target, power and
// last error. keep selects the hosts of the run (nil: every host). A
// BareMetalHost's node is named NAMESPACE~HOST by baremetal-operator.
func RecordIronic(ctx context.Context, c *ironic.Client, tl *timeline.Timeline, keep func(host string) bool) {
	last := map[string]string{}
	for {
		if nodes, err := c.Nodes(ctx); err == nil {
			for _, n := range nodes {
				recordNode(tl, n, keep, last)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(ironicPoll):
		}
	}
}

func recordNode(tl *timeline.Timeline, n ironic.Node, keep func(string) bool, last map[string]string) {
	host := n.Name
	if i := strings.LastIndex(host, "~"); i >= 0 {
		host = host[i+1:]
	}
	if keep != nil && !keep(host) {
		return
	}
	s := IronicNodeSummary(n)
	key := s[vocab.FieldState] + "|" + s["target"] + "|" + s["power"] + "|" + s["error"]
	if last[host] == key {
		return
	}
	last[host] = key
	tl.Add(timeline.Entry{Time: time.Now(), Kind: vocab.KindIronicNode, Name: host, New: s})
}

// IronicNodeSummary is what the timeline keeps of a node.
func IronicNodeSummary(n ironic.Node) map[string]string {
	s := map[string]string{vocab.FieldState: n.ProvisionState}
	for k, v := range map[string]*string{"target": n.TargetProvisionState, "power": n.PowerState, "error": n.LastError} {
		if v != nil && *v != "" {
			s[k] = *v
		}
	}
	return s
}
