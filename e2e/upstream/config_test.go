package upstream

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	"github.com/upgradelab/upgradelab/sim/image"
)

type fakeServer struct{}

func (fakeServer) ImageURL(name string) string { return "http://127.0.0.1:1/images/" + name }

func catalog(t *testing.T) *image.Catalog {
	t.Helper()
	c, err := image.LoadCatalog(filepath.Join("..", "..", "fixtures", "images", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEveryFlavorRenders loads the E2EConfig with CAPI's loader, builds
// the clusterctl repository with CAPI's CreateRepository, and renders
// every flavor of the baremetal provider with clusterctl's own template
// processing, which fails on any variable nobody set.
func TestEveryFlavorRenders(t *testing.T) {
	g := gomega.NewWithT(t)
	gomega.RegisterTestingT(t) // CAPI's loaders assert with the global Expect
	ctx := context.Background()
	cfg := clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: filepath.Join("..", "..", ConfigPath)})
	lab, err := LabVariables(cfg.Variables, catalog(t), fakeServer{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	AddVariables(cfg, lab)
	// The suite sets these per spec namespace, through the environment.
	for k, v := range VIPVariables("127.0.0.1", 16443) {
		t.Setenv(k, v)
	}
	path := clusterctl.CreateRepository(ctx, clusterctl.CreateRepositoryInput{E2EConfig: cfg, RepositoryFolder: t.TempDir()})
	c, err := clusterctlclient.New(ctx, path)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, flavor := range Flavors {
		for _, infra := range []string{"baremetal:v0.1.0", "in-memory:v1.14.4"} {
			t.Run(infra+"/flavor="+flavor, func(t *testing.T) { renders(ctx, t, c, cfg, infra, flavor) })
		}
	}
}

// renders renders one flavor of one provider's templates; the
// topology flavors bring their ClusterClass (clusterctl adds it).
func renders(ctx context.Context, t *testing.T, c clusterctlclient.Client, cfg *clusterctl.E2EConfig, infra, flavor string) {
	t.Helper()
	tmpl, err := c.GetClusterTemplate(ctx, clusterctlclient.GetClusterTemplateOptions{
		ProviderRepositorySource: &clusterctlclient.ProviderRepositorySourceOptions{InfrastructureProvider: infra, Flavor: flavor},
		ClusterName:              "c1", TargetNamespace: "ns1", KubernetesVersion: cfg.MustGetVariable("KUBERNETES_VERSION"),
		ControlPlaneMachineCount: ptr.To[int64](3), WorkerMachineCount: ptr.To[int64](1),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Yaml()
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "${") {
		t.Fatalf("unrendered variable in flavor %q:\n%s", flavor, s)
	}
	kinds := map[string]bool{}
	for _, o := range tmpl.Objs() {
		kinds[o.GetKind()] = true
	}
	if !kinds["Cluster"] {
		t.Fatalf("flavor %q has no Cluster: %v", flavor, kinds)
	}
	if (flavor == "topology" || flavor == "in-place") && !kinds["ClusterClass"] {
		t.Fatalf("flavor %q came without its ClusterClass: %v", flavor, kinds)
	}
}

// TestLabVariablesRefuseAnImageOfAnotherVersion: an E2EConfig whose lab
// image does not carry the version it stands for is refused, naming the
// variable.
func TestLabVariablesRefuseAnImageOfAnotherVersion(t *testing.T) {
	vars := map[string]string{
		"KUBERNETES_VERSION": "v1.36.3", "LAB_IMAGE": "ubuntu-24.04-k8s-v1.35.3",
		"KUBERNETES_VERSION_UPGRADE_FROM": "v1.35.3", "LAB_IMAGE_UPGRADE_FROM": "ubuntu-24.04-k8s-v1.35.3",
		"KUBERNETES_VERSION_UPGRADE_TO": "v1.36.3", "LAB_IMAGE_UPGRADE_TO": "ubuntu-24.04-k8s-v1.36.3",
	}
	_, err := LabVariables(vars, catalog(t), fakeServer{})
	if err == nil || !strings.Contains(err.Error(), "variable LAB_IMAGE: image ubuntu-24.04-k8s-v1.35.3 carries Kubernetes v1.35.3") {
		t.Fatalf("got %v", err)
	}
	delete(vars, "LAB_IMAGE_UPGRADE_TO")
	vars["LAB_IMAGE"] = "ubuntu-24.04-k8s-v1.36.3"
	if _, err := LabVariables(vars, catalog(t), fakeServer{}); err == nil || !strings.Contains(err.Error(), "LAB_IMAGE_UPGRADE_TO: not set") {
		t.Fatalf("got %v", err)
	}
	vars["LAB_IMAGE_UPGRADE_TO"] = "no-such-image"
	if _, err := LabVariables(vars, catalog(t), fakeServer{}); err == nil || !strings.Contains(err.Error(), "LAB_IMAGE_UPGRADE_TO") {
		t.Fatalf("got %v", err)
	}
}
