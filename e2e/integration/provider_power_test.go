package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// The host controller manages power as baremetal-operator does, against
// the lab's BMCs: spec.online in a steady state, the reboot annotation
// in its plain and suffixed forms and its modes, a soft power-off that a
// hung OS never finishes, and the paused and detached annotations. Each step is
// judged on the lab's hardware (power, its events), not on the
// controller's own status alone.
func TestBareMetalHostPowerAsBaremetalOperatorDoes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := startProviderEnv(t, ctx, "three-node", 0.01, "--soft-power-off-timeout=2s", "--power-check-interval=1s")
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	events, unsubscribe := e.site.Lab.Subscribe()
	defer unsubscribe()
	cp0, _ := e.site.Lab.Host("cp-0")
	e.waitHostState(t, ctx, "cp-0", metal3.StateAvailable)
	good, _ := e.site.Lab.Definition().Catalog.Get("ubuntu-24.04-k8s-v1.35.3")
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) {
		h.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: e.ns, Name: "test-consumer"}
		h.Spec.Image = &metal3.Image{URL: e.site.Lab.ImageServer().ImageURL(good.Name), Checksum: good.SHA256, ChecksumType: metal3.SHA256}
		h.Spec.Online = true
	})
	e.waitHostState(t, ctx, "cp-0", metal3.StateProvisioned)
	e.waitPower(t, ctx, cp0, true)

	// What the BMC learns of the running host reaches status.hardware.
	ip := cp0.Spec().NICs[0].IP
	waitFor(t, ctx, "cp-0's NIC address in status.hardware", func() (bool, string) {
		hw := e.host(t, ctx, "cp-0").Status.HardwareDetails
		return hw != nil && len(hw.NIC) > 0 && hw.NIC[0].IP == ip, fmt.Sprintf("%+v, want IP %s", hw.NIC, ip)
	})

	p := powerStory{t: t, ctx: ctx, e: e, cp0: cp0, events: events}
	p.powerRestored()
	p.rebootAnnotations()
	p.hungSoftPowerOff()
	p.detachedAndPaused()
	p.detachedDeleteDelayed()

}

// powerStory is TestBareMetalHostPowerAsBaremetalOperatorDoes's world: its
// env, provisioned cp-0 and the lab's events.
type powerStory struct {
	t      *testing.T
	ctx    context.Context
	e      *providerEnv
	cp0    *lab.Host
	events <-chan lab.Event
}

// powerRestored: power lost behind the controller's back comes back at
// the next power check; spec.online false is a soft power-off.
func (p powerStory) powerRestored() {
	t, ctx, e, cp0, events := p.t, p.ctx, p.e, p.cp0, p.events
	// Power lost behind the controller's back is found at the next power
	// check (1 s here, DefaultPowerCheck's 10 s unless told), and the
	// host is powered on again. Twice: the second loss comes right after
	// the controller's own power-on, so only the interval it was given
	// brings its next look within the bound.
	for i := 1; i <= 2; i++ {
		if err := cp0.PowerOff(); err != nil {
			t.Fatal(err)
		}
		bounded, cancelBound := context.WithTimeout(ctx, 4*time.Second)
		e.waitPower(t, bounded, cp0, true)
		cancelBound()
	}
	waitFor(t, ctx, "cp-0 running", func() (bool, string) { st := cp0.Status(); return st.Phase == lab.PhaseRunning, string(st.Phase) })

	// spec.online false: a soft power-off (the OS shuts down), then true.
	drain(events)
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Spec.Online = false })
	e.waitPower(t, ctx, cp0, false)
	expectEvent(t, events, "cp-0", "OSShutdown")
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Spec.Online = true })
	e.waitPower(t, ctx, cp0, true)
}

// rebootAnnotations: the plain reboot annotation, and a suffixed one
// with mode hard that keeps the host off until it goes.
func (p powerStory) rebootAnnotations() {
	t, ctx, e, cp0, events := p.t, p.ctx, p.e, p.cp0, p.events
	// The plain reboot annotation: off, then on again, and it is removed.
	boots := cp0.Status().BootCount
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Annotations[metal3.RebootAnnotationPrefix] = "" })
	waitFor(t, ctx, "cp-0 rebooted and the annotation removed", func() (bool, string) {
		_, still := e.host(t, ctx, "cp-0").Annotations[metal3.RebootAnnotationPrefix]
		st := cp0.Status()
		return !still && st.BootCount > boots && st.Power == lab.PoweredOn, fmt.Sprintf("annotation there %v, boots %d (were %d), power %s", still, st.BootCount, boots, st.Power)
	})

	// A suffixed one with mode hard: off without a shutdown, and off it
	// stays until its client removes it.
	e.waitPower(t, ctx, cp0, true)
	drain(events)
	key := metal3.RebootAnnotationPrefix + "/maintenance"
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Annotations[key] = `{"mode": "hard"}` })
	e.waitPower(t, ctx, cp0, false)
	time.Sleep(2 * time.Second)
	if seen := drain(events); strings.Contains(seen, "cp-0/OSShutdown") {
		t.Fatalf("a hard reboot shut the OS down gracefully: events %s", seen)
	}
	if st := cp0.Status(); st.Power != lab.PoweredOff {
		t.Fatalf("cp-0 is %s with reboot.metal3.io/maintenance still on; want it kept off", st.Power)
	}
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { delete(h.Annotations, key) })
	e.waitPower(t, ctx, cp0, true)
}

// hungSoftPowerOff: a hung OS never finishes a soft power-off; the
// controller reports it and powers off hard.
func (p powerStory) hungSoftPowerOff() {
	t, ctx, e, cp0 := p.t, p.ctx, p.e, p.cp0
	// A hung OS never finishes a soft power-off: after the timeout the
	// host shows a PowerManagementError, and the next attempt is hard.
	waitFor(t, ctx, "cp-0 running", func() (bool, string) { st := cp0.Status(); return st.Phase == lab.PhaseRunning, string(st.Phase) })
	if err := cp0.Hang(); err != nil {
		t.Fatal(err)
	}
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Spec.Online = false })
	e.waitPower(t, ctx, cp0, false)
	// The error lasts until the hard attempt right after it; its event
	// stays, as BMO's does.
	waitFor(t, ctx, "a PowerManagementError event on cp-0 for the soft power-off", func() (bool, string) {
		list := &eventsv1.EventList{}
		if err := e.c.List(ctx, list, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == "cp-0" && ev.Reason == "PowerManagementError" && strings.Contains(ev.Note, "soft power off") {
				return ev.Type == corev1.EventTypeWarning, ev.Type
			}
			seen = append(seen, ev.Regarding.Name+"/"+ev.Reason)
		}
		return false, strings.Join(seen, " ")
	})
	waitFor(t, ctx, "cp-0's power error cleared", func() (bool, string) {
		h := e.host(t, ctx, "cp-0")
		return h.Status.ErrorType == "" && !h.Status.PoweredOn, fmt.Sprintf("%q poweredOn %v", h.Status.ErrorType, h.Status.PoweredOn)
	})
}

// detachedAndPaused: detached and paused hosts are left alone, and a
// detached one is deleted without being touched.
func (p powerStory) detachedAndPaused() {
	t, ctx, e, cp0 := p.t, p.ctx, p.e, p.cp0
	// Detached: the host is left alone (online true powers nothing on)
	// until the annotation goes; deleted while detached, it is let go
	// without being touched.
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) {
		h.Annotations[metal3.DetachedAnnotation] = ""
		h.Spec.Online = true
	})
	waitFor(t, ctx, "cp-0 detached", func() (bool, string) {
		s := e.host(t, ctx, "cp-0").Status.OperationalStatus
		return s == metal3.OperationalStatusDetached, string(s)
	})
	time.Sleep(2 * time.Second)
	if st := cp0.Status(); st.Power != lab.PoweredOff {
		t.Fatalf("detached cp-0 was powered %s", st.Power)
	}
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { delete(h.Annotations, metal3.DetachedAnnotation) })
	e.waitPower(t, ctx, cp0, true)
	if s := e.host(t, ctx, "cp-0").Status.OperationalStatus; s != metal3.OperationalStatusOK {
		t.Fatalf("cp-0 attached again: operational status %s, want OK", s)
	}
	// Paused: not reconciled at all, so spec.online false powers nothing
	// off until the annotation goes.
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) {
		h.Annotations[metal3.PausedAnnotation] = ""
		h.Spec.Online = false
	})
	time.Sleep(2 * time.Second)
	if st := cp0.Status(); st.Power != lab.PoweredOn {
		t.Fatalf("paused cp-0 was powered %s", st.Power)
	}
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { delete(h.Annotations, metal3.PausedAnnotation) })
	e.waitPower(t, ctx, cp0, false)
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Spec.Online = true })
	e.waitPower(t, ctx, cp0, true)
	waitFor(t, ctx, "cp-0 running", func() (bool, string) { st := cp0.Status(); return st.Phase == lab.PhaseRunning, string(st.Phase) })
	boots := cp0.Status().BootCount
	e.patchHost(t, ctx, "cp-0", func(h *metal3.BareMetalHost) { h.Annotations[metal3.DetachedAnnotation] = "" })
	waitFor(t, ctx, "cp-0 detached", func() (bool, string) {
		s := e.host(t, ctx, "cp-0").Status.OperationalStatus
		return s == metal3.OperationalStatusDetached, string(s)
	})
	if err := e.c.Delete(ctx, e.host(t, ctx, "cp-0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "detached cp-0 deleted", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "cp-0"}, &metal3.BareMetalHost{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	time.Sleep(time.Second)
	if st := cp0.Status(); st.Phase != lab.PhaseRunning || st.BootCount != boots || st.OS.Source != lab.FromDisk {
		t.Fatalf("deleting detached cp-0 touched it: %s after %d boots (were %d), OS %+v", st.Phase, st.BootCount, boots, st.OS)
	}
}

// detachedDeleteDelayed: a host detached with deleteAction delay is
// deleted only once attached again.
func (p powerStory) detachedDeleteDelayed() {
	t, ctx, e := p.t, p.ctx, p.e
	// Detached with {"deleteAction": "delay"}: a deletion waits until the
	// host is attached again.
	e.patchHost(t, ctx, "cp-1", func(h *metal3.BareMetalHost) { h.Annotations[metal3.DetachedAnnotation] = `{"deleteAction": "delay"}` })
	waitFor(t, ctx, "cp-1 detached", func() (bool, string) {
		s := e.host(t, ctx, "cp-1").Status.OperationalStatus
		return s == metal3.OperationalStatusDetached, string(s)
	})
	if err := e.c.Delete(ctx, e.host(t, ctx, "cp-1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if h := e.host(t, ctx, "cp-1"); h.DeletionTimestamp.IsZero() {
		t.Fatal("cp-1 is not being deleted")
	}
	e.patchHost(t, ctx, "cp-1", func(h *metal3.BareMetalHost) { delete(h.Annotations, metal3.DetachedAnnotation) })
	waitFor(t, ctx, "cp-1 deleted once attached", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "cp-1"}, &metal3.BareMetalHost{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// patchHost edits a host with a merge patch (the controller writes it
// too), with its annotations map present.
func (e *providerEnv) patchHost(t *testing.T, ctx context.Context, name string, edit func(*metal3.BareMetalHost)) {
	t.Helper()
	h := e.host(t, ctx, name)
	patch := client.MergeFrom(h.DeepCopy())
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	edit(h)
	if err := e.c.Patch(ctx, h, patch); err != nil {
		t.Fatal(err)
	}
}

// waitPower waits until the lab host's power is on or off and the
// BareMetalHost says the same.
func (e *providerEnv) waitPower(t *testing.T, ctx context.Context, h *lab.Host, on bool) {
	t.Helper()
	want := lab.PoweredOff
	if on {
		want = lab.PoweredOn
	}
	waitFor(t, ctx, h.Name()+" powered "+string(want), func() (bool, string) {
		bmh := e.host(t, ctx, h.Name())
		st := h.Status()
		return st.Power == want && bmh.Status.PoweredOn == on, fmt.Sprintf("lab %s, status.poweredOn %v, error %q", st.Power, bmh.Status.PoweredOn, bmh.Status.ErrorMessage)
	})
}

// drain returns the events waiting, as "host/reason" words.
func drain(events <-chan lab.Event) string {
	var seen []string
	for {
		select {
		case ev := <-events:
			seen = append(seen, ev.Host+"/"+ev.Reason)
		default:
			return strings.Join(seen, " ")
		}
	}
}

// expectEvent waits for host's reason among the events since the last
// drain (they reach subscribers a little after the change they tell).
func expectEvent(t *testing.T, events <-chan lab.Event, host, reason string) {
	t.Helper()
	labtest.Expect(t, events, host, reason, 5*time.Second)
}
