package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// What an in-place provider must never do on Metal3, done on purpose: a
// new image written into a provisioned host's spec.image (as a provider
// recording an in-place update there would) gets the host deprovisioned,
// as baremetal-operator does, while its Machine lives; the recorded
// timeline breaks no-wipe-under-live-machine. The inventory cannot hide
// the mistake.
func TestANewImageInAProvisionedHostsSpecWipesItUnderItsMachine(t *testing.T) {
	t.Parallel()
	wipeUnderLiveMachine(t, envOptions{lab: "single-node", scale: 0.01})
}

// wipeUnderLiveMachine provisions a one-node cluster with o, writes a new
// image into its host's spec.image and checks that the host is
// deprovisioned under its live Machine and that the rule says so.
func wipeUnderLiveMachine(t *testing.T, o envOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, o)
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	vars := e.clusterVars(t, ctx, "sn", "v1.35.3", "ubuntu-24.04-k8s-v1.35.3", "v1-35", 1, 0, 1, false)
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)
	e.waitRolledOut(t, ctx, "sn", 1, 0, "v1.35.3")

	tl := timeline.New()
	rec := &monitor.Recorder{Management: e.c, Namespace: e.ns, Timeline: tl, Hosts: true, SpareLabel: infrav1.SpareLabel}
	rec.Poll(ctx)
	host := e.host(t, ctx, onlyHost(t, e, ctx))
	img, err := e.site.Lab.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(host.DeepCopy())
	host.Spec.Image = &metal3.Image{URL: e.site.Lab.ImageServer().ImageURL(img.Name), Checksum: img.SHA256, ChecksumType: metal3.SHA256}
	if err := e.c.Patch(ctx, host, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "host "+host.Name+" deprovisioning", func() (bool, string) {
		rec.Poll(ctx)
		h := e.host(t, ctx, host.Name)
		return h.Status.Provisioning.State == metal3.StateDeprovisioning || !h.Status.OperationHistory.Deprovision.Start.IsZero(), string(h.Status.Provisioning.State)
	})
	rec.Poll(ctx)

	var got *check.Result
	for _, r := range check.Run(tl.Entries(), check.Params{HostsVisible: true}) {
		if r.Rule == "no-wipe-under-live-machine" {
			got = &r
		}
	}
	if got == nil || got.Status != check.Fail || len(got.Violations) == 0 || !strings.Contains(got.Violations[0].Message, "host deprovisioning while Machine") {
		t.Fatalf("no-wipe-under-live-machine: %+v; want it broken by the wipe", got)
	}
}

// onlyHost is the one host bound in the namespace.
func onlyHost(t *testing.T, e *providerEnv, ctx context.Context) string {
	t.Helper()
	list := &metal3.BareMetalHostList{}
	if err := e.c.List(ctx, list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	var bound []string
	for _, h := range list.Items {
		if h.Spec.ConsumerRef != nil {
			bound = append(bound, h.Name)
		}
	}
	if len(bound) != 1 {
		t.Fatalf("bound hosts %v, want one", bound)
	}
	return bound[0]
}
