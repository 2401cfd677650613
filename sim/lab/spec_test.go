package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validLab = `apiVersion: upgradelab.dev/v1alpha1
kind: Lab
name: t
catalog: ../images/catalog.yaml
nvmImages: ../nic/nvm-images.yaml
nicRules: ../nic/i40e-rules.yaml
recoveryImage: recovery-ubuntu-24.04
credentials:
- {name: bmc, username: admin, password: pw}
- {name: long, username: admin, password: a-password-of-24-chars!!}
networks:
- {name: prov, cidr: 10.0.0.0/24}
hosts:
- name: h-0
  cpus: 2
  memoryMiB: 2048
  diskGiB: 40
  bmc: {credentials: bmc}
  nics:
  - {name: eno1, mac: "52:54:00:00:00:01", model: i40e, nvm: x710-nvm-9.20, network: prov}
- name: h-1
  cpus: 2
  memoryMiB: 2048
  diskGiB: 40
  bmc: {credentials: bmc}
  nics:
  - {name: eno1, mac: "52:54:00:00:00:02", model: i40e, nvm: x710-nvm-9.20, network: prov}
`

func TestSpecValidationNamesFileHostAndField(t *testing.T) {
	tests := []struct{ change, to, want string }{
		{"", "", ""},
		{`mac: "52:54:00:00:00:02"`, `mac: "zz:54"`, `t.yaml: hosts[1] (h-1): nics[0].mac: "zz:54" is not a MAC address`},
		{`mac: "52:54:00:00:00:02"`, `mac: "52:54:00:00:00:01"`, `hosts[1] (h-1): nics[0].mac: 52:54:00:00:00:01 is already used by h-0`},
		{"name: h-1", "name: h-0", "hosts[1] (h-0): name: duplicate"},
		{"name: h-1", "name: H_1", `hosts[1] (H_1): name: "H_1" must be a DNS label`},
		{"bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", "bmc: {credentials: root}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", `hosts[1] (h-1): bmc.credentials: "root" is not in credentials`},
		{"bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", "bmc: {credentials: bmc, protocols: [ipmi, snmp]}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", `hosts[1] (h-1): bmc.protocols: "snmp" is not redfish or ipmi`},
		{"bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", "bmc: {credentials: bmc, protocols: [ipmi, ipmi]}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", `hosts[1] (h-1): bmc.protocols: ipmi is listed twice`},
		{"bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", "bmc: {credentials: long}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", `hosts[1] (h-1): bmc.protocols: ipmi needs credentials "long" with a user name of at most 16 and a password of at most 20 characters`},
		{"network: prov}\n- name: h-1", "network: storage}\n- name: h-1", `hosts[0] (h-0): nics[0].network: "storage" is not in networks`},
		{"model: i40e, nvm: x710-nvm-9.20, network: prov}\n- name: h-1", "model: ice, nvm: x710-nvm-9.20, network: prov}\n- name: h-1", `hosts[0] (h-0): nics[0].model: "ice" is not modelled`},
		{"cidr: 10.0.0.0/24", "cidr: 10.0.0.0", `networks[0] (prov).cidr: "10.0.0.0" is not a CIDR`},
		{"diskGiB: 40\n  bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:01\"", "diskGiB: 4\n  bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:01\"", "hosts[0] (h-0): diskGiB: must be at least 8"},
		{"kind: Lab", "kind: Cluster", "apiVersion/kind"},
		{"network: prov}\n- name: h-1", "network: prov, ip: 10.0.1.5}\n- name: h-1", `hosts[0] (h-0).nics[0].ip: 10.0.1.5 is not in network prov (10.0.0.0/24)`},
		{"network: prov}\n- name: h-1", "network: prov, ip: fe80::1}\n- name: h-1", `hosts[0] (h-0).nics[0].ip: "fe80::1" is not an IPv4 address`},
		{"network: prov}\n- name: h-1", "network: prov, ip: 10.0.0.5}\n- name: h-1", ""},
		{"name: h-1\n", "name: h-1\n  os: {kind: ostree, keepDeployments: 3}\n", ""},
		{"name: h-1\n", "name: h-1\n  os: {kind: zfs}\n", `t.yaml: hosts[1] (h-1): os.kind: "zfs" is not one of [ab ostree]`},
		{"name: h-1\n", "name: h-1\n  os: {keepDeployments: 3}\n", `t.yaml: hosts[1] (h-1): os.keepDeployments: only an ostree host has deployments`},
		{"name: h-1\n", "name: h-1\n  os: {kind: ostree, keepDeployments: 1}\n", `t.yaml: hosts[1] (h-1): os.keepDeployments: must be at least 2`},
		{"name: h-1\n", "name: h-1\n  os: {rootGiB: 30}\n", `t.yaml: hosts[1] (h-1): os.rootGiB: two roots' worth (60 GiB) must fit the 40 GiB disk`},
		{"cpus: 2\n  memoryMiB: 2048\n  diskGiB: 40\n  bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", "cpus: 2\n  memory: 2048\n  diskGiB: 40\n  bmc: {credentials: bmc}\n  nics:\n  - {name: eno1, mac: \"52:54:00:00:00:02\"", `t.yaml: line 23: unknown field "memory"`},
	}
	for _, tt := range tests {
		data := strings.Replace(validLab, tt.change, tt.to, 1)
		if tt.change != "" && data == validLab {
			t.Fatalf("test edit %q matched nothing", tt.change)
		}
		_, err := ParseSpec("t.yaml", []byte(data))
		if tt.want == "" {
			if err != nil {
				t.Errorf("valid lab refused: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("edit %q -> %q: error %v, want it to contain %q", tt.change, tt.to, err, tt.want)
		}
	}
}

// Ports without an address get the network's next free one from the
// 10th, skipping those the file reserves; a reservation taken twice is
// refused.
func TestPortAddressesAreLeasedInFileOrder(t *testing.T) {
	s, err := ParseSpec("t.yaml", []byte(strings.Replace(validLab, "network: prov}\n- name: h-1", "network: prov, ip: 10.0.0.10}\n- name: h-1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := s.Hosts[0].NICs[0].IP, s.Hosts[1].NICs[0].IP; a != "10.0.0.10" || b != "10.0.0.11" {
		t.Fatalf("addresses %s and %s, want the reservation 10.0.0.10 and the next free 10.0.0.11", a, b)
	}
	dup := strings.Replace(validLab, "network: prov}\n- name: h-1", "network: prov, ip: 10.0.0.10}\n- name: h-1", 1)
	dup = strings.Replace(dup, `mac: "52:54:00:00:00:02", model: i40e, nvm: x710-nvm-9.20, network: prov}`, `mac: "52:54:00:00:00:02", model: i40e, nvm: x710-nvm-9.20, network: prov, ip: 10.0.0.10}`, 1)
	if _, err := ParseSpec("t.yaml", []byte(dup)); err == nil || !strings.Contains(err.Error(), "hosts[1] (h-1).nics[0].ip: 10.0.0.10 is already h-0/eno1's") {
		t.Fatalf("a reservation taken twice: %v", err)
	}
}

func TestLoadCrossChecksTheCatalogs(t *testing.T) {
	dir := filepath.Join("..", "..", "fixtures", "labs")
	path := filepath.Join(dir, "zz-test-bad-nvm.yaml")
	data := strings.Replace(validLab, "nvm: x710-nvm-9.20, network: prov}\n- name: h-1", "nvm: x710-nvm-0.1, network: prov}\n- name: h-1", 1)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), `zz-test-bad-nvm.yaml: hosts[0] (h-0): nics[0].nvm: "x710-nvm-0.1" is not in ../nic/nvm-images.yaml`) {
		t.Fatalf("Load with an unknown NVM image: %v", err)
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(validLab))
	f.Add([]byte("apiVersion: upgradelab.dev/v1alpha1\nkind: Lab\nname: x\nhosts: [{name: a}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// A valid lab has hosts, each with a port and a boot order.
		for _, h := range s.Hosts {
			if len(h.NICs) == 0 || len(h.BootOrder) == 0 {
				t.Fatalf("valid lab with an incomplete host %+v", h)
			}
			domainSpec(h)
		}
	})
}

func TestBackendIsCheckedAtLoad(t *testing.T) {
	base, err := os.ReadFile("../../fixtures/labs/vm-two.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"unknown backend": {"\nbackend: qemu\n", "\nbackend: xen\n", `backend: "xen" is not one of test, qemu`},
		"ostree on a VM":  {"  diskGiB: 240\n  bmc: {credentials: bmc-admin}\n  nics:\n  - {name: eno1, mac: \"52:54:00:1c:00:02\"", "  diskGiB: 240\n  os: {kind: ostree}\n  bmc: {credentials: bmc-admin}\n  nics:\n  - {name: eno1, mac: \"52:54:00:1c:00:02\"", "hosts[1] (vm-1): os.kind: the qemu backend's disks are A/B"},
	} {
		data := strings.Replace(string(base), c.from, c.to, 1)
		if data == string(base) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		_, err := ParseSpec("vm-two.yaml", []byte(data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
