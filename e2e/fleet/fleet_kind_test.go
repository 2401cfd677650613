//go:build kind && integration

package fleet

import (
	"os"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// A fleet on a kind management cluster (`make e2e-kind` runs it, with
// the node image scripts/build-kind-node-image.sh builds in
// KIND_NODE_IMAGE): every manager a Pod of that cluster, the lab on this
// machine. The cluster passes every rule, and the report names the kind
// plane and measures no manager here, since none runs here.
func TestAFleetRunsOnKind(t *testing.T) {
	image := os.Getenv("KIND_NODE_IMAGE")
	if image == "" {
		t.Fatal("KIND_NODE_IMAGE: the kind node image to create the cluster from (scripts/build-kind-node-image.sh prints it)")
	}
	target, err := mgmt.ParseTarget("kind")
	if err != nil {
		t.Fatal(err)
	}
	_, rep, _ := runFleet(t, "testdata/one-in-place.yaml", Options{APIServerProfile: time.Second, Management: target, KindNodeImage: image, RateLimitedReconciles: true})
	if rep.Management != "kind" {
		t.Errorf("the report names the plane %q; want kind", rep.Management)
	}
	for _, p := range rep.Processes {
		if p.Name != harness {
			t.Errorf("process %s measured on this machine; on kind only the harness runs here", p.Name)
		}
		if p.PeakRSS > rep.PeakTotalRSS {
			t.Errorf("%s's peak RSS %d is above the peak total %d", p.Name, p.PeakRSS, rep.PeakTotalRSS)
		}
	}
}
