package upstream

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	"github.com/upgradelab/upgradelab/sim/image"
)

// The E2EConfig variables that name a lab image (a catalog entry) and the
// Kubernetes version it must carry.
var labImages = []struct{ variable, version, suffix string }{
	{"LAB_IMAGE", "KUBERNETES_VERSION", ""},
	{"LAB_IMAGE_UPGRADE_FROM", "KUBERNETES_VERSION_UPGRADE_FROM", "_UPGRADE_FROM"},
	{"LAB_IMAGE_UPGRADE_TO", "KUBERNETES_VERSION_UPGRADE_TO", "_UPGRADE_TO"},
}

// ImageServer is where the lab serves its images (image.Server).
type ImageServer interface {
	ImageURL(name string) string
}

// LabVariables are the cluster template variables that depend on one
// lab: IMAGE_URL and IMAGE_CHECKSUM (the image of KUBERNETES_VERSION),
// the same with _UPGRADE_FROM and _UPGRADE_TO, and IMAGES, the JSON map
// from each version to its image that the ClusterClass's images variable
// takes. Each LAB_IMAGE* variable of vars must name a catalog image that
// carries its Kubernetes version; the error names the variable.
func LabVariables(vars map[string]string, catalog *image.Catalog, server ImageServer) (map[string]string, error) {
	out := map[string]string{}
	images := map[string]map[string]string{}
	for _, l := range labImages {
		name, ok := vars[l.variable]
		if !ok {
			return nil, fmt.Errorf("variable %s: not set (the lab image of %s)", l.variable, l.version)
		}
		img, err := catalog.Get(name)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", l.variable, err)
		}
		if want := vars[l.version]; img.KubernetesVersion != want {
			return nil, fmt.Errorf("variable %s: image %s carries Kubernetes %s, but %s is %q", l.variable, name, img.KubernetesVersion, l.version, want)
		}
		url := server.ImageURL(img.Name)
		out["IMAGE_URL"+l.suffix], out["IMAGE_CHECKSUM"+l.suffix] = url, img.SHA256
		images[img.KubernetesVersion] = map[string]string{"url": url, "checksum": img.SHA256}
	}
	b, err := json.Marshal(images)
	if err != nil {
		return nil, err
	}
	out["IMAGES"] = string(b)
	return out, nil
}

// VIPVariables are the template variables of a namespace's cluster
// address (its VIP on the lab's workload network).
func VIPVariables(host string, port int32) map[string]string {
	return map[string]string{"VIP_HOST": host, "VIP_PORT": strconv.Itoa(int(port))}
}

// Flavors are the cluster template flavors the baremetal provider's
// repository holds ("" is the default template), each rendered by the
// unit test; the specs pick theirs by name.
var Flavors = []string{"", "upgrades", "kcp-scale-in", "topology", "in-place", "kcp-adoption", "md-remediation", "kcp-md-taints"}

// ConfigPath is the E2EConfig in the repository (relative to the root).
var ConfigPath = filepath.Join("fixtures", "upstream", "e2e-config.yaml")

// AddVariables puts vars into the E2EConfig's variables, which
// CreateRepository writes into the clusterctl configuration it makes.
func AddVariables(cfg *clusterctl.E2EConfig, vars map[string]string) {
	if cfg.Variables == nil {
		cfg.Variables = map[string]string{}
	}
	for k, v := range vars {
		cfg.Variables[k] = v
	}
}
