package bmc

import (
	"fmt"
	"net/http"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// The resources Ironic's inspection reads (sushy: the system's
// processors, memory, storage and simple storage, Ethernet interfaces,
// PCIe devices; the chassis' power and thermal readings), built from the
// lab file's facts about the host (cpus, memoryMiB, diskGiB, nics) and
// its power state, with the schema versions DMTF's 2023.3 bundle
// defines. Nothing here is canned per host: two hosts differ by their
// lab file entries.

// Figures of the modelled server that the lab file does not give.
const (
	// dimmMiB is the size of one memory module; a host has as many as
	// its memory takes (the last one smaller when it does not divide).
	dimmMiB = 16384
	// cpuMHz is the processors' rated speed.
	cpuMHz = 2400
	// nicMbps is each X710 port's speed.
	nicMbps = 10000
	// wattsOff, wattsIdle, wattsPerCPU: standby draw, and a running
	// host's (idle plus per CPU).
	wattsOff, wattsIdle, wattsPerCPU = 12, 110, 9
	// celsiusAmbient, celsiusRunning: the inlet reading, and the CPU
	// reading off and on.
	celsiusAmbient, celsiusRunning = 24, 48
)

func (b *BMC) getProcessors(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection(b.systemPath()+"/Processors", "#ProcessorCollection.ProcessorCollection", "Processors", b.systemPath()+"/Processors/CPU1"))
}

func (b *BMC) getProcessor(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("cpu") != "CPU1" {
		notFound(w, r)
		return
	}
	spec := b.host.Spec()
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.systemPath() + "/Processors/CPU1", "@odata.type": "#Processor.v1_18_0.Processor",
		"Id": "CPU1", "Name": "Processor 1", "Socket": "CPU 1",
		"ProcessorType": "CPU", "ProcessorArchitecture": "x86", "InstructionSet": "x86-64",
		"Manufacturer": "upgradelab", "Model": cpuModel,
		"MaxSpeedMHz": cpuMHz, "TotalCores": spec.CPUs, "TotalThreads": spec.CPUs,
		"Status": b.componentStatus(),
	})
}

const cpuModel = "Simulated x86_64"

func (b *BMC) memoryModules() []int {
	var dimms []int
	for left := b.host.Spec().MemoryMiB; left > 0; left -= dimmMiB {
		dimms = append(dimms, min(left, dimmMiB))
	}
	return dimms
}

func (b *BMC) getMemoryCollection(w http.ResponseWriter, _ *http.Request) {
	var members []string
	for i := range b.memoryModules() {
		members = append(members, fmt.Sprintf("%s/Memory/DIMM%d", b.systemPath(), i+1))
	}
	writeJSON(w, http.StatusOK, collection(b.systemPath()+"/Memory", "#MemoryCollection.MemoryCollection", "Memory", members...))
}

func (b *BMC) getMemory(w http.ResponseWriter, r *http.Request) {
	dimms := b.memoryModules()
	var n int
	if _, err := fmt.Sscanf(r.PathValue("dimm"), "DIMM%d", &n); err != nil || n < 1 || n > len(dimms) || fmt.Sprintf("DIMM%d", n) != r.PathValue("dimm") {
		notFound(w, r)
		return
	}
	id := fmt.Sprintf("DIMM%d", n)
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.systemPath() + "/Memory/" + id, "@odata.type": "#Memory.v1_17_0.Memory",
		"Id": id, "Name": "Memory module " + id, "MemoryType": "DRAM", "MemoryDeviceType": "DDR4",
		"CapacityMiB": dimms[n-1], "OperatingSpeedMhz": 3200, "DataWidthBits": 64, "BusWidthBits": 72,
		"Manufacturer": "upgradelab", "SerialNumber": fmt.Sprintf("UL-%s-%s", b.host.Name(), id),
		"Status": b.componentStatus(),
	})
}

// diskBytes is the system disk's size.
func (b *BMC) diskBytes() int64 { return int64(b.host.Spec().DiskGiB) << 30 }

func (b *BMC) getStorageCollection(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection(b.systemPath()+"/Storage", "#StorageCollection.StorageCollection", "Storage", b.systemPath()+"/Storage/1"))
}

func (b *BMC) getStorage(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("storage") != "1" {
		notFound(w, r)
		return
	}
	drive := b.systemPath() + "/Storage/1/Drives/Disk.0"
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.systemPath() + "/Storage/1", "@odata.type": "#Storage.v1_15_0.Storage",
		"Id": "1", "Name": "SATA storage",
		"Drives": []any{odataID(drive)}, "Drives@odata.count": 1,
		"StorageControllers": []any{map[string]any{
			"@odata.id": b.systemPath() + "/Storage/1#/StorageControllers/0", "MemberId": "0", "Name": "SATA controller",
			"SupportedControllerProtocols": []string{"PCIe"}, "SupportedDeviceProtocols": []string{"SATA"},
			"Status": b.componentStatus(),
		}},
		"Status": b.componentStatus(),
	})
}

func (b *BMC) getDrive(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("storage") != "1" || r.PathValue("drive") != "Disk.0" {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.systemPath() + "/Storage/1/Drives/Disk.0", "@odata.type": "#Drive.v1_17_0.Drive",
		"Id": "Disk.0", "Name": "System disk", "MediaType": "SSD", "Protocol": "SATA",
		"CapacityBytes": b.diskBytes(), "Manufacturer": "upgradelab", "Model": "Simulated SSD",
		"SerialNumber": "UL-" + b.host.Name() + "-disk0", "BlockSizeBytes": 512, "RotationSpeedRPM": 0,
		"Status": b.componentStatus(),
	})
}

func (b *BMC) getSimpleStorageCollection(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection(b.systemPath()+"/SimpleStorage", "#SimpleStorageCollection.SimpleStorageCollection", "Simple Storage", b.systemPath()+"/SimpleStorage/1"))
}

func (b *BMC) getSimpleStorage(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("storage") != "1" {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.systemPath() + "/SimpleStorage/1", "@odata.type": "#SimpleStorage.v1_3_1.SimpleStorage",
		"Id": "1", "Name": "SATA controller",
		"Devices": []any{map[string]any{"Name": "System disk", "Manufacturer": "upgradelab", "Model": "Simulated SSD",
			"CapacityBytes": b.diskBytes(), "Status": b.componentStatus()}},
		"Status": b.componentStatus(),
	})
}

// pcieDevicePath is the chassis' PCIe device of a NIC port.
func (b *BMC) pcieDevicePath(port string) string {
	return chassisPath + b.host.Name() + "/PCIeDevices/" + port
}

func (b *BMC) pcieDevicePaths() []string {
	ports, _ := b.ports()
	paths := make([]string, 0, len(ports))
	for _, p := range ports {
		paths = append(paths, b.pcieDevicePath(p.Name))
	}
	return paths
}

func (b *BMC) getPCIeDevices(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection(chassisPath+b.host.Name()+"/PCIeDevices", "#PCIeDeviceCollection.PCIeDeviceCollection", "PCIe Devices", b.pcieDevicePaths()...))
}

func (b *BMC) getPCIeDevice(w http.ResponseWriter, r *http.Request) {
	p, _, ok := b.findPort(w, r)
	if !ok {
		return
	}
	health := nicHealth(p)
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.pcieDevicePath(p.Name), "@odata.type": "#PCIeDevice.v1_11_0.PCIeDevice",
		"Id": p.Name, "Name": "Intel Ethernet Controller X710 (" + p.Name + ")",
		"Manufacturer": "Intel Corporation", "Model": "X710", "DeviceType": "SingleFunction",
		"FirmwareVersion": p.Active.Firmware,
		"PCIeInterface":   map[string]any{"PCIeType": "Gen3", "LanesInUse": 8, "MaxLanes": 8},
		"Status":          map[string]string{"State": "Enabled", "Health": health},
		"Links":           map[string]any{"Chassis": []any{odataID(chassisPath + b.host.Name())}},
	})
}

// componentStatus is a part's Status: enabled, and the health of the
// server's power (a failed supply is critical for everything it feeds).
func (b *BMC) componentStatus() map[string]string {
	if b.host.Status().PowerSupplyFailed {
		return map[string]string{"State": "Enabled", "Health": "Critical"}
	}
	return map[string]string{"State": "Enabled", "Health": "OK"}
}

// watts is what the server draws now.
func (b *BMC) watts() int {
	if b.host.Status().Power != lab.PoweredOn {
		return wattsOff
	}
	return wattsIdle + wattsPerCPU*b.host.Spec().CPUs
}

func (b *BMC) supply() map[string]any {
	s := map[string]any{"State": "Enabled", "Health": "OK"}
	if b.host.Status().PowerSupplyFailed {
		s = map[string]any{"State": "UnavailableOffline", "Health": "Critical"}
	}
	return s
}

func (b *BMC) getPower(w http.ResponseWriter, _ *http.Request) {
	base := chassisPath + b.host.Name() + "/Power"
	watts := b.watts()
	if b.host.Status().PowerSupplyFailed {
		watts = 0
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": base, "@odata.type": "#Power.v1_7_1.Power", "Id": "Power", "Name": "Power",
		"PowerControl": []any{map[string]any{
			"@odata.id": base + "#/PowerControl/0", "MemberId": "0", "Name": "System power",
			"PowerConsumedWatts": watts, "PowerCapacityWatts": 750,
			"Status": map[string]string{"State": "Enabled", "Health": "OK"},
		}},
		"PowerSupplies": []any{map[string]any{
			"@odata.id": base + "#/PowerSupplies/0", "MemberId": "0", "Name": "PSU 1",
			"PowerSupplyType": "AC", "PowerCapacityWatts": 750, "LineInputVoltage": 230,
			"LastPowerOutputWatts": watts, "Status": b.supply(),
		}},
	})
}

func (b *BMC) getThermal(w http.ResponseWriter, _ *http.Request) {
	base := chassisPath + b.host.Name() + "/Thermal"
	cpu := celsiusAmbient
	if b.host.Status().Power == lab.PoweredOn {
		cpu = celsiusRunning
	}
	fanRPM := 0
	if b.host.Status().Power == lab.PoweredOn {
		fanRPM = 6000
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": base, "@odata.type": "#Thermal.v1_7_1.Thermal", "Id": "Thermal", "Name": "Thermal",
		"Temperatures": []any{
			map[string]any{"@odata.id": base + "#/Temperatures/0", "MemberId": "0", "Name": "Inlet", "PhysicalContext": "Intake",
				"ReadingCelsius": celsiusAmbient, "UpperThresholdCritical": 45, "Status": map[string]string{"State": "Enabled", "Health": "OK"}},
			map[string]any{"@odata.id": base + "#/Temperatures/1", "MemberId": "1", "Name": "CPU 1", "PhysicalContext": "CPU",
				"ReadingCelsius": cpu, "UpperThresholdCritical": 95, "Status": map[string]string{"State": "Enabled", "Health": "OK"}},
		},
		"Fans": []any{map[string]any{"@odata.id": base + "#/Fans/0", "MemberId": "0", "Name": "Fan 1", "PhysicalContext": "SystemBoard",
			"Reading": fanRPM, "ReadingUnits": "RPM", "Status": map[string]string{"State": "Enabled", "Health": "OK"}}},
	})
}
