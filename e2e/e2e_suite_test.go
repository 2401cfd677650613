//go:build e2e

// The e2e suite: the upgrade scenarios of scenarios/ against the real
// CAPI managers, each in its forms, plus the plane's and the lab's own
// promises. Run it with `make e2e`; flags after -args choose the
// management cluster of the plane spec, the artifacts folder and the time
// scale. Every scenario run has its own lab and plane.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/report"
)

var (
	artifactsFlag  = flag.String("artifacts", "", "folder for every artifact of this run (default ./_artifacts/e2e-TIME)")
	managementFlag = flag.String("management", "embedded", `management cluster: "embedded" or "kubeconfig=PATH"`)
	timeScaleFlag  = flag.Float64("time-scale", 0.01, "real time per modelled time in the lab (0.01: a modelled minute takes 0.6 s)")
	rateLimitFlag  = flag.Bool("capi-rate-limiting", false, "run CAPI's managers with their per-object reconcile rate limit (CAPI's default; off here, see docs/ARCHITECTURE.md)")
)

// binaries are the provider's and the extension's, built once per suite.
var binaries struct{ provider, extension string }

// artifactsDir is -artifacts, or a new folder under _artifacts chosen on
// first use: the report always lands in the run's folder, even when
// BeforeSuite did not run (a dry run), never in the package directory.
func artifactsDir() string {
	if *artifactsFlag == "" {
		*artifactsFlag = filepath.Join("_artifacts", "e2e-"+time.Now().Format("20060102-150405"))
	}
	return *artifactsFlag
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "upgradelab e2e")
}

var _ = BeforeSuite(func(ctx context.Context) {
	Expect(os.MkdirAll(artifactsDir(), 0o755)).To(Succeed())
	// net/http's complaints from CAPI's in-memory workload API servers
	// ("superfluous response.WriteHeader") and what controller-runtime
	// logs in this process (envtest starting the API server, the
	// recorder's caches) go to a file, not among the progress lines.
	stdlog, err := os.Create(filepath.Join(artifactsDir(), "stdlog.txt"))
	Expect(err).NotTo(HaveOccurred())
	log.SetOutput(stdlog)
	ctrllog.SetLogger(zap.New(zap.WriteTo(stdlog)))
	By("building the reference provider and the in-place extension")
	bin := filepath.Join(artifactsDir(), "bin")
	binaries.provider, err = reference.Build(ctx, bin, reference.ProviderCommand)
	Expect(err).NotTo(HaveOccurred())
	binaries.extension, err = reference.Build(ctx, bin, reference.ExtensionCommand)
	Expect(err).NotTo(HaveOccurred())
	for _, prov := range providerConfigs {
		for _, m := range prov.Managers {
			if m.Package == "" {
				continue
			}
			By(fmt.Sprintf("building %s's manager %s from %s (cached per module version)", prov.Name, m.Name, m.Module))
			_, err := prov.Process(ctx, m, "..", mgmt.CacheDir())
			Expect(err).NotTo(HaveOccurred())
		}
	}
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterSuite("artifacts", func(Report) {
	abs, _ := filepath.Abs(artifactsDir())
	if err := report.Write(abs, scenarioResults()); err != nil {
		fmt.Fprintf(os.Stdout, "\nwriting the report: %v\n", err)
	}
	fmt.Fprintf(os.Stdout, "\nupgradelab e2e artifacts: %s (report.html, junit.xml, one folder per scenario run)\n", abs)
})
