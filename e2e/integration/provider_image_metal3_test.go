//go:build metal3

package integration

import (
	"path/filepath"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/ironic"
	"github.com/upgradelab/upgradelab/e2e/provider"
)

// The same mistake on Metal3's own inventory: real baremetal-operator,
// through real Ironic, wipes the host under its live Machine, and the
// rule sees it as it sees it on upgradelab's inventory.
func TestOnBMOANewImageInAProvisionedHostsSpecWipesItUnderItsMachine(t *testing.T) {
	t.Parallel()
	cfg, err := provider.Load(filepath.Join("..", "..", "fixtures", "providers", "baremetal-bmo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wipeUnderLiveMachine(t, envOptions{lab: "single-node", scale: ironic.MinScale, provider: cfg})
}
