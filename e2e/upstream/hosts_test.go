//go:build e2e

package upstream

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

// hostPool hands the lab's hosts to the specs' namespaces. A host is free
// when no BareMetalHost names it in any namespace: CAPI's cleanup deletes
// a spec's cluster (our Machines go only once their hosts are
// deprovisioned) and then its namespace without waiting (the plane's
// namespace controller deletes its BareMetalHosts, and the host
// controller lets each go once powered off), so the next spec waits here
// until the last one's BareMetalHosts are gone.
type hostPool struct {
	site   *site.Site
	client client.Client
}

// freeWait bounds how long a namespace waits for the previous spec's hosts.
const freeWait = 3 * time.Minute

// free is the lab's hosts no BareMetalHost names.
func (p *hostPool) free(ctx context.Context) (map[string]bool, error) {
	held := &metal3.BareMetalHostList{}
	if err := p.client.List(ctx, held); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, h := range p.site.Lab.Info().Hosts {
		out[h.Name] = true
	}
	for _, h := range held.Items {
		delete(out, h.Name)
	}
	return out, nil
}

// enroll waits until every lab host is free (or freeWait passed and at
// least one is), then enrolls the free ones in namespace.
func (p *hostPool) enroll(ctx context.Context, namespace string) []string {
	total := len(p.site.Lab.Info().Hosts)
	var free map[string]bool
	waitFor(freeWait, func() bool {
		var err error
		free, err = p.free(ctx)
		Expect(err).NotTo(HaveOccurred())
		return len(free) == total
	})
	Expect(free).NotTo(BeEmpty(), "no lab host became free within %s: the previous spec's BareMetalHosts are still there", freeWait)
	hosts, err := reference.Enroll(ctx, p.client, p.site, namespace, func(h lab.HostInfo) bool { return free[h.Name] })
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return names
}

// namespaceSetup is the PostNamespaceCreated of a spec on this provider:
// on the lab it enrolls the free hosts and gives the namespace's cluster
// its VIP (clusterctl reads VIP_HOST and VIP_PORT from the environment
// before its configuration, as CAPM3's e2e passes its cluster endpoint;
// one spec runs at a time in a process). inPlace labels the namespace for
// the in-place extension (its ExtensionConfig's namespaceSelector), which
// only the in-place spec wants: the others count the Machines a rollout
// creates.
func (e *providerEnv) namespaceSetup(inPlace bool) func(framework.ClusterProxy, string) {
	return func(proxy framework.ClusterProxy, namespace string) {
		ctx := context.Background()
		if inPlace {
			ns := &corev1.Namespace{}
			Expect(e.env.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns)).To(Succeed())
			before := ns.DeepCopy()
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[reference.ExtensionNamespaceLabel] = "true"
			Expect(e.env.Client.Patch(ctx, ns, client.MergeFrom(before))).To(Succeed())
		}
		if e.hosts == nil {
			return
		}
		names := e.hosts.enroll(ctx, namespace)
		vip, err := e.env.Site.VIP(ctx, namespace)
		Expect(err).NotTo(HaveOccurred())
		for k, v := range VIPVariables(vip.Host, vip.Port) {
			Expect(os.Setenv(k, v)).To(Succeed())
		}
		fmt.Fprintf(GinkgoWriter, "namespace %s: enrolled lab hosts %v; cluster address %s:%d\n", namespace, names, vip.Host, vip.Port)
	}
}
