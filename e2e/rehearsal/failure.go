package rehearsal

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/nic"
)

// FailurePoint is something of a site's upgrade that will fail or hurt,
// found from its inventory before any run, with its cause.
type FailurePoint struct {
	Kind    string `json:"kind"`
	Cluster string `json:"cluster"`
	// Level is "fails" (the upgrade stops or a node is lost) or "hurts"
	// (it goes through with an outage or a warning).
	Level string `json:"level"`
	Cause string `json:"cause"`
}

func (f FailurePoint) String() string {
	return fmt.Sprintf("%s %s [%s]: %s", f.Cluster, f.Level, f.Kind, f.Cause)
}

// The kinds of failure point.
const (
	KindSpares      = "spares-too-few"
	KindBudget      = "budget-blocks-drains"
	KindAPIDown     = "single-node-api-down"
	KindNICDriver   = "nic-firmware-driver"
	KindCAPIRefuses = "capi-refuses"
	KindNoRoom      = "no-room-for-image"
)

// Levels of a failure point.
const (
	Fails = "fails"
	Hurts = "hurts"
)

// FailurePoints are what the site's clusters' upgrades will meet, each
// found the way the component that meets it decides: the hosts a
// rollout needs (CAPI's surge), a budget's allowed disruptions (the
// Eviction API), the i40e driver of the new image against each port's
// NVM (the lab's i40e rules), the settings KCP and CAPI's webhooks
// refuse.
func (s *Site) FailurePoints(cat Catalogs) []FailurePoint {
	var out []FailurePoint
	for _, c := range s.Clusters {
		add := func(kind, level, cause string) {
			out = append(out, FailurePoint{Kind: kind, Cluster: c.Name, Level: level, Cause: cause})
		}
		if need := (&scenario.Scenario{Strategy: c.Strategy, Cluster: scenario.Cluster{ControlPlane: c.ControlPlane, Workers: c.Workers}}).HostsNeeded(); need > len(c.Hosts) {
			add(KindSpares, Fails, fmt.Sprintf("a %s upgrade of %d control-plane and %d worker nodes (maxSurge %d and %d) needs %d hosts at once; the cluster has %d (%d spare): the rollout waits for a host that never comes",
				c.Strategy, c.ControlPlane.Replicas, c.Workers.Replicas, c.ControlPlane.MaxSurge, c.Workers.MaxSurge, need, len(c.Hosts), c.Spares))
		}
		if cause, blocks := budgetBlocks(c.Workload); blocks {
			level := Fails // the first drain never ends
			if c.Workload.NodeDrainTimeout.Duration > 0 {
				level = Hurts // each drain times out and the pods go anyway
			}
			add(KindBudget, level, cause+drainOutcome(c.Workload))
		}
		if c.Strategy == scenario.InPlace && c.ControlPlane.Replicas == 1 && c.Workers.Replicas == 0 {
			add(KindAPIDown, Hurts, fmt.Sprintf("one control-plane node and no other: its API is down while the node reboots into %s", c.To.Version))
		}
		for _, cause := range capiRefuses(c) {
			add(KindCAPIRefuses, Fails, cause)
		}
		for _, cause := range noRoom(c, cat) {
			add(KindNoRoom, Fails, cause)
		}
		for _, p := range nicFindings(c, cat) {
			add(KindNICDriver, p.level, p.cause)
		}
	}
	return out
}

// budgetBlocks says whether the application's budget allows no eviction
// at all, and why.
func budgetBlocks(a scenario.Application) (string, bool) {
	b, replicas := a.Budget, a.Replicas
	if replicas == 0 || b.None {
		return "", false
	}
	if v := b.MaxUnavailable; v != "" {
		if n, ok := budgetCount(v, replicas); ok && n == 0 {
			return fmt.Sprintf("its application's budget (maxUnavailable %s) allows no eviction of its %d replica(s)", v, replicas), true
		}
		return "", false
	}
	if v := b.MinAvailable; v != "" {
		if n, ok := budgetCount(v, replicas); ok && n >= replicas {
			return fmt.Sprintf("its application's budget (minAvailable %s) keeps all %d replica(s): no eviction is ever allowed", v, replicas), true
		}
	}
	return "", false
}

// budgetCount reads a budget's count or percentage of replicas, a
// percentage rounded up as the disruption controller rounds both.
func budgetCount(v string, replicas int) (int, bool) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, err := strconv.Atoi(p)
		if err != nil {
			return 0, false
		}
		return int(math.Ceil(float64(pct) * float64(replicas) / 100)), true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// drainOutcome says what CAPI does with a drain the budget blocks.
func drainOutcome(a scenario.Application) string {
	if d := a.NodeDrainTimeout.Duration; d > 0 {
		return fmt.Sprintf("; each drain waits out nodeDrainTimeout (%s), then CAPI deletes the Machine with its pods still on it", d)
	}
	return "; without a nodeDrainTimeout the first drain never ends and the rollout stops"
}

// capiRefuses are the cluster's settings KCP or CAPI's webhooks refuse.
func capiRefuses(c *Cluster) []string {
	var out []string
	if c.ControlPlane.MaxSurge == 0 && c.ControlPlane.Replicas < 3 {
		out = append(out, fmt.Sprintf("KubeadmControlPlane maxSurge 0 with %d replica(s): KCP refuses to scale in below 3", c.ControlPlane.Replicas))
	}
	if c.Workers.Replicas > 0 && c.Workers.MaxSurge == 0 && c.Workers.MaxUnavailable == 0 {
		out = append(out, "MachineDeployment maxSurge 0 and maxUnavailable 0: CAPI's webhook refuses a rollout that can neither add nor remove a Machine")
	}
	return out
}

// noRoom are the cluster's hosts whose root cannot take the image it
// upgrades to, as the lab's disks decide (sim/disk refuses the write
// with ErrNoSpace): an A/B slot smaller than the image, an OSTree root
// without room for the new deployment beside the running one. The
// root's size is the lab's layout of the host's disk (lab.HostOS), not
// the site's own partitions, which an export does not hold.
func noRoom(c *Cluster, cat Catalogs) []string {
	to, ok := cat.Images.Images[c.To.Image]
	if !ok {
		return nil
	}
	from, hasFrom := cat.Images.Images[c.From.Image]
	var out []string
	for _, h := range c.Hosts {
		layout := h.OS
		if layout.RootGiB == 0 {
			layout.RootGiB = lab.DefaultRootGiB(h.DiskGiB)
		}
		need, what := to.SizeMiB, "its A/B slot"
		if layout.Kind == disk.OSTree && hasFrom {
			need, what = to.SizeMiB+from.SizeMiB, "its OSTree root beside the running deployment"
		}
		if root := layout.RootMiB(); need > root {
			out = append(out, fmt.Sprintf("host %s: %s (%d MiB) does not fit %s (%d MiB of its %d GiB root disk, as the lab lays it out): the write is refused with no space left",
				h.Name, c.To.Image, to.SizeMiB, what, root, h.DiskGiB))
		}
	}
	return out
}

type nicFinding struct{ level, cause string }

// nicFindings evaluate every port of the cluster's hosts under the i40e
// driver of the image it upgrades to, with the lab's i40e rules: a link
// the driver takes down fails the node, a warning hurts.
func nicFindings(c *Cluster, cat Catalogs) []nicFinding {
	img, ok := cat.Images.Images[c.To.Image]
	if !ok || cat.Rules == nil {
		return nil
	}
	var out []nicFinding
	for _, h := range c.Hosts {
		for _, n := range h.NICs {
			nvm, ok := cat.NVM[n.NVM]
			if !ok {
				continue
			}
			link := cat.Rules.Evaluate(&nic.Port{Name: n.Name, Model: n.Model, Active: nvm}, img.I40e)
			level := ""
			switch {
			case !link.Up:
				level = Fails
			case link.Level == "warning":
				level = Hurts
			default:
				continue
			}
			out = append(out, nicFinding{level, fmt.Sprintf("host %s port %s: NVM %s (API %s) under i40e %s (API %s) of %s: %s (%s)",
				h.Name, n.Name, nvm.Firmware, nvm.API, img.I40e.Version, img.I40e.API, c.To.Image, link.Rule, link.Message)})
		}
	}
	return out
}
