package runner

import (
	"path/filepath"
	"testing"

	"github.com/upgradelab/upgradelab/e2e/plan"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// repoScenario is the repository's root and its scenarios/NAME.yaml
// with the scenario's lab.
func repoScenario(tb testing.TB, name string) (string, *scenario.Scenario, *lab.Definition) {
	tb.Helper()
	root, err := reference.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	s, def, err := plan.Load(filepath.Join(root, "scenarios", name+".yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return root, s, def
}

// repoProvider is the repository's fixtures/providers/NAME.yaml.
func repoProvider(tb testing.TB, root, name string) *provider.Config {
	tb.Helper()
	cfg, err := provider.Load(filepath.Join(root, "fixtures", "providers", name+".yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}
