package bmc

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// What Ironic's inspection reads, read with gofish: the lab file's host
// facts (single-node: 4 CPUs, 8 GiB, 40 GiB disk, one X710 port) and
// readings that follow the power state.
func TestInspectionResourcesCarryTheLabFilesFacts(t *testing.T) {
	f := newFixture(t, 0)
	c, err := f.connect(t, "admin", "upgradelab-bmc", false)
	if err != nil {
		t.Fatal(err)
	}
	sys := f.system(t, c)
	spec := f.host.Spec()
	if sys.ProcessorSummary.LogicalProcessorCount != spec.CPUs || sys.MemorySummary.TotalSystemMemoryGiB != float32(spec.MemoryMiB)/1024 {
		t.Fatalf("summaries: %+v %+v; want %d cores, %d MiB", sys.ProcessorSummary, sys.MemorySummary, spec.CPUs, spec.MemoryMiB)
	}
	cpus, err := sys.Processors()
	if err != nil || len(cpus) != 1 || cpus[0].TotalCores != spec.CPUs || cpus[0].ProcessorArchitecture != redfish.X86ProcessorArchitecture || cpus[0].InstructionSet != redfish.X8664InstructionSet {
		t.Fatalf("processors: %v %+v", err, cpus)
	}
	dimms, err := sys.Memory()
	if err != nil || len(dimms) == 0 {
		t.Fatalf("memory: %v %v", err, dimms)
	}
	mib := 0
	for _, d := range dimms {
		mib += d.CapacityMiB
	}
	if mib != spec.MemoryMiB {
		t.Fatalf("memory modules add up to %d MiB, want %d", mib, spec.MemoryMiB)
	}
	storage, err := sys.Storage()
	if err != nil || len(storage) != 1 {
		t.Fatalf("storage: %v %v", err, storage)
	}
	drives, err := storage[0].Drives()
	if err != nil || len(drives) != 1 || drives[0].CapacityBytes != int64(spec.DiskGiB)<<30 || drives[0].MediaType != redfish.SSDMediaType || drives[0].SerialNumber == "" {
		t.Fatalf("drives: %v %+v", err, drives)
	}
	simple, err := sys.SimpleStorages()
	if err != nil || len(simple) != 1 || len(simple[0].Devices) != 1 || simple[0].Devices[0].CapacityBytes != int64(spec.DiskGiB)<<30 {
		t.Fatalf("simple storage: %v %+v", err, simple)
	}
	nics, err := sys.EthernetInterfaces()
	if err != nil || len(nics) != len(spec.NICs) || nics[0].SpeedMbps != nicMbps || !strings.EqualFold(nics[0].MACAddress, spec.NICs[0].MAC) {
		t.Fatalf("Ethernet interfaces: %v %+v", err, nics)
	}
	pcie, err := sys.PCIeDevices()
	if err != nil || len(pcie) != len(spec.NICs) || pcie[0].Manufacturer != "Intel Corporation" {
		t.Fatalf("PCIe devices: %v %+v", err, pcie)
	}
	chassis, err := c.Service.Chassis()
	if err != nil || len(chassis) != 1 {
		t.Fatalf("chassis: %v %v", err, chassis)
	}
	watts := func() float32 {
		t.Helper()
		p, err := chassis[0].Power()
		if err != nil || len(p.PowerControl) != 1 || len(p.PowerSupplies) != 1 {
			t.Fatalf("power: %v %+v", err, p)
		}
		return p.PowerControl[0].PowerConsumedWatts
	}
	cpuCelsius := func() float32 {
		t.Helper()
		th, err := chassis[0].Thermal()
		if err != nil || len(th.Temperatures) != 2 {
			t.Fatalf("thermal: %v %+v", err, th)
		}
		return th.Temperatures[1].ReadingCelsius
	}
	offW, offC := watts(), cpuCelsius()
	if err := sys.Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	if onW, onC := watts(), cpuCelsius(); onW != float32(wattsIdle+wattsPerCPU*spec.CPUs) || onW <= offW || onC <= offC {
		t.Fatalf("readings off %v W %v C, on %v W %v C; want the running host to draw idle plus per CPU and run warmer", offW, offC, onW, onC)
	}
}

// schemaVersions are the DMTF schema versions the service declares, per
// resource type (collections carry none). A resource of a type not here
// fails the crawl below: adding one means naming its schema.
var schemaVersions = map[string]string{
	"ServiceRoot": "v1_15_0", "ComputerSystem": "v1_20_0", "Chassis": "v1_25_0", "Manager": "v1_19_0",
	"EthernetInterface": "v1_12_0", "NetworkAdapter": "v1_11_0", "Processor": "v1_18_0", "Memory": "v1_17_0",
	"Storage": "v1_15_0", "Drive": "v1_17_0", "SimpleStorage": "v1_3_1", "PCIeDevice": "v1_11_0",
	"Power": "v1_7_1", "Thermal": "v1_7_1", "VirtualMedia": "v1_6_2", "UpdateService": "v1_14_0",
	"SoftwareInventory": "v1_10_0", "TaskService": "v1_2_1", "Task": "v1_7_3", "SessionService": "v1_1_9",
	"Session": "v1_7_0", "AccountService": "v1_15_0", "Bios": "v1_1_0", "SecureBoot": "v1_0_5", "BootOption": "v1_0_0",
	"MessageRegistryFile": "v1_1_0", "EventService": "v1_10_0", "AttributeRegistry": "v1_3_0",
}

var odataType = regexp.MustCompile(`^#([A-Za-z]+)\.(?:(v\d+_\d+_\d+)\.)?([A-Za-z]+)$`)

// Every resource reachable from the service root answers 200 with the
// properties every Redfish schema requires (@odata.id, @odata.type, Id
// and Name; Name and Members for a collection, whose count is right),
// declares the schema version in schemaVersions, and every link in it
// leads somewhere.
func TestEveryResourceReachableFromTheRootDeclaresItsSchema(t *testing.T) {
	f := newFixture(t, 0)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}}, Timeout: 10 * time.Second}
	seen := map[string]bool{}
	queue := []string{"/redfish/v1"}
	types := map[string]bool{}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		req, _ := http.NewRequest("GET", f.bmc.Endpoint()+path, nil)
		req.SetBasicAuth("admin", "upgradelab-bmc")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
			continue
		}
		if body["@odata.id"] != path {
			t.Errorf("%s: @odata.id %v", path, body["@odata.id"])
		}
		m := odataType.FindStringSubmatch(stringOf(body["@odata.type"]))
		switch {
		case m == nil || m[1] != m[3]:
			t.Errorf("%s: @odata.type %v is not #Type.vX_Y_Z.Type", path, body["@odata.type"])
		case strings.HasSuffix(m[1], "Collection"):
			members, _ := body["Members"].([]any)
			if m[2] != "" || body["Name"] == nil || body["Members@odata.count"] != float64(len(members)) {
				t.Errorf("%s: collection %s: version %q, Name %v, %d members counted %v", path, m[1], m[2], body["Name"], len(members), body["Members@odata.count"])
			}
		default:
			types[m[1]] = true
			if want, ok := schemaVersions[m[1]]; !ok || want != m[2] {
				t.Errorf("%s: %s %s is not a declared schema version (%q)", path, m[1], m[2], want)
			}
			if body["Id"] == nil || body["Name"] == nil {
				t.Errorf("%s: %s without Id or Name", path, m[1])
			}
		}
		queue = append(queue, links(body)...)
	}
	var served []string
	for ty := range types {
		served = append(served, ty)
	}
	sort.Strings(served)
	for _, need := range []string{"Processor", "Memory", "Storage", "Drive", "SimpleStorage", "PCIeDevice", "Power", "Thermal", "EthernetInterface",
		"Bios", "SecureBoot", "BootOption", "VirtualMedia", "AttributeRegistry", "EventService", "TaskService"} {
		if !types[need] {
			t.Errorf("no %s reachable from the root; served: %v", need, served)
		}
	}
}

// links are the @odata.id values anywhere in a body, without JSON
// pointer fragments (members of a resource, not resources).
func links(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "@odata.id" {
				if !strings.Contains(s, "#") {
					out = append(out, s)
				}
				continue
			}
			// A registry file's Location[].Uri is a link too (to the
			// AttributeRegistry).
			if s, ok := e.(string); ok && k == "Uri" && strings.HasPrefix(s, "/redfish/v1/") {
				out = append(out, s)
				continue
			}
			out = append(out, links(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, links(e)...)
		}
	}
	return out
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// sushy, the Redfish library Ironic's redfish drivers are built on
// (Debian's python3-sushy, which scripts/install-deps.sh installs), reads
// a lab host as Ironic's inspection does and powers it on.
func TestSushyInspectsAndPowersAHost(t *testing.T) {
	f := newFixture(t, 0)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, f.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "testdata/sushy_inspect.py", f.bmc.Endpoint(), caFile, "admin", "upgradelab-bmc")
	// requests prefers REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE, when set,
	// to the CA a client passes: point both at the lab's.
	cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+caFile, "CURL_CA_BUNDLE="+caFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sushy: %v\n%s", err, out)
	}
	var got struct {
		PowerBefore, PowerAfter, Architecture string
		LogicalCPUs                           int
		MemoryGiB                             float64
		NICs                                  map[string]struct {
			MAC   string
			Speed int
		}
		SimpleStorageMaxBytes, StorageMaxDriveBytes int64
		BootTargets, ResetTypes                     []string
		EnabledMACsWhileOff                         []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("sushy's output: %v\n%s", err, out)
	}
	spec := f.host.Spec()
	disk := int64(spec.DiskGiB) << 30
	if got.PowerBefore != "Off" || got.PowerAfter != "On" || f.host.Status().Power != lab.PoweredOn {
		t.Errorf("power through sushy: %s then %s (lab %s); want off then on", got.PowerBefore, got.PowerAfter, f.host.Status().Power)
	}
	if got.LogicalCPUs != spec.CPUs || got.Architecture != "x86" || got.MemoryGiB != float64(spec.MemoryMiB)/1024 {
		t.Errorf("sushy read %d CPUs (%s) and %v GiB; want %d x86 and %v", got.LogicalCPUs, got.Architecture, got.MemoryGiB, spec.CPUs, float64(spec.MemoryMiB)/1024)
	}
	if got.SimpleStorageMaxBytes != disk || got.StorageMaxDriveBytes != disk {
		t.Errorf("sushy read disks of %d (simple storage) and %d (storage) bytes; want %d", got.SimpleStorageMaxBytes, got.StorageMaxDriveBytes, disk)
	}
	nic, ok := got.NICs[spec.NICs[0].Name]
	if !ok || !strings.EqualFold(nic.MAC, spec.NICs[0].MAC) || nic.Speed != nicMbps {
		t.Errorf("sushy read NICs %+v; want %s with %s at %d Mb/s", got.NICs, spec.NICs[0].Name, spec.NICs[0].MAC, nicMbps)
	}
	var want []string
	for _, n := range spec.NICs {
		want = append(want, strings.ToLower(n.MAC))
	}
	slices.Sort(want)
	if !slices.Equal(got.EnabledMACsWhileOff, want) {
		t.Errorf("enabled NICs of the powered-off host: %v; want every NIC, %v (Ironic makes its ports of them)", got.EnabledMACsWhileOff, want)
	}
	if len(got.BootTargets) == 0 || len(got.ResetTypes) == 0 {
		t.Errorf("sushy found no allowed boot targets (%v) or reset types (%v)", got.BootTargets, got.ResetTypes)
	}
}

// sushy changes a BIOS setting (OnReset), enables secure boot, sets a
// UEFI boot override and updates NIC firmware without Targets, as
// Ironic's redfish interfaces do; the settings apply at the reset and
// the task monitor's Retry-After paces sushy's wait.
func TestSushyChangesFirmwareSettingsAndUpdatesFirmware(t *testing.T) {
	f := newFixture(t, 0.01)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, f.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "testdata/sushy_firmware.py", f.bmc.Endpoint(), caFile, "admin", "upgradelab-bmc",
		f.lab.ImageServer().FirmwareURL("x710-nvm-9.50"))
	cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+caFile, "CURL_CA_BUNDLE="+caFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sushy: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("sushy's output: %v\n%s", err, out)
	}
	want := map[string]any{
		"pxeBefore": "Enabled", "pxePending": "Disabled", "pxeAfter": "Disabled", "registry": biosRegistryID,
		"secureEnable": true, "secureCurrentBefore": "Disabled", "secureCurrentAfter": "Enabled",
		"bootTarget": "Hdd", "bootMode": "UEFI", "taskState": "Completed", "retryAfter": "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sushy read %s = %v, want %v", k, got[k], v)
		}
	}
	if p := f.host.Status().Ports[0]; p.Pending == nil || p.Pending.Name != "x710-nvm-9.50" {
		t.Errorf("the NIC after sushy's SimpleUpdate: %+v", p)
	}
}
