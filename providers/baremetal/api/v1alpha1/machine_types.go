package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Labels and annotations the provider puts on BareMetalHosts.
const (
	// SpareLabel marks a host kept free for the next surge machine; spares
	// are claimed first, and a host freed by a rollout becomes one.
	SpareLabel = "upgradelab.dev/spare"
	// NodeReuseLabel reserves a released host for the next machine of the
	// same owner (KubeadmControlPlane or MachineDeployment), as CAPM3's
	// node reuse does; its value is the owner's name.
	NodeReuseLabel = "infrastructure.upgradelab.dev/node-reuse"
	// FailureDomainLabel puts a host in a failure domain (its value, a
	// name of the BareMetalCluster's spec.failureDomains); CAPM3's label.
	FailureDomainLabel = "infrastructure.cluster.x-k8s.io/failure-domain"
	// ClonedFromAnnotation is set by CAPI on machines cloned from a
	// template (the template's name).
	ClonedFromAnnotation = "cluster.x-k8s.io/cloned-from-name"
)

// ProviderIDScheme starts every provider ID the provider gives.
const ProviderIDScheme = "upgradelab://"

// Image is the OS image written to the host's disk.
type Image struct {
	// URL serves the image.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// Checksum is the image's sha256 (hex); a mismatch fails provisioning
	// before anything is written.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Checksum string `json:"checksum"`
}

// BareMetalMachineSpec is one host's worth of a Machine.
type BareMetalMachineSpec struct {
	// ProviderID is set by the provider once a host is bound:
	// upgradelab://HOST/MACHINE (the host's name and this object's).
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// Image is installed on the host.
	Image Image `json:"image"`
	// HostSelector picks the pool of hosts this machine may claim.
	// +optional
	HostSelector metav1.LabelSelector `json:"hostSelector,omitempty"`
	// NICFirmware is the NVM every NIC port of the host should run. The
	// in-place update extension flashes it through the BMC, before or
	// after the new image so the NIC never stops working; provisioning a
	// new host does not flash it yet.
	// +optional
	NICFirmware *FirmwarePackage `json:"nicFirmware,omitempty"`
}

// FirmwarePackage is a firmware update package a BMC can fetch.
type FirmwarePackage struct {
	// URL serves the package; its last path element names the image.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
}

// BareMetalMachineStatus follows the v1beta2 InfraMachine contract.
type BareMetalMachineStatus struct {
	// +optional
	Initialization Initialization `json:"initialization,omitempty"`
	// Addresses of the host (hostname and internal IPs).
	// +optional
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`
	// Host is the BareMetalHost bound to this machine (same namespace).
	// +optional
	Host string `json:"host,omitempty"`
	// Image is the image the host runs: the one it was provisioned with,
	// then each one the in-place extension reported the host updated to.
	// It is kept here and not in the host's spec.image, which
	// baremetal-operator answers by deprovisioning a provisioned host
	// when it changes; the host's status.provisioning.image keeps naming
	// the image it was provisioned with.
	// +optional
	Image *Image `json:"image,omitempty"`
	// Conditions: Ready, HostAssociated, HostProvisioned; InPlaceUpdated
	// (written by the in-place update extension).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of a BareMetalMachine.
const (
	ReadyCondition = "Ready"

	HostAssociatedCondition = "HostAssociated"
	// WaitingForHostReason: no available host matches the selector.
	WaitingForHostReason = "WaitingForHost"
	HostAssociatedReason = "HostAssociated"

	HostProvisionedCondition = "HostProvisioned"
	// WaitingForBootstrapDataReason: CAPI has not written the data secret.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	ProvisioningReason            = "Provisioning"
	ProvisionedReason             = "Provisioned"
	// ProvisioningErrorReason carries the host's error message.
	ProvisioningErrorReason = "ProvisioningError"
	// DeletingReason: the host is being released.
	DeletingReason = "Deleting"

	// InPlaceUpdatedCondition is written by the in-place update extension
	// (providers/inplace), not by this provider: False while an update
	// runs (InPlaceUpdatingReason) or after it failed
	// (InPlaceUpdateFailedReason, the message says why and what the host
	// runs), True once the last update completed. CAPI's Machine shows
	// a failure only as its Updating condition's InPlaceUpdateFailed.
	InPlaceUpdatedCondition   = "InPlaceUpdated"
	InPlaceUpdatingReason     = "InPlaceUpdating"
	InPlaceUpdateFailedReason = "InPlaceUpdateFailed"
	InPlaceUpdatedReason      = "InPlaceUpdated"
	// InPlaceUpdateAbandonedReason: the update failed and its owner was
	// reverted; the host runs the image it fell back to, and the update
	// goes on to what the owner asks now (a KCP's Machine) or is ended.
	InPlaceUpdateAbandonedReason = "InPlaceUpdateAbandoned"
)

// BareMetalMachine binds a CAPI Machine to one BareMetalHost.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cluster-api
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Host",type="string",JSONPath=".status.host"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
type BareMetalMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BareMetalMachineSpec   `json:"spec,omitempty"`
	Status BareMetalMachineStatus `json:"status,omitempty"`
}

// BareMetalMachineList is a list of BareMetalMachines.
// +kubebuilder:object:root=true
type BareMetalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BareMetalMachine `json:"items"`
}

// BareMetalMachineTemplateResource is what KCP, MachineSets and
// ClusterClasses clone.
type BareMetalMachineTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       BareMetalMachineSpec `json:"spec"`
}

// BareMetalMachineTemplateSpec holds the template and how its machines
// treat released hosts.
type BareMetalMachineTemplateSpec struct {
	Template BareMetalMachineTemplateResource `json:"template"`
	// NodeReuse reserves a host released by one of this template's
	// machines for the next machine of the same owner, so a scale-in
	// rollout ends on the same set of hosts (CAPM3's nodeReuse).
	// +optional
	NodeReuse bool `json:"nodeReuse,omitempty"`
}

// BareMetalMachineTemplate is a machine template; immutable, as the
// contract asks.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=cluster-api
type BareMetalMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BareMetalMachineTemplateSpec `json:"spec,omitempty"`
}

// BareMetalMachineTemplateList is a list of BareMetalMachineTemplates.
// +kubebuilder:object:root=true
type BareMetalMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BareMetalMachineTemplate `json:"items"`
}

func init() {
	schemeBuilder.Register(&BareMetalMachine{}, &BareMetalMachineList{}, &BareMetalMachineTemplate{}, &BareMetalMachineTemplateList{})
}
