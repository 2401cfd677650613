//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// The first promise of the harness: the management cluster runs Cluster
// API's own controllers, so every later verdict is CAPI's behaviour.
var _ = Describe("management plane", Label("plane"), func() {
	It("runs the CAPI core controller against the cluster", func(ctx context.Context) {
		target, err := mgmt.ParseTarget(*managementFlag)
		Expect(err).NotTo(HaveOccurred())
		By("starting the management plane (" + target.String() + ")")
		plane, err := mgmt.Start(ctx, mgmt.Options{Target: target, ArtifactsDir: filepath.Join(artifactsDir(), "plane"), Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(plane.Stop)

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-plane-"}}
		Expect(plane.Client.Create(ctx, ns)).To(Succeed())
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "smoke"},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "smoke-cp",
			}},
		}
		Expect(plane.Client.Create(ctx, cluster)).To(Succeed())

		By("waiting for the core controller's finalizer and Available condition")
		Eventually(func(g Gomega) {
			got := &clusterv1.Cluster{}
			g.Expect(plane.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
			g.Expect(got.Finalizers).To(ContainElement(clusterv1.ClusterFinalizer))
			g.Expect(got.Status.Conditions).To(ContainElement(HaveField("Type", clusterv1.AvailableCondition)))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})
