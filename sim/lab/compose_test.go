package lab

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestComposeCopiesEachPartsHostsUnderItsPrefix(t *testing.T) {
	single, err := Load(filepath.Join("../../fixtures/labs", "single-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spare, err := Load(filepath.Join("../../fixtures/labs", "cold-spare.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Compose("fleet", []Part{{"a", single}, {"b", single}, {"c", spare}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	macs, ips := map[string]bool{}, map[string]bool{}
	for _, h := range d.Spec.Hosts {
		names = append(names, h.Name)
		for _, n := range h.NICs {
			if macs[n.MAC] || ips[n.IP] || n.IP == "" {
				t.Fatalf("%s: MAC %s or address %q is not its own", h.Name, n.MAC, n.IP)
			}
			macs[n.MAC], ips[n.IP] = true, true
		}
	}
	if got := strings.Join(names, ","); got != "a-node-0,b-node-0,c-cp-0,c-cp-1,c-cp-2,c-worker-0,c-worker-1,c-spare-0" {
		t.Fatalf("hosts %s", got)
	}
	if last := d.Spec.Hosts[len(d.Spec.Hosts)-1]; last.Labels["upgradelab.dev/spare"] != "true" || last.OS.Kind != spare.Spec.Hosts[5].OS.Kind {
		t.Fatalf("the spare's copy lost its labels or OS: %+v", last)
	}
	if single.Spec.Hosts[0].Name != "node-0" || single.Spec.Hosts[0].NICs[0].MAC != "52:54:00:1b:00:01" {
		t.Fatal("Compose changed a part")
	}
	if d.Spec.Networks[0].CIDR != "192.168.111.0/24" {
		t.Fatalf("a network with room left widened: %s", d.Spec.Networks[0].CIDR)
	}
}

func TestComposeWidensANetworkThatRunsOut(t *testing.T) {
	single, err := Load(filepath.Join("../../fixtures/labs", "single-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var parts []Part
	for i := range 300 {
		parts = append(parts, Part{Prefix: fmt.Sprintf("c%03d", i), Def: single})
	}
	d, err := Compose("big", parts)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Hosts) != 300 || d.Spec.Networks[0].CIDR != "192.168.0.0/16" {
		t.Fatalf("%d hosts on %s", len(d.Spec.Hosts), d.Spec.Networks[0].CIDR)
	}
}

func TestComposeRefusesPartsThatDisagree(t *testing.T) {
	single, err := Load(filepath.Join("../../fixtures/labs", "single-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other := *single
	spec := *single.Spec
	spec.Credentials = []Credential{{Name: "bmc-admin", Username: "root", Password: "x"}}
	other.Spec = &spec
	if _, err := Compose("fleet", []Part{{"a", single}, {"b", &other}}); err == nil || !strings.Contains(err.Error(), `part b (lab single-node): credentials "bmc-admin" differ`) {
		t.Fatalf("got %v", err)
	}
	if _, err := Compose("fleet", []Part{{"a", single}, {"a", single}}); err == nil || !strings.Contains(err.Error(), "name: duplicate") {
		t.Fatalf("two parts with one prefix: got %v", err)
	}
}
