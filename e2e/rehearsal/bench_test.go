package rehearsal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkImportAThousandHosts reads and maps an export of 1000
// inspected BareMetalHosts with their HostFirmwareComponents (one kubectl
// List each), as a large site's is.
func BenchmarkImportAThousandHosts(b *testing.B) {
	dir := b.TempDir()
	writeLargeExport(b, dir, 1000)
	cat, err := LoadCatalogs(repoFixtures(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		x, err := Read(dir)
		if err != nil {
			b.Fatal(err)
		}
		if site := Import(x, cat, Options{}); len(site.Idle) != 1000 {
			b.Fatalf("%d idle hosts, want 1000", len(site.Idle))
		}
	}
}

func writeLargeExport(tb testing.TB, dir string, n int) {
	var hosts, firmware strings.Builder
	hosts.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	firmware.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range n {
		name := fmt.Sprintf("host-%04d", i)
		fmt.Fprintf(&hosts, `- apiVersion: metal3.io/v1alpha1
  kind: BareMetalHost
  metadata: {name: %[1]s, namespace: site, labels: {topology.kubernetes.io/zone: rack-%[2]d}}
  spec:
    online: true
    bootMACAddress: "3c:fd:fe:%02[3]x:%02[4]x:01"
    bmc: {address: "redfish-virtualmedia://10.1.%[3]d.%[4]d/redfish/v1/Systems/1", credentialsName: %[1]s-bmc}
  status:
    provisioning: {state: available}
    hardware:
      cpu: {arch: x86_64, count: 64, model: Xeon}
      ramMebibytes: 262144
      storage:
      - {name: /dev/sda, sizeBytes: 480103981056}
      - {name: /dev/nvme0n1, sizeBytes: 3840755982336}
      nics:
      - {name: ens1f0, mac: "3c:fd:fe:%02[3]x:%02[4]x:01", model: "0x8086 0x1572", ip: 10.2.%[3]d.%[4]d, speedGbps: 25}
      - {name: ens1f1, mac: "3c:fd:fe:%02[3]x:%02[4]x:02", model: "0x8086 0x1572", speedGbps: 25}
`, name, i%8, i/250, i%250)
		fmt.Fprintf(&firmware, `- apiVersion: metal3.io/v1alpha1
  kind: HostFirmwareComponents
  metadata: {name: %s, namespace: site}
  status:
    components:
    - {component: bios, initialVersion: "2.1", currentVersion: "2.1"}
    - {component: "nic:ens1f0", initialVersion: "9.20", currentVersion: "9.20"}
`, name)
	}
	for file, text := range map[string]string{"hosts.yaml": hosts.String(), "firmware.yaml": firmware.String()} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// FuzzRead: no export file makes the reader panic; whatever it
// refuses, it refuses with an error.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: metal3.io/v1alpha1\n  kind: BareMetalHost\n  metadata: {name: h}\n",
		"apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: c, namespace: n}\n---\nkind: Secret\n",
		`{"kind":"List","items":[{"kind":"Machine","apiVersion":"cluster.x-k8s.io/v1beta2"}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		x := &Export{Apps: map[string]*WorkloadApps{}}
		_ = readObjects([]byte(text), "export.yaml", func(where string, raw []byte, kind, apiVersion string) error {
			return x.add(where, raw, kind, apiVersion, "")
		})
	})
}
