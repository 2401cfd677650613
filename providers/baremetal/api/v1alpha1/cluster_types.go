package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// BareMetalClusterSpec is where the cluster's API server answers. On bare
// metal that is a virtual IP the site assigns (kube-vip, a load balancer),
// not something the provider creates, so the user gives it.
type BareMetalClusterSpec struct {
	// ControlPlaneEndpoint is the API server's VIP and port.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty"`
	// FailureDomains are the site's failure domains (racks, rows, power
	// feeds), as CAPM3's Metal3Cluster declares them: the hosts of each
	// carry the label FailureDomainLabel with its name. CAPI spreads the
	// control plane's Machines over those with controlPlane true, and a
	// Machine with a failure domain gets a host of that domain only.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
}

// BareMetalClusterStatus follows the v1beta2 InfraCluster contract.
type BareMetalClusterStatus struct {
	// Initialization tells CAPI when the cluster's infrastructure is ready.
	// +optional
	Initialization Initialization `json:"initialization,omitempty"`
	// FailureDomains is the InfraCluster contract's list CAPI copies into
	// the Cluster's status: spec.failureDomains, as they are.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
	// Conditions: Ready, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Initialization is the contract's provisioning flag.
type Initialization struct {
	// Provisioned is true once the infrastructure is ready for CAPI.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// BareMetalCluster is the infrastructure of one workload cluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cluster-api
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
type BareMetalCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BareMetalClusterSpec   `json:"spec,omitempty"`
	Status BareMetalClusterStatus `json:"status,omitempty"`
}

// BareMetalClusterList is a list of BareMetalClusters.
// +kubebuilder:object:root=true
type BareMetalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BareMetalCluster `json:"items"`
}

// BareMetalClusterTemplateResource is what a ClusterClass stamps out.
type BareMetalClusterTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       BareMetalClusterSpec `json:"spec"`
}

// BareMetalClusterTemplateSpec holds the template.
type BareMetalClusterTemplateSpec struct {
	Template BareMetalClusterTemplateResource `json:"template"`
}

// BareMetalClusterTemplate is the ClusterClass infrastructure template.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=cluster-api
type BareMetalClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BareMetalClusterTemplateSpec `json:"spec,omitempty"`
}

// BareMetalClusterTemplateList is a list of BareMetalClusterTemplates.
// +kubebuilder:object:root=true
type BareMetalClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BareMetalClusterTemplate `json:"items"`
}

func init() {
	schemeBuilder.Register(&BareMetalCluster{}, &BareMetalClusterList{}, &BareMetalClusterTemplate{}, &BareMetalClusterTemplateList{})
}
