package lab

import (
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
)

func TestLibvirtTestDriverPowerAndEvents(t *testing.T) {
	uri, err := TestDriverURI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLibvirtBackend(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	spec := DomainSpec{Name: "host-0", CPUs: 2, MemoryMiB: 2048, DiskGiB: 20, NICs: []DomainNIC{{MAC: "52:54:00:00:00:01", Network: "provisioning"}}}
	if err := b.Define(spec); err != nil {
		t.Fatal(err)
	}
	if err := b.SetMetadata("host-0", `<host name="host-0"><slot booted="A"/></host>`); err != nil {
		t.Fatal(err)
	}
	md, err := b.Metadata("host-0")
	if err != nil || !strings.Contains(md, `booted="A"`) {
		t.Fatalf("metadata = %q, %v", md, err)
	}
	if err := b.Start("host-0"); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.State("host-0"); s != PoweredOn {
		t.Fatalf("state after Start = %s", s)
	}
	if err := b.Stop("host-0"); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.State("host-0"); s != PoweredOff {
		t.Fatalf("state after Stop = %s", s)
	}
	var got []DomainEventKind
	timeout := time.After(5 * time.Second)
	for len(got) < 3 {
		select {
		case e := <-b.Events():
			if e.Domain != "host-0" {
				t.Fatalf("event for unknown domain %+v", e)
			}
			got = append(got, e.Kind)
		case <-timeout:
			t.Fatalf("events so far %v; want Defined, Started, Stopped", got)
		}
	}
	want := []DomainEventKind{DomainDefined, DomainStarted, DomainStopped}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

func TestAGuestsShutdownIsNotYetPowerOff(t *testing.T) {
	if _, ok := lifecycleKind(libvirt.DOMAIN_EVENT_SHUTDOWN); ok {
		t.Fatal("SHUTDOWN (the guest is down, QEMU still running) counted as a power change")
	}
	for e, want := range map[libvirt.DomainEventType]DomainEventKind{
		libvirt.DOMAIN_EVENT_STOPPED: DomainStopped, libvirt.DOMAIN_EVENT_CRASHED: DomainStopped,
		libvirt.DOMAIN_EVENT_STARTED: DomainStarted, libvirt.DOMAIN_EVENT_RESUMED: DomainStarted,
	} {
		if got, ok := lifecycleKind(e); !ok || got != want {
			t.Errorf("%v: %s, want %s", e, got, want)
		}
	}
}
