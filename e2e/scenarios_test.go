//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/timescale"
)

// scenarioGlob picks the scenario files: UPGRADELAB_SCENARIOS (globs
// separated by spaces), or every file of scenarios/ (`make e2e-faults`
// points it at scenarios/faults/).
// An environment variable, as Ginkgo builds the spec tree before flags
// are parsed.
var scenarioGlob = func() string {
	if g := os.Getenv("UPGRADELAB_SCENARIOS"); g != "" {
		return g
	}
	return "../scenarios/*.yaml"
}()

// providerConfigs are the providers the scenarios run against:
// UPGRADELAB_PROVIDERS (config files relative to the repository, separated
// by commas or spaces), or the reference provider and CAPI's in-memory
// provider, so the conformance table shows a provider nobody here wrote
// beside ours.
var providerConfigs = func() []*provider.Config {
	list := os.Getenv("UPGRADELAB_PROVIDERS")
	if list == "" {
		list = "fixtures/providers/baremetal.yaml fixtures/providers/inmemory.yaml"
	}
	var out []*provider.Config
	for _, p := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !filepath.IsAbs(p) {
			p = filepath.Join("..", p)
		}
		c, err := provider.Load(p)
		if err != nil {
			panic(err) // a bad provider config stops the suite before it starts, naming file and field
		}
		out = append(out, c)
	}
	return out
}()

var (
	resultsMu sync.Mutex
	results   []runner.Result
)

func scenarioResults() []runner.Result {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	return append([]runner.Result(nil), results...)
}

// Each scenario file, in each of its forms, against each provider that
// supports its strategy, is one spec labelled with the provider, the
// scenario's name, strategy and form (`make e2e GINKGO_LABELS=in-place`
// runs only those). A broken rule fails the spec with the moment, the
// objects and the rule.
var _ = Describe("upgrade scenarios", Label("scenario"), func() {
	var paths []string
	for _, g := range strings.Fields(scenarioGlob) {
		found, err := filepath.Glob(g)
		if err != nil {
			panic(fmt.Sprintf("scenarios %s: %v", g, err))
		}
		paths = append(paths, found...)
	}
	if len(paths) == 0 {
		panic(fmt.Sprintf("no scenarios at %s", scenarioGlob))
	}
	for _, path := range paths {
		s, def, err := scenario.Load(path)
		if err != nil {
			panic(err) // a bad scenario file stops the suite before it starts, naming file and field
		}
		for _, prov := range providerConfigs {
			if ok, _ := prov.Runs(s); !ok {
				continue // not a spec: the table shows only what a provider can run
			}
			for _, form := range s.Forms {
				It(fmt.Sprintf("%s (%s) on %s", s.Name, form, prov.Name), Label(prov.Name, s.Name, string(s.Strategy), string(form)), func(ctx context.Context) {
					dir, _ := filepath.Abs(filepath.Join(artifactsDir(), prov.Name+"-"+s.Name+"-"+string(form)))
					res := runner.Run(ctx, s, def, form, runner.Options{
						RepoRoot: "..", Dir: dir, Scale: timescale.Scale(*timeScaleFlag), Progress: GinkgoWriter,
						ProviderBinary: binaries.provider, ExtensionBinary: binaries.extension, Provider: prov,
						RateLimitedReconciles: *rateLimitFlag,
					})
					resultsMu.Lock()
					results = append(results, res)
					resultsMu.Unlock()
					Expect(res.Error).To(BeEmpty(), "the run stopped early")
					var broken []string
					for _, v := range check.Failed(res.Checks) {
						broken = append(broken, v.String())
					}
					Expect(broken).To(BeEmpty(), "broken rules (timeline %s):\n%s", res.Timeline, strings.Join(broken, "\n"))
				}, SpecTimeout(s.Timeout.Duration+2*time.Minute))
			}
		}
	}
})
