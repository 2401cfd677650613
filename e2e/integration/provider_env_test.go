package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/runner"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
	"github.com/upgradelab/upgradelab/sim/site"
)

// providerEnv is a site, a management plane running CAPI's managers and
// the reference provider, and a namespace to work in (runner.Env, with
// the names the tests use).
type providerEnv struct {
	site     *site.Site
	plane    *mgmt.Plane
	c        client.Client
	ns       string
	callback string // the provider's callback URL
}

func startProviderEnv(t *testing.T, ctx context.Context, labName string, scale timescale.Scale, providerArgs ...string) *providerEnv {
	t.Helper()
	return startEnv(t, ctx, envOptions{lab: labName, scale: scale, providerArgs: providerArgs})
}

// envOptions choose the lab and what runs beside CAPI.
type envOptions struct {
	lab          string
	scale        timescale.Scale
	providerArgs []string
	// providerConfig replaces the provider's config folder.
	providerConfig string
	// extension adds the in-place update extension with these flags.
	extension     bool
	extensionArgs []string
	// provider is a provider config (nil: the reference provider).
	provider *provider.Config
}

func startEnv(t *testing.T, ctx context.Context, o envOptions) *providerEnv {
	t.Helper()
	def, err := lab.Load(filepath.Join("..", "..", "fixtures", "labs", o.lab+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := reference.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env, err := runner.StartEnv(ctx, runner.EnvOptions{Lab: def, Dir: labtest.Dir(t), Scale: o.scale, RepoRoot: root, Provider: o.provider,
		ProviderArgs: o.providerArgs, ProviderConfigDir: o.providerConfig, Extension: o.extension, ExtensionArgs: o.extensionArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	if o.providerConfig == "" && o.provider == nil {
		// Every test also checks each manager's RBAC: whatever it drove,
		// no manager may have been refused a request.
		t.Cleanup(func() {
			denied, _ := env.Plane.Forbidden(context.Background())
			for name, lines := range denied {
				t.Errorf("manager %s was refused %d request(s) for want of RBAC, first: %s", name, len(lines), lines[0])
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			// KCP says why it would not update a machine in place.
			kcpLog, _ := os.ReadFile(filepath.Join(env.Plane.LogDir, "kcp.log"))
			if i := strings.Index(string(kcpLog), "cannot be updated in-place by extensions"); i >= 0 {
				t.Logf("kcp: %.3000s", string(kcpLog)[i:])
			}
			for _, name := range []string{"baremetal", "inplace"} {
				log, err := os.ReadFile(filepath.Join(env.Plane.LogDir, name+".log"))
				if err != nil {
					continue
				}
				if len(log) > 12000 {
					log = log[len(log)-12000:]
				}
				t.Logf("%s log (tail):\n%s", name, log)
			}
			logFailedAgentEvents(t, env.Site.Lab.StateDir())
		}
	})
	return &providerEnv{site: env.Site, plane: env.Plane, c: env.Client, ns: env.Namespace, callback: env.Callback}
}

// logFailedAgentEvents shows what went wrong on the hosts themselves
// (kubeadm, the kubelet, bootstrap data), which no manager log has.
func logFailedAgentEvents(t *testing.T, labDir string) {
	data, err := os.ReadFile(filepath.Join(labDir, "events.jsonl"))
	if err != nil {
		t.Logf("lab events: %v", err)
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		var e lab.Event
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		if e.Kind == lab.EventAgent && (strings.HasSuffix(e.Reason, "Failed") || strings.HasSuffix(e.Reason, "Refused")) {
			t.Logf("lab event: %s %s %s: %s", e.Time.Format(time.RFC3339Nano), e.Host, e.Reason, e.Message)
		}
	}
}
