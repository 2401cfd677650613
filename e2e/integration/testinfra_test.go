package integration

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testInfraGroup holds stand-in infrastructure kinds for tests that run
// before the bare-metal provider exists: CAPI only reads a few contract
// fields of them (spec.controlPlaneEndpoint, status.initialization), which
// the test sets by hand.
const testInfraGroup = "infrastructure.test.upgradelab.dev"

// testInfraAccess grants CAPI's managers the stand-in kinds, as CAPI's
// contract asks of a provider outside infrastructure.cluster.x-k8s.io
// (an aggregated ClusterRole); without it CAPI's core manager, which
// runs with only its own RBAC, cannot read them.
func testInfraAccess() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-infra-capi-access", Labels: map[string]string{
			"cluster.x-k8s.io/aggregate-to-manager": "true", "kubeadm.controlplane.cluster.x-k8s.io/aggregate-to-manager": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{testInfraGroup}, Resources: []string{"*"},
			Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}}},
	}
}

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
