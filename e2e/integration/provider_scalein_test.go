package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
)

// bindingMonitor polls the BareMetalHosts and remembers every moment one
// machine was bound to two hosts at once.
type bindingMonitor struct {
	mu         sync.Mutex
	violations []string
	samples    int
}

func (e *providerEnv) monitorBindings(ctx context.Context) *bindingMonitor {
	m := &bindingMonitor{}
	go func() {
		for ctx.Err() == nil {
			hosts := &metal3.BareMetalHostList{}
			if err := e.c.List(ctx, hosts, client.InNamespace(e.ns)); err == nil {
				byConsumer := map[string][]string{}
				for _, h := range hosts.Items {
					if ref := h.Spec.ConsumerRef; ref != nil {
						byConsumer[string(ref.UID)+" "+ref.Name] = append(byConsumer[string(ref.UID)+" "+ref.Name], h.Name)
					}
				}
				m.mu.Lock()
				m.samples++
				for consumer, hs := range byConsumer {
					if len(hs) > 1 {
						m.violations = append(m.violations, fmt.Sprintf("%s: %s bound to %v", time.Now().Format(time.RFC3339Nano), consumer, hs))
					}
				}
				m.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return m
}

func (m *bindingMonitor) check(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.violations) > 0 {
		t.Fatalf("a machine was bound to two hosts at once (%d samples):\n%s", m.samples, strings.Join(m.violations, "\n"))
	}
	if m.samples < 10 {
		t.Fatalf("the binding monitor took only %d samples", m.samples)
	}
}

// boundHosts lists the hosts that carry a machine.
func (e *providerEnv) boundHosts(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var out []string
	for h, s := range e.bindings(t, ctx) {
		if strings.Contains(s, " by ") {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// A 3-node control plane with KCP maxSurge 0 and node reuse on: the
// provider is killed and restarted while hosts provision, and no machine
// is ever bound to two hosts; the scale-in rollout then puts each new
// machine on the host the old one freed (not on the free worker hosts or
// the spare), so the control plane ends on the same three hosts.
func TestScaleInRolloutReusesHostsAcrossAProviderRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "cold-spare", 0.01)
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	monitor := e.monitorBindings(ctx)
	vars := e.clusterVars(t, ctx, "si", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 3, 0, 0, true)
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)

	waitFor(t, ctx, "a host provisioning", func() (bool, string) {
		b := e.bindings(t, ctx)
		for _, s := range b {
			if strings.HasPrefix(s, string(metal3.StateProvisioning)) {
				return true, ""
			}
		}
		return false, fmt.Sprint(b)
	})
	if err := e.plane.KillAndRestart(ctx, "baremetal"); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut(t, ctx, "si", 3, 0, "v1.35.3")
	before := e.boundHosts(t, ctx)
	if fmt.Sprint(before) != "[cp-0 cp-1 cp-2]" {
		t.Fatalf("control plane provisioned on %v; want cp-0, cp-1, cp-2 (free hosts by name, the spare last)", before)
	}

	e.upgrade(t, ctx, "si", e.clusterVars(t, ctx, "si", "v1.36.3", "ubuntu-24.04-k8s-v1.36.3", "v1-36", 3, 0, 0, true))
	e.waitRolledOut(t, ctx, "si", 3, 0, "v1.36.3")
	if after := e.boundHosts(t, ctx); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after the scale-in rollout the control plane is on %v; want the same hosts as before, %v", after, before)
	}
	monitor.check(t)
}
