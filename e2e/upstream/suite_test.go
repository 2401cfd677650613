//go:build e2e

package upstream

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
)

var (
	artifactsFlag = flag.String("artifacts", "", "folder for every artifact of this run (default ../../_artifacts/upstream-TIME)")
	timeScaleFlag = flag.Float64("time-scale", 0.01, "real time per modelled time in the lab")
	skipCleanup   = flag.Bool("skip-cleanup", false, "keep each spec's cluster and namespace (CAPI's SkipCleanup)")
	rateLimitFlag = flag.Bool("capi-rate-limiting", true, "run CAPI's managers with their per-object reconcile rate limit, as CAPI ships them (false: off, faster)")
)

// ctx is the context CAPI's spec functions take when they are declared.
var ctx = context.Background()

// shared is what the first process builds and hands to the others.
var shared struct{ Provider, Extension, Artifacts string }

func artifactsDir() string {
	if *artifactsFlag == "" {
		*artifactsFlag = filepath.Join("..", "..", "_artifacts", "upstream-"+time.Now().Format("20060102-150405"))
	}
	return *artifactsFlag
}

func TestUpstream(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "upgradelab upstream (CAPI's e2e specs)")
}

var _ = SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	Expect(os.MkdirAll(artifactsDir(), 0o755)).To(Succeed())
	By("building the reference provider and the in-place extension")
	bin := filepath.Join(artifactsDir(), "bin")
	abs, err := filepath.Abs(artifactsDir())
	Expect(err).NotTo(HaveOccurred())
	bins, err := reference.BuildAll(ctx, bin)
	Expect(err).NotTo(HaveOccurred())
	built := shared
	built.Artifacts, built.Provider, built.Extension = abs, bins.Provider, bins.Extension
	buildSelectedManagers(ctx)
	data, err := json.Marshal(built)
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	Expect(json.Unmarshal(data, &shared)).To(Succeed())
	*artifactsFlag = shared.Artifacts
	// What controller-runtime and net/http log in this process goes to a
	// file of its own, not among CAPI's spec output.
	name := "stdlog.txt"
	if cfg, _ := GinkgoConfiguration(); cfg.ParallelTotal > 1 {
		name = fmt.Sprintf("stdlog-%d.txt", cfg.ParallelProcess)
	}
	stdlog, err := os.Create(filepath.Join(artifactsDir(), name))
	Expect(err).NotTo(HaveOccurred())
	log.SetOutput(stdlog)
	ctrllog.SetLogger(zap.New(zap.WriteTo(stdlog)))
}, NodeTimeout(45*time.Minute)) // a cold build of CAPD takes minutes on 2 cores

// buildSelectedManagers builds the managers from source (CAPD) of every
// provider config the label filter runs a spec of, before any spec
// starts, with a line when each build starts and ends: no spec's time
// goes to a build. The first process's output reaches the terminal as
// it comes while the suite's set-up runs.
func buildSelectedManagers(ctx context.Context) {
	filter, err := types.ParseLabelFilter(GinkgoLabelFilter())
	Expect(err).NotTo(HaveOccurred())
	for _, name := range slices.Sorted(maps.Keys(specLabels)) {
		if !slices.ContainsFunc(specLabels[name], filter) {
			continue
		}
		cfg, err := provider.Load(filepath.Join("..", "..", "fixtures", "providers", name+".yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, m := range cfg.Managers {
			Expect(cfg.Build(ctx, m, filepath.Join("..", ".."), mgmt.CacheDir(), os.Stdout)).To(Succeed())
		}
	}
}

// Each process stops the planes and labs it started.
var _ = SynchronizedAfterSuite(func() { stopEnvs() }, func() {})

var _ = ReportAfterSuite("summary", func(r Report) {
	abs, _ := filepath.Abs(artifactsDir())
	summary := summarize(r)
	fmt.Fprint(os.Stdout, "\n"+summary.Text())
	if err := summary.Write(abs); err != nil {
		fmt.Fprintf(os.Stdout, "writing the summary: %v\n", err)
	}
	fmt.Fprintf(os.Stdout, "\nupgradelab upstream artifacts: %s (summary.txt, results.json, junit.xml, one folder per provider)\n", abs)
})
