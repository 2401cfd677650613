package workload

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// removal is what one Kubernetes minor release no longer accepts on its
// control-plane components' command lines: flags it dropped, and
// feature gates it dropped from the registry (a --feature-gates naming
// one makes the binary exit with "unrecognized feature gate").
type removal struct {
	flags        map[string][]string // component to flag names, without "--"
	featureGates []string            // every component: they share one registry
}

// removalTable is removals by the minor release that made them.
type removalTable map[string]removal

// removals is the table kubeadm's static pods are judged by, keyed by
// the minor release that removed them. A removal holds from its release
// on. Each row was read from the releases' sources, not from prose:
//
//   - v1.36: the feature-gate specs of k8s.io/kubernetes v1.35.3
//     (pkg/features) and k8s.io/apiserver v0.35.3 (pkg/features) against
//     v1.36.3 and v0.36.3; every name below is registered in the first
//     and gone from the second (CHANGELOG-1.36.md records the removal of
//     WatchFromStorageWithoutResourceVersion, the rest were GA or
//     deprecated and locked since v1.32–v1.33). The flag registrations
//     of kube-apiserver, kube-controller-manager and kube-scheduler (with
//     the staging modules they import) lost no flag between those
//     versions: v1.36 only added some.
//
// Add a row when the lab's catalog gains a release, from the same diff.
var removals = removalTable{
	"v1.36": {featureGates: []string{
		"CSIMigrationPortworx", "HonorPVReclaimPolicy", "InPlacePodVerticalScalingAllocatedStatus",
		"InTreePluginPortworxUnregister", "MemoryManager", "ServiceTrafficDistribution",
		"StructuredAuthorizationConfiguration", "TopologyAwareHints", "WatchFromStorageWithoutResourceVersion",
	}},
}

// The control-plane components kubeadm runs as static pods, by the name
// of their pod and of their section in the ClusterConfiguration.
const (
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// refusal is why component at version exits at start with args (its
// static pod's extraArgs, kubeadm's --name=value), as the binary says
// it; "" when it starts. Only what the removals table knows is refused:
// a flag no release ever had (a typo) is taken, which a real binary
// refuses too; the lab does not hold every release's full flag list.
func (t removalTable) refusal(version, component string, args ExtraArgs) string {
	for _, minor := range slices.Sorted(maps.Keys(t)) {
		if semver.Compare(semver.MajorMinor(version), minor) < 0 {
			continue
		}
		r := t[minor]
		for _, flag := range slices.Sorted(maps.Keys(args)) {
			if slices.Contains(r.flags[component], flag) {
				return fmt.Sprintf("Error: unknown flag: --%s", flag)
			}
		}
		for _, gate := range gateNames(args["feature-gates"]) {
			if slices.Contains(r.featureGates, gate) {
				return fmt.Sprintf("Error: invalid argument %q for \"--feature-gates\" flag: unrecognized feature gate: %s", args["feature-gates"], gate)
			}
		}
	}
	return ""
}

// gateNames are the gates a --feature-gates value names (Name=bool,...).
func gateNames(value string) []string {
	var out []string
	for _, kv := range strings.Split(value, ",") {
		if name, _, _ := strings.Cut(strings.TrimSpace(kv), "="); name != "" {
			out = append(out, name)
		}
	}
	return out
}
