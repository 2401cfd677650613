package integration

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testInfraGroup holds stand-in infrastructure kinds for tests that run
// before the bare-metal provider exists: CAPI only reads a few contract
// fields of them (spec.controlPlaneEndpoint, status.initialization), which
// the test sets by hand.
const testInfraGroup = "infrastructure.test.upgradelab.dev"

func testInfraCRD(kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name: plural + "." + testInfraGroup,
			// The CAPI contract label: v1alpha1 serves the v1beta2 contract.
			Labels: map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha1"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: testInfraGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: plural[:len(plural)-1]},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}
