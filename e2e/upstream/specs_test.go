//go:build e2e

package upstream

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upstreamProvider is a provider CAPI's specs run against: its provider
// config (fixtures/providers/NAME.yaml, which says what runs beside CAPI's
// managers), its infrastructure provider's name in the E2EConfig, and the
// one provider-specific input (a field of its machine template that makes
// ClusterClassChangesSpec roll the workers out).
type upstreamProvider struct {
	// label is the one its specs carry (GINKGO_LABELS=baremetal).
	config, infra, label string
	mdInfraChange        map[string]interface{}
	// unset are E2EConfig variables this provider runs without, each for
	// a reason its comment gives.
	unset []string
	// filterMetadata drops what the provider itself writes into its
	// objects' labels and annotations before ClusterClassRolloutSpec
	// compares them with the topology's (nil: nothing).
	filterMetadata func(client.Object) clusterv1.ObjectMeta
}

var (
	baremetal = upstreamProvider{config: "baremetal", infra: "baremetal", label: "baremetal",
		// Every lab host carries pool: upstream, so the rollout still finds hosts.
		mdInfraChange: map[string]interface{}{"spec.template.spec.hostSelector.matchLabels.pool": "upstream"}}
	// CAPI's in-memory provider with CAPI's test extension (for the
	// in-place spec; it serves only that spec's namespace).
	inMemory = upstreamProvider{config: "inmemory-testextension", infra: "in-memory", label: "inmemory",
		mdInfraChange: map[string]interface{}{"spec.template.spec.backend.inMemory.vm.provisioning.startupDuration": "4s"},
		// CAPD's in-memory workload clusters cannot show an etcd or CoreDNS
		// upgrade: their static pods carry no image, and their API server
		// answers KCP's CoreDNS ConfigMap update with a Conflict, so
		// CoreDNS never moves. Without these variables the upgrade spec
		// does not set the tags, nor wait for them.
		unset: []string{"ETCD_VERSION_UPGRADE_TO", "COREDNS_VERSION_UPGRADE_TO"},
		// CAPD's in-memory backend annotates its DevClusters and
		// DevMachines (CAPI's own run of this spec drops the same two).
		filterMetadata: func(o client.Object) clusterv1.ObjectMeta {
			annotations := o.GetAnnotations()
			delete(annotations, "inmemorycluster.infrastructure.cluster.x-k8s.io/listener")
			delete(annotations, "machine.inmemory.infrastructure.cluster.x-k8s.io/bootstrapped")
			return clusterv1.ObjectMeta{Labels: o.GetLabels(), Annotations: annotations}
		}}
)

// upstreamSpecs declares CAPI's specs against one provider. Each spec's
// input is built when the spec starts (CAPI calls the getter in its
// BeforeEach), so a process starts a provider's plane only for the specs
// it runs. Every spec with Kubernetes conformance (kubetest) skips it:
// kubetest runs the conformance suite's pods, which nothing here can run.
func upstreamSpecs(p upstreamProvider) {
	name := p.config
	infra := ptr.To(p.infra)
	artifacts := func(spec string) string { return filepath.Join(processDir(name), "specs", spec) }

	Describe("QuickStart", specLabel(p, "quick-start"), func() {
		capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
			e := envFor(p)
			return capie2e.QuickStartSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("quick-start"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, PostNamespaceCreated: e.namespaceSetup(false)}
		})
	})
	Describe("QuickStart topology", specLabel(p, "quick-start", "topology"), func() {
		capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
			e := envFor(p)
			return capie2e.QuickStartSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("quick-start-topology"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, Flavor: ptr.To("topology"), PostNamespaceCreated: e.namespaceSetup(false)}
		})
	})
	for _, u := range []struct {
		flavor  string
		cp, wrk int64
	}{{"upgrades", 1, 2}, {"topology", 1, 2}, {"kcp-scale-in", 3, 1}} {
		Describe("ClusterUpgradeConformance "+u.flavor, specLabel(p, "k8s-upgrade", u.flavor), func() {
			capie2e.ClusterUpgradeConformanceSpec(ctx, func() capie2e.ClusterUpgradeConformanceSpecInput {
				e := envFor(p)
				return capie2e.ClusterUpgradeConformanceSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
					BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("k8s-upgrade-" + u.flavor), SkipCleanup: *skipCleanup,
					SkipConformanceTests: true, InfrastructureProvider: infra, Flavor: ptr.To(u.flavor),
					ControlPlaneMachineCount: ptr.To(u.cp), WorkerMachineCount: ptr.To(u.wrk),
					PostNamespaceCreated: e.namespaceSetup(false)}
			})
		})
	}
	Describe("MachineDeploymentScale", specLabel(p, "md-scale"), func() {
		capie2e.MachineDeploymentScaleSpec(ctx, func() capie2e.MachineDeploymentScaleSpecInput {
			e := envFor(p)
			return capie2e.MachineDeploymentScaleSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("md-scale"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, PostNamespaceCreated: e.namespaceSetup(false)}
		})
	})
	rolloutSpecs(p, infra, artifacts)
}

// rolloutSpecs declares CAPI's rollout, ClusterClass, in-place, adoption
// and remediation specs (upstreamSpecs).
func rolloutSpecs(p upstreamProvider, infra *string, artifacts func(spec string) string) {
	Describe("KCPAndMachineDeploymentRollout", specLabel(p, "md-rollout"), func() {
		capie2e.KCPAndMachineDeploymentRolloutSpec(ctx, func() capie2e.KCPAndMachineDeploymentRolloutSpecInput {
			e := envFor(p)
			return capie2e.KCPAndMachineDeploymentRolloutSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("md-rollout"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, Flavor: "kcp-md-taints", PostNamespaceCreated: e.namespaceSetup(false)}
		})
	})
	Describe("ClusterClassRollout", specLabel(p, "clusterclass-rollout"), func() {
		capie2e.ClusterClassRolloutSpec(ctx, func() capie2e.ClusterClassRolloutSpecInput {
			e := envFor(p)
			return capie2e.ClusterClassRolloutSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("clusterclass-rollout"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, Flavor: "topology", PostNamespaceCreated: e.namespaceSetup(false),
				FilterMetadataBeforeValidation: p.filterMetadata}
		})
	})
	Describe("ClusterClassChanges", specLabel(p, "clusterclass-changes"), func() {
		capie2e.ClusterClassChangesSpec(ctx, func() capie2e.ClusterClassChangesSpecInput {
			e := envFor(p)
			return capie2e.ClusterClassChangesSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("clusterclass-changes"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, Flavor: "topology", PostNamespaceCreated: e.namespaceSetup(false),
				ModifyControlPlaneFields:                                   map[string]interface{}{"spec.kubeadmConfigSpec.verbosity": int64(4)},
				ModifyMachineDeploymentBootstrapConfigTemplateFields:       map[string]interface{}{"spec.template.spec.verbosity": int64(4)},
				ModifyMachineDeploymentInfrastructureMachineTemplateFields: p.mdInfraChange,
			}
		})
	})
	Describe("ClusterInPlaceUpdate", specLabel(p, "in-place"), func() {
		capie2e.ClusterInPlaceUpdateSpec(ctx, func() capie2e.ClusterInPlaceUpdateSpecInput {
			e := envFor(p)
			return capie2e.ClusterInPlaceUpdateSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("in-place"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, Flavor: ptr.To("in-place"), PostNamespaceCreated: e.namespaceSetup(true)}
		})
	})
	Describe("KCPAdoption", specLabel(p, "kcp-adoption"), func() {
		capie2e.KCPAdoptionSpec(ctx, func() capie2e.KCPAdoptionSpecInput {
			e := envFor(p)
			return capie2e.KCPAdoptionSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("kcp-adoption"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, PostNamespaceCreated: e.namespaceSetup(false)}
		})
	})
	Describe("MachineDeploymentRemediation", specLabel(p, "md-remediation"), func() {
		capie2e.MachineDeploymentRemediationSpec(ctx, func() capie2e.MachineDeploymentRemediationSpecInput {
			e := envFor(p)
			return capie2e.MachineDeploymentRemediationSpecInput{E2EConfig: e.config, ClusterctlConfigPath: e.clusterctlConfig,
				BootstrapClusterProxy: e.proxy, ArtifactFolder: artifacts("md-remediation"), SkipCleanup: *skipCleanup,
				InfrastructureProvider: infra, PostNamespaceCreated: e.namespaceSetup(false)}
		})
	})
}

// specLabel is Label, and records the spec's labels, with its provider's,
// so the suite knows which providers the label filter runs before any
// spec starts (specLabels).
func specLabel(p upstreamProvider, labels ...string) Labels {
	specLabels[p.config] = append(specLabels[p.config], append([]string{p.label}, labels...))
	return Label(labels...)
}

// specLabels are each provider config's specs' labels, recorded as the
// spec tree is built (before the suite's set-up runs).
var specLabels = map[string][][]string{}

var _ = Describe("baremetal", Label(baremetal.label), func() { upstreamSpecs(baremetal) })

// CAPD's in-memory backend binds :19000 whatever its flags say, so its
// specs run one after another on one process (Ordered), while the other
// processes take the baremetal specs; the chain is handed out first
// (SpecPriority), as the longest piece.
var _ = Describe("in-memory", Label(inMemory.label), Ordered, ContinueOnFailure, SpecPriority(1), func() { upstreamSpecs(inMemory) })
