// Package v1alpha1 is the reference bare-metal provider's API: the Cluster
// API infrastructure kinds (contract v1beta2) for clusters and machines on
// the hosts of a BareMetalHost inventory, in the group
// infrastructure.upgradelab.dev.
//
// The kinds:
//   - [BareMetalCluster]: the user gives the API server's endpoint
//     (spec.controlPlaneEndpoint). On bare metal that is a VIP the site
//     assigns (kube-vip, a load balancer), not something the provider
//     creates, so the cluster is provisioned as soon as it is set.
//     spec.failureDomains are copied to the status for CAPI, as CAPM3's
//     Metal3Cluster declares them.
//   - [BareMetalMachine]: one host's worth of a Machine: the image (URL
//     and sha256), the host selector and, optionally, the NIC firmware
//     package the in-place extension flashes. Its status names the bound
//     host, the image it runs and its addresses, with the conditions
//     Ready, HostAssociated and HostProvisioned; InPlaceUpdated is written by the in-place
//     extension (providers/inplace), never by the provider.
//   - [BareMetalMachineTemplate]: what KubeadmControlPlanes, MachineSets and
//     ClusterClasses clone, with NodeReuse (CAPM3's nodeReuse); immutable,
//     as the contract asks.
//   - [BareMetalClusterTemplate]: the ClusterClass infrastructure template.
//
// The BareMetalHost kind is Metal3's own
// (github.com/metal3-io/baremetal-operator/apis), unchanged, so the
// inventory can be served and consumed by either half of the provider or
// by another BareMetalHost-based provider. What the provider puts on those
// hosts is named here: [SpareLabel], [NodeReuseLabel] and
// [FailureDomainLabel] (CAPM3's label). A provisioned host's spec.image is
// never changed: baremetal-operator deprovisions a host whose spec.image
// no longer names the image it provisioned, so an image received in place
// is recorded in the machine's status.image instead. Provider IDs start
// with [ProviderIDScheme] (upgradelab://HOST/MACHINE).
//
// The generated deep copies (zz_generated.deepcopy.go) and the CRDs
// (providers/baremetal/config/crd) are committed; make generate writes
// them. What the schema cannot check, package webhooks does.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.upgradelab.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.upgradelab.dev", Version: "v1alpha1"}

var schemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds the kinds of this package to a scheme.
var AddToScheme = schemeBuilder.AddToScheme
