package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
	callback string // the provider's callback address
	provider mgmt.Provider
}

func startProviderEnv(t *testing.T, ctx context.Context, labName string, scale timescale.Scale, providerArgs ...string) *providerEnv {
	t.Helper()
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
	bin, err := reference.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	callback := freeAddr(t)
	prov, err := reference.Provider(s, reference.Options{Binary: bin, CertDir: filepath.Join(dir, "certs"), CallbackAddr: callback,
		Args: append([]string{"--poll=200ms"}, providerArgs...)})
	if err != nil {
		t.Fatal(err)
	}
	plane, err := mgmt.Start(ctx, mgmt.Options{ArtifactsDir: t.TempDir(), Providers: []mgmt.Provider{prov}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(plane.LogDir, "baremetal.log"))
			if len(log) > 12000 {
				log = log[len(log)-12000:]
			}
			t.Logf("provider log (tail):\n%s", log)
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
