package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
	"github.com/upgradelab/upgradelab/sim/timescale"
)

// providerEnv is a site, a management plane running CAPI's managers and
// the reference provider, and a namespace to work in.
type providerEnv struct {
	site     *site.Site
	plane    *mgmt.Plane
	c        client.Client
	ns       string
	callback string // the provider's callback URL
	provider mgmt.Provider
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
	// extension adds the in-place update extension with these flags.
	extension     bool
	extensionArgs []string
}

func startEnv(t *testing.T, ctx context.Context, o envOptions) *providerEnv {
	t.Helper()
	labName, scale, providerArgs := o.lab, o.scale, o.providerArgs
	def, err := lab.Load(filepath.Join("..", "..", "fixtures", "labs", labName+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := site.Start(ctx, site.Options{Lab: def, StateDir: t.TempDir(), Scale: scale})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	dir := t.TempDir()
	bin, err := reference.Build(ctx, dir, reference.ProviderCommand)
	if err != nil {
		t.Fatal(err)
	}
	prov, callback, err := reference.Provider(s, reference.Options{Binary: bin, StateDir: dir,
		Args: append([]string{"--poll=200ms"}, providerArgs...)})
	if err != nil {
		t.Fatal(err)
	}
	providers := []mgmt.Provider{prov}
	if o.extension {
		ext, err := reference.Build(ctx, dir, reference.ExtensionCommand)
		if err != nil {
			t.Fatal(err)
		}
		p, err := reference.Extension(s, ext, filepath.Join(dir, "extension-certs"), o.extensionArgs...)
		if err != nil {
			t.Fatal(err)
		}
		providers = append(providers, p)
	}
	plane, err := mgmt.Start(ctx, mgmt.Options{ArtifactsDir: t.TempDir(), Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			// KCP says why it would not update a machine in place.
			kcpLog, _ := os.ReadFile(filepath.Join(plane.LogDir, "kcp.log"))
			if i := strings.Index(string(kcpLog), "cannot be updated in-place by extensions"); i >= 0 {
				t.Logf("kcp: %.3000s", string(kcpLog)[i:])
			}
			for _, p := range providers {
				log, _ := os.ReadFile(filepath.Join(plane.LogDir, p.Name+".log"))
				if len(log) > 12000 {
					log = log[len(log)-12000:]
				}
				t.Logf("%s log (tail):\n%s", p.Name, log)
			}
		}
	})
	c, err := client.New(plane.RESTConfig, client.Options{Scheme: reference.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "provider-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return &providerEnv{site: s, plane: plane, c: c, ns: ns.Name, callback: callback, provider: prov}
}
