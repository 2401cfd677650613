package rehearsal

import (
	"fmt"
	"net"
	"slices"
	"strings"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// x710Devices are the PCI device IDs of Intel's 700-series (i40e)
// Ethernet controllers, as inspection reports them ("0x8086 0x1572").
var x710Devices = []string{"0x1572", "0x1574", "0x1580", "0x1581", "0x1583", "0x1584", "0x1585", "0x1586", "0x1587",
	"0x1588", "0x1589", "0x158a", "0x158b", "0x37ce", "0x37cf", "0x37d0", "0x37d1", "0x37d2", "0x37d3"}

// isI40E says whether an inspected NIC model ("VENDOR DEVICE") is an
// i40e port, the lab's NIC model.
func isI40E(model string) bool {
	f := strings.Fields(strings.ToLower(model))
	return len(f) == 2 && f[0] == "0x8086" && slices.Contains(x710Devices, f[1])
}

// minRootBytes is the smallest disk Ironic picks as the root device when
// no hint names one (4 GiB).
const minRootBytes = 4 << 30

// rootDisk is the disk Ironic would write the image to: the one the root
// device hints name (deviceName), else the smallest of at least 4 GiB;
// hinted says whether a hint chose it.
func rootDisk(bmh *metal3.BareMetalHost) (d metal3.Storage, hinted, ok bool) {
	disks := bmh.Status.HardwareDetails.Storage
	if h := bmh.Spec.RootDeviceHints; h != nil && h.DeviceName != "" {
		for _, d := range disks {
			if d.Name == h.DeviceName || slices.Contains(d.AlternateNames, h.DeviceName) {
				return d, true, true
			}
		}
	}
	d, ok = smallestDisk(disks)
	return d, false, ok
}

// smallestDisk is Ironic's root disk without hints.
func smallestDisk(disks []metal3.Storage) (metal3.Storage, bool) {
	var best metal3.Storage
	found := false
	for _, d := range disks {
		if d.SizeBytes >= minRootBytes && (!found || d.SizeBytes < best.SizeBytes) {
			best, found = d, true
		}
	}
	return best, found
}

// protocolsOf are the lab BMC protocols a BareMetalHost's BMC address
// speaks, as baremetal-operator reads its driver: no scheme is IPMI;
// Redfish by any of its drivers' names (redfish, redfish-virtualmedia,
// redfish-uefihttp, idrac-redfish, idrac-virtualmedia, ilo5-redfish).
// Other drivers (idrac over WS-Man, ilo4, ilo5, irmc) are not modelled.
func protocolsOf(address string) ([]lab.BMCProtocol, bool) {
	scheme, _, ok := strings.Cut(address, "://")
	switch {
	case !ok || scheme == "ipmi":
		return []lab.BMCProtocol{lab.ProtocolIPMI}, true
	case strings.Contains(scheme, "redfish") || scheme == "idrac-virtualmedia":
		return []lab.BMCProtocol{lab.ProtocolRedfish}, true
	}
	return nil, false
}

// nicFirmware is the NVM version of each i40e port of a host, from its
// HostFirmwareComponents: the one "nic" component for every port, or the
// component whose name ends in the port's name or MAC.
func nicFirmware(hfc *metal3.HostFirmwareComponents, nic metal3.NIC) (string, bool) {
	if hfc == nil {
		return "", false
	}
	var nics []metal3.FirmwareComponentStatus
	for _, c := range hfc.Status.Components {
		if strings.HasPrefix(c.Component, "nic") {
			nics = append(nics, c)
		}
	}
	if len(nics) == 1 {
		return nics[0].CurrentVersion, true
	}
	for _, c := range nics {
		id := strings.ToLower(c.Component)
		if strings.HasSuffix(id, strings.ToLower(nic.Name)) || strings.HasSuffix(id, strings.ToLower(nic.MAC)) {
			return c.CurrentVersion, true
		}
	}
	return "", false
}

// network24 is the /24 a port's address is on.
func network24(ip string) (string, bool) {
	addr := net.ParseIP(ip).To4()
	if addr == nil {
		return "", false
	}
	return fmt.Sprintf("%d.%d.%d.0/24", addr[0], addr[1], addr[2]), true
}
