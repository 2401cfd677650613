//go:build e2e

package upstream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// extraGates are the CAPI feature gates CAPI's specs exercise beyond the
// ones every upgradelab plane runs with (mgmt.FeatureGates):
// KCPAndMachineDeploymentRolloutSpec checks taint propagation.
var extraGates = []string{"MachineTaintPropagation=true"}

// providerEnv is one provider's management cluster in this process: the
// plane with CAPI's managers and the provider's, its lab (when the
// provider drives one), the E2EConfig with this lab's variables, the
// clusterctl repository built from it, and the ClusterProxy CAPI's specs
// act through.
type providerEnv struct {
	name             string
	env              *runner.Env
	config           *clusterctl.E2EConfig
	clusterctlConfig string
	proxy            framework.ClusterProxy
	dir              string
	// hosts hands the lab's hosts to the specs' namespaces.
	hosts *hostPool
}

var (
	envsMu sync.Mutex
	envs   = map[string]*providerEnv{}
)

// envFor is the provider's environment, started on first use in this
// process (each Ginkgo process has its own planes and labs).
func envFor(p upstreamProvider) *providerEnv {
	name := p.config
	envsMu.Lock()
	defer envsMu.Unlock()
	if e, ok := envs[name]; ok {
		return e
	}
	e, err := startEnv(context.Background(), p)
	Expect(err).NotTo(HaveOccurred(), "starting the %s management cluster", name)
	envs[name] = e
	return e
}

// stopEnvs stops every environment of this process. A manager the API
// server refused a request for want of RBAC fails the suite: CAPI's
// specs drive every manager as its own ServiceAccount (e2e/mgmt/rbac.go)
// and none may be short of a permission.
func stopEnvs() {
	envsMu.Lock()
	defer envsMu.Unlock()
	var refused []string
	for name, e := range envs {
		denied, _ := e.env.Plane.Forbidden(context.Background())
		for manager, lines := range denied {
			refused = append(refused, fmt.Sprintf("%s: manager %s was refused %d request(s) for want of RBAC, first: %s", name, manager, len(lines), lines[0]))
		}
		e.env.Stop()
		delete(envs, name)
	}
	Expect(refused).To(BeEmpty(), "managers refused for want of RBAC")
}

// processDir is this process's folder for a provider.
func processDir(name string) string {
	dir := filepath.Join(artifactsDir(), name)
	if cfg, _ := GinkgoConfiguration(); cfg.ParallelTotal > 1 {
		dir = filepath.Join(artifactsDir(), fmt.Sprintf("%s-%d", name, cfg.ParallelProcess))
	}
	return dir
}

func startEnv(ctx context.Context, p upstreamProvider) (*providerEnv, error) {
	name := p.config
	e := &providerEnv{name: name, dir: processDir(name)}
	fmt.Fprintf(GinkgoWriter, "starting the %s management cluster and lab in %s\n", name, e.dir)
	cfg, err := provider.Load(filepath.Join("..", "..", "fixtures", "providers", name+".yaml"))
	if err != nil {
		return nil, err
	}
	opts := runner.EnvOptions{Provider: cfg, Strategy: scenario.InPlace, RepoRoot: filepath.Join("..", ".."), Dir: e.dir,
		Scale: timescale.Scale(*timeScaleFlag), ProviderBinary: shared.Provider, ExtensionBinary: shared.Extension,
		ExtraFeatureGates: extraGates, RateLimitedReconciles: *rateLimitFlag,
		// CAPI's specs delete namespaces and delete in the foreground.
		ControllerManager: true}
	if cfg.Lab {
		if opts.Lab, err = lab.Load(filepath.Join("..", "..", "fixtures", "labs", "upstream.yaml")); err != nil {
			return nil, err
		}
	}
	if e.env, err = runner.StartEnv(ctx, opts); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			e.env.Stop()
		}
	}()
	if err := installAsClusterctl(ctx, e.env, p.infra); err != nil {
		return nil, err
	}
	e.config = clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: filepath.Join("..", "..", ConfigPath)})
	if e.env.Site != nil {
		vars, err := LabVariables(e.config.Variables, e.env.Site.Lab.Definition().Catalog, e.env.Site.Lab.ImageServer())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ConfigPath, err)
		}
		AddVariables(e.config, vars)
		e.hosts = &hostPool{site: e.env.Site, client: e.env.Client}
	}
	for _, v := range p.unset {
		delete(e.config.Variables, v)
	}
	e.clusterctlConfig = clusterctl.CreateRepository(ctx, clusterctl.CreateRepositoryInput{
		E2EConfig: e.config, RepositoryFolder: filepath.Join(e.dir, "repository")})
	scheme := reference.Scheme()
	framework.TryAddDefaultSchemes(scheme)
	e.proxy = framework.NewClusterProxy("upgradelab-"+name, e.env.Plane.Kubeconfig, scheme)
	if p.infra == inMemory.infra {
		e.proxy = directWorkloads{ClusterProxy: e.proxy, scheme: scheme, dir: filepath.Join(e.dir, "workload-kubeconfigs")}
	}
	ok = true
	return e, nil
}

// directWorkloads is the management cluster's ClusterProxy with one
// change: a workload cluster is reached at the address its kubeconfig
// secret names. CAPI's framework reaches an in-memory (DevCluster)
// workload cluster by port-forwarding through the capd-controller-manager
// pod in capd-system, as CAPD runs in kind; here CAPD runs as a process
// whose in-memory API servers listen on 127.0.0.1 (its POD_IP), which
// this process dials directly, and there is no such pod (the framework's
// dialer then never connects).
type directWorkloads struct {
	framework.ClusterProxy
	scheme *runtime.Scheme
	dir    string
}

func (p directWorkloads) GetWorkloadCluster(ctx context.Context, namespace, name string, options ...framework.Option) framework.ClusterProxy {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: namespace, Name: name + "-kubeconfig"}
	Eventually(func() error { return p.GetClient().Get(ctx, key, secret) }, "1m", "1s").Should(Succeed(), "the kubeconfig secret of %s/%s", namespace, name)
	Expect(os.MkdirAll(p.dir, 0o700)).To(Succeed())
	path := filepath.Join(p.dir, namespace+"-"+name+".kubeconfig")
	Expect(os.WriteFile(path, secret.Data["value"], 0o600)).To(Succeed())
	return framework.NewClusterProxy(name, path, p.scheme, options...)
}

// inventory is how clusterctl names each provider, by the API groups of
// the CRDs it installs.
var inventory = []struct {
	name      string
	typ       clusterctlv1.ProviderType
	version   string
	namespace string
	groups    []string
}{
	{"cluster-api", clusterctlv1.CoreProviderType, "v1.14.2", "capi-system",
		[]string{"cluster.x-k8s.io", "addons.cluster.x-k8s.io", "ipam.cluster.x-k8s.io", "runtime.cluster.x-k8s.io"}},
	{"kubeadm", clusterctlv1.BootstrapProviderType, "v1.14.2", "capi-kubeadm-bootstrap-system", []string{"bootstrap.cluster.x-k8s.io"}},
	{"kubeadm", clusterctlv1.ControlPlaneProviderType, "v1.14.2", "capi-kubeadm-control-plane-system", []string{"controlplane.cluster.x-k8s.io"}},
	{"baremetal", clusterctlv1.InfrastructureProviderType, "v0.1.0", "baremetal-system", []string{"infrastructure.upgradelab.dev", "metal3.io"}},
	{"in-memory", clusterctlv1.InfrastructureProviderType, "v1.14.4", "capd-system", []string{"infrastructure.cluster.x-k8s.io"}},
}

// installAsClusterctl makes the plane look as `clusterctl init` leaves a
// management cluster, in what CAPI's specs read: every provider's CRDs
// carry clusterctl's labels (clusterctl.cluster.x-k8s.io and
// cluster.x-k8s.io/provider; the specs' dumps and clusterctl's move
// discovery find CAPI's types by them), and clusterctl's inventory has a
// Provider object per provider (clusterctl finds the version of a
// provider's templates there), created with clusterctl's own inventory
// client.
func installAsClusterctl(ctx context.Context, env *runner.Env, infra string) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := env.Client.List(ctx, crds); err != nil {
		return err
	}
	providerOf := map[string]clusterctlv1.Provider{}
	for _, p := range inventory {
		prov := clusterctlv1.Provider{ProviderName: p.name, Type: string(p.typ)}
		for _, g := range p.groups {
			providerOf[g] = prov
		}
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		p, ok := providerOf[crd.Spec.Group]
		if !ok {
			continue
		}
		before := crd.DeepCopy()
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		crd.Labels[clusterv1.ProviderNameLabel] = p.ManifestLabel()
		if err := env.Client.Patch(ctx, crd, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("labelling CRD %s: %w", crd.Name, err)
		}
	}
	configClient, err := clusterctlconfig.New(ctx, "")
	if err != nil {
		return err
	}
	inv := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: env.Plane.Kubeconfig}, configClient).ProviderInventory()
	if err := inv.EnsureCustomResourceDefinitions(ctx); err != nil {
		return err
	}
	for _, p := range inventory {
		if p.typ == clusterctlv1.InfrastructureProviderType && p.name != infra {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		prov := clusterctlv1.Provider{
			ObjectMeta:   metav1.ObjectMeta{Namespace: p.namespace, Name: clusterctlv1.ManifestLabel(p.name, p.typ)},
			ProviderName: p.name, Type: string(p.typ), Version: p.version,
		}
		prov.Labels = map[string]string{clusterctlv1.ClusterctlLabel: "", clusterv1.ProviderNameLabel: prov.ManifestLabel()}
		if err := inv.Create(ctx, prov); err != nil {
			return fmt.Errorf("clusterctl inventory %s: %w", prov.Name, err)
		}
	}
	return nil
}

// waitFor polls cond every 500 ms until it is true or d passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}
