package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// topologyVars are the variables of cluster-topology.yaml: clusterVars
// with every given version's image for the class's images variable.
func (e *providerEnv) topologyVars(t *testing.T, ctx context.Context, name, version string, images map[string]string, cpReplicas, workers, cpSurge int) map[string]string {
	t.Helper()
	vars := e.clusterVars(t, ctx, name, version, images[version], "", cpReplicas, workers, cpSurge, false)
	byVersion, coreDNS := map[string]map[string]string{}, map[string]string{}
	for v, imageName := range images {
		img, err := e.site.Lab.Definition().Catalog.Get(imageName)
		if err != nil {
			t.Fatal(err)
		}
		byVersion[v] = map[string]string{"url": e.site.Lab.ImageServer().ImageURL(img.Name), "checksum": img.SHA256}
		coreDNS[v] = img.CoreDNS
	}
	b, _ := json.Marshal(byVersion)
	c, _ := json.Marshal(coreDNS)
	vars["IMAGES"], vars["NIC_FIRMWARE_URL"], vars["COREDNS_VERSIONS"] = string(b), "", string(c)
	return vars
}

// upgradeTopology bumps a ClusterClass cluster's version, as a user does.
func (e *providerEnv) upgradeTopology(t *testing.T, ctx context.Context, cluster, version string) {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Topology.Version = version
	if err := e.c.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
}

// The in-place upgrade of TestInPlaceUpgradeKeepsEveryMachine, on a
// ClusterClass cluster: bumping spec.topology.version makes the topology
// controller rotate the machine templates (the class's patch picks each
// version's image), KCP and then the MachineDeployment update their
// Machines in place.
func TestInPlaceUpgradeOfAClusterClassCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, envOptions{lab: "cold-spare", scale: 0.01, extension: true})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	images := map[string]string{"v1.35.3": "ubuntu-24.04-k8s-v1.35.3", "v1.36.3": "ubuntu-24.04-k8s-v1.36.3"}
	vars := e.topologyVars(t, ctx, "cc", "v1.35.3", images, 3, 1, 0)
	vars["MD_MAX_SURGE"], vars["MD_MAX_UNAVAILABLE"] = "0", "1"
	e.apply(t, ctx, "clusterclass.yaml", vars)
	e.apply(t, ctx, "cluster-topology.yaml", vars)
	e.waitRolledOut(t, ctx, "cc", 3, 1, "v1.35.3")
	before := e.machineIdentities(t, ctx, "cc")

	e.upgradeTopology(t, ctx, "cc", "v1.36.3")
	e.waitRolledOut(t, ctx, "cc", 3, 1, "v1.36.3")

	e.checkSameMachines(t, ctx, "cc", before, func(id machineIdentity, h *lab.Host) {
		if st := h.Status(); st.OS == nil || st.OS.Image.Name != images["v1.36.3"] || st.Disk.Images().Booted == nil || !st.Disk.Images().Booted.Committed {
			t.Errorf("host %s after the update: %+v; want the v1.36.3 image committed (on either kind of disk)", id.host, st.OS)
		}
	})
}
