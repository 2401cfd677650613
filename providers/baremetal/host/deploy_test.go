package host

import (
	"context"
	"slices"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/upgradelab/upgradelab/providers/baremetal/callback"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
)

// callLog is a bmcDriver that only records what it is asked, in order,
// and keeps the power state those calls would leave. The BMC protocols
// have their own tests against the lab's BMCs; this one judges the order
// the controller asks in, which no BMC can see.
type callLog struct {
	on    bool
	calls []string
}

func (l *callLog) PoweredOn() bool { return l.on }
func (l *callLog) PowerOn() error {
	l.calls = append(l.calls, map[bool]string{true: "restart", false: "on"}[l.on])
	l.on = true
	return nil
}
func (l *callLog) GracefulShutdown() error { l.calls = append(l.calls, "soft-off"); return nil }
func (l *callLog) PowerOff() error {
	if l.on {
		l.calls = append(l.calls, "off")
	}
	l.on = false
	return nil
}
func (l *callLog) BootDeploy(string) error            { l.calls = append(l.calls, "boot-deploy"); return nil }
func (l *callLog) BootDisk() error                    { l.calls = append(l.calls, "boot-disk"); return nil }
func (l *callLog) Inspect() (redfish.Hardware, error) { return redfish.Hardware{}, errInBandOnly }
func (l *callLog) SystemID() string                   { return "" }
func (l *callLog) Close()                             {}

// A deploy boot of a host that is on powers it off before the one-time
// boot device is set, then on: never a restart over a boot override,
// which firmware still in POST may already have used up.
func TestTheDeployBootSetsTheBootDeviceWithThePowerOff(t *testing.T) {
	for _, on := range []bool{true, false} {
		r := &Reconciler{Heartbeats: &callback.Heartbeats{}, DeployTimeout: time.Minute, deployBoots: map[types.UID]time.Time{}}
		r.awaiting, r.wakes = map[string]types.NamespacedName{}, make(chan event.TypedGenericEvent[*metal3.BareMetalHost], 1)
		host := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", UID: "uid-0"},
			Spec: metal3.BareMetalHostSpec{BootMACAddress: "52:54:00:00:00:01"}}
		bmc := &callLog{on: on}
		ag, err := r.deployRamdisk(context.Background(), host, bmc)
		if err != nil || ag != nil {
			t.Fatalf("powered on %v: deployRamdisk = %v, %v; want no agent yet and no error", on, ag, err)
		}
		want := []string{"boot-deploy", "on"}
		if on {
			want = append([]string{"off"}, want...)
		}
		if !slices.Equal(bmc.calls, want) {
			t.Errorf("powered on %v: the BMC was asked %v, want %v", on, bmc.calls, want)
		}
		if !host.Status.PoweredOn {
			t.Errorf("powered on %v: status.poweredOn false after the deploy boot", on)
		}
		// Asked again before a heartbeat and before DeployTimeout: the
		// boot is not repeated.
		bmc.calls = nil
		if _, err := r.deployRamdisk(context.Background(), host, bmc); err != nil || len(bmc.calls) != 0 {
			t.Errorf("powered on %v: a second look before the timeout asked the BMC %v (err %v), want nothing", on, bmc.calls, err)
		}
		if !r.deployBootPending(host) {
			t.Errorf("powered on %v: no deploy boot pending after one was asked for", on)
		}
	}
}

// A heartbeat from the MAC a deploy boot awaits queues that host once;
// other MACs and later heartbeats queue nothing.
func TestAHeartbeatWakesTheHostAwaitingIt(t *testing.T) {
	r := &Reconciler{Heartbeats: &callback.Heartbeats{}, DeployTimeout: time.Minute, deployBoots: map[types.UID]time.Time{}}
	r.awaiting, r.wakes = map[string]types.NamespacedName{}, make(chan event.TypedGenericEvent[*metal3.BareMetalHost], 4)
	host := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0", UID: "uid-0"},
		Spec: metal3.BareMetalHostSpec{BootMACAddress: "52:54:00:AA:00:01"}}
	if _, err := r.deployRamdisk(context.Background(), host, &callLog{}); err != nil {
		t.Fatal(err)
	}
	r.heartbeatWakes("52:54:00:aa:00:99")
	r.heartbeatWakes("52:54:00:aa:00:01")
	r.heartbeatWakes("52:54:00:aa:00:01")
	if len(r.wakes) != 1 {
		t.Fatalf("%d wake-ups queued, want 1", len(r.wakes))
	}
	if got := (<-r.wakes).Object; got.Namespace != "ns" || got.Name != "cp-0" {
		t.Fatalf("woke %s/%s, want ns/cp-0", got.Namespace, got.Name)
	}
}

// A provisioned host is deprovisioned when its spec.image is removed,
// emptied or names another URL than the one it was provisioned with, and
// kept when only the checksum differs, as baremetal-operator decides.
func TestAProvisionedHostIsWipedWhenItsImageChanges(t *testing.T) {
	provisioned := metal3.Image{URL: "http://images/ubuntu-v1.35.img", Checksum: "old"}
	for _, c := range []struct {
		name string
		spec *metal3.Image
		wipe bool
	}{
		{"same image", &metal3.Image{URL: provisioned.URL, Checksum: "old"}, false},
		{"same URL, new checksum", &metal3.Image{URL: provisioned.URL, Checksum: "new"}, false},
		{"new URL (an in-place update written into spec.image)", &metal3.Image{URL: "http://images/ubuntu-v1.36.img", Checksum: "new"}, true},
		{"empty URL", &metal3.Image{}, true},
		{"no image", nil, true},
	} {
		host := &metal3.BareMetalHost{Spec: metal3.BareMetalHostSpec{Image: c.spec, ConsumerRef: &corev1.ObjectReference{Name: "m"}}}
		host.Status.Provisioning.State, host.Status.Provisioning.Image = metal3.StateProvisioned, provisioned
		if got := imageChanged(host); got != c.wipe {
			t.Errorf("%s: imageChanged = %v, want %v", c.name, got, c.wipe)
		}
		if !c.wipe {
			continue
		}
		r := &Reconciler{}
		if _, err := r.provisioned(context.Background(), host); err != nil || host.Status.Provisioning.State != metal3.StateDeprovisioning {
			t.Errorf("%s: provisioned left the host %s (%v), want deprovisioning", c.name, host.Status.Provisioning.State, err)
		}
	}
}
