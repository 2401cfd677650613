// Package capm3 runs cluster-api-provider-metal3 (CAPM3), Metal3's CAPI
// infrastructure provider, unmodified: built from its upstream source by
// e2e/metal3src (METAL3_SOURCES, or a checkout in CAPM3_SOURCE) and run as
// a manager of the plane with its release's CRDs (with their contract
// labels and conversion webhooks), RBAC (ServiceAccount capm3-manager)
// and webhooks. It consumes the BareMetalHosts Metal3's own inventory
// keeps (e2e/bmo on e2e/ironic), as on a Metal3 site.
//
// CAPM3 needs no IP address manager unless a Metal3DataTemplate names an
// IP pool (its Metal3Data controller skips the IPAM watches when their
// CRDs are absent), so the plane runs none and the templates name none.
package capm3

import (
	"path/filepath"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// Provider describes CAPM3 to the plane as a manager named name: dir is
// the folder metal3src.Build returned for metal3src.CAPM3, holding its
// manager and config/. It takes the plane's flags as CAPI's managers do
// (it is built on their scaffolding) and args after them.
func Provider(dir, name string, args []string) mgmt.Provider {
	return mgmt.Provider{Name: name, Binary: filepath.Join(dir, "manager"), ConfigDir: filepath.Join(dir, "config"), Args: args}
}
