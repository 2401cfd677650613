//go:build e2e

// The e2e suite: upgrade scenarios against the real CAPI managers. Run it
// with `make e2e`; flags after -args choose the management cluster and the
// artifacts folder.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

var (
	artifactsFlag  = flag.String("artifacts", "", "folder for every artifact of this run (default ./_artifacts/e2e-TIME)")
	managementFlag = flag.String("management", "embedded", `management cluster: "embedded" or "kubeconfig=PATH"`)
	timeScaleFlag  = flag.Float64("time-scale", 0.01, "real time per modelled time in the lab (0.01: a modelled minute takes 0.6 s)")
)

// plane is the management cluster every spec of this run shares.
var plane *mgmt.Plane

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "upgradelab e2e")
}

var _ = BeforeSuite(func(ctx context.Context) {
	if *artifactsFlag == "" {
		*artifactsFlag = filepath.Join("_artifacts", "e2e-"+time.Now().Format("20060102-150405"))
	}
	Expect(os.MkdirAll(*artifactsFlag, 0o755)).To(Succeed())
	target, err := mgmt.ParseTarget(*managementFlag)
	Expect(err).NotTo(HaveOccurred())
	By("starting the management plane (" + target.String() + ")")
	plane, err = mgmt.Start(ctx, mgmt.Options{Target: target, ArtifactsDir: *artifactsFlag, Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(plane.Stop)
}, NodeTimeout(5*time.Minute))

var _ = ReportAfterSuite("artifacts", func(Report) {
	abs, _ := filepath.Abs(*artifactsFlag)
	fmt.Fprintf(os.Stdout, "\nupgradelab e2e artifacts: %s\n", abs)
})
