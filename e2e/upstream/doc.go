// Package upstream runs CAPI's own e2e specs (sigs.k8s.io/cluster-api/test/e2e,
// at the version go.mod pins) against providers on a management plane that
// upgradelab builds: the specs are called unmodified, not copied, with no
// kind, no Docker and no clusterctl init. make e2e-upstream runs the Ginkgo
// suite (the _test files with build tag e2e); docs/PROVIDERS.md says how to
// read its summary and how to add a provider.
//
// The package's one non-test file carries no build tag, so make test
// covers it (TestEveryFlavorRenders renders every flavor with clusterctl's
// own template processing). It holds what depends on a lab: [LabVariables]
// turns the E2EConfig's LAB_IMAGE* variables into the image URLs and
// checksums of that process's image server, plus IMAGES, the
// version-to-image map the ClusterClass's images variable takes, and
// refuses an image that does not carry its variable's Kubernetes version;
// [VIPVariables] is a namespace's VIP as VIP_HOST and VIP_PORT. [Flavors]
// lists the baremetal templates' flavors, [ConfigPath] is the E2EConfig
// and [AddVariables] adds to its variables.
//
// The suite:
//   - specs_test.go declares each spec against each provider: the
//     reference provider, and CAPI's in-memory provider with CAPI's test
//     extension (fixtures/providers/inmemory-testextension.yaml).
//     upstreamProvider holds each provider's few special inputs, each with
//     its reason: the in-memory upgrade spec runs without etcd and CoreDNS
//     tags (its workload clusters cannot show them move), and its rollout
//     spec drops CAPD's own annotations. CAPD's in-memory backend binds
//     :19000 whatever its flags say, so its specs form one Ordered chain on
//     one process, handed out first. Kubernetes conformance is skipped:
//     nothing here runs kubetest's pods.
//   - env_test.go starts a provider's environment on first use in each
//     Ginkgo process: runner.StartEnv with CAPI's managers and the
//     provider's managers for the in-place strategy, the upstream lab for a
//     provider that drives one, the MachineTaintPropagation gate, and
//     kube-controller-manager's garbage collector and namespace controllers
//     (the specs delete in the foreground and delete namespaces). It makes
//     the plane look as clusterctl init leaves one: every provider's CRDs
//     labelled as clusterctl labels them, and clusterctl's inventory
//     created with clusterctl's own inventory client. It loads the
//     E2EConfig with CAPI's loader, builds the clusterctl repository with
//     CAPI's CreateRepository, and makes the ClusterProxy with
//     framework.NewClusterProxy on the plane's kubeconfig. For the
//     in-memory provider that proxy dials each workload cluster at its
//     kubeconfig's address (directWorkloads): CAPI's framework would
//     port-forward through a CAPD pod in kind, and here CAPD is a process
//     on loopback. A manager the API server refused a request for want of
//     RBAC fails the suite when the environments stop.
//   - hosts_test.go is every spec's PostNamespaceCreated. It waits until
//     the previous spec's BareMetalHosts are gone (the namespace controller
//     deletes them with their namespace), enrolls the free hosts, sets the
//     namespace's VIP, and labels the namespace for the in-place extension
//     for the in-place spec only: the other specs count the Machines a
//     rollout creates.
//   - summary_test.go prints each spec's wall time per provider and writes
//     summary.txt and results.json.
//
// CAPI's managers run here as CAPI ships them, with the per-object
// reconcile rate limit (-capi-rate-limiting, UPSTREAM_CAPI_RATE_LIMITING):
// the specs are written against it, and without it KCPAdoptionSpec's
// Get-then-Update of the Cluster, which does not retry, loses the race
// against the cluster controller's status writes ("the object has been
// modified").
package upstream
