// Package v1alpha1 is the reference bare-metal provider's API: the Cluster
// API infrastructure kinds (contract v1beta2) for clusters and machines on
// the hosts of a BareMetalHost inventory.
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
