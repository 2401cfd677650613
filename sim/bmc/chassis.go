package bmc

import (
	"net"
	"net/http"

	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/nic"
)

func (b *BMC) getChassisCollection(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Chassis", "#ChassisCollection.ChassisCollection", "Chassis Collection", chassisPath+b.host.Name()))
}

func (b *BMC) getChassis(w http.ResponseWriter, _ *http.Request) {
	name := b.host.Name()
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":       chassisPath + name,
		"@odata.type":     "#Chassis.v1_25_0.Chassis",
		"Id":              name,
		"Name":            "Chassis of " + name,
		"ChassisType":     "RackMount",
		"PowerState":      string(b.host.Status().Power),
		"NetworkAdapters": odataID(chassisPath + name + "/NetworkAdapters"),
		"PCIeDevices":     odataID(chassisPath + name + "/PCIeDevices"),
		"Power":           odataID(chassisPath + name + "/Power"),
		"Thermal":         odataID(chassisPath + name + "/Thermal"),
		"Links": map[string]any{
			"ComputerSystems": []any{odataID(b.systemPath())},
			"ManagedBy":       []any{odataID(managerPath)},
		},
	})
}

// ports lists the host's NIC ports with the link the running OS sees.
func (b *BMC) ports() ([]nic.Port, map[string]*lab.PortLink) {
	s := b.host.Status()
	links := map[string]*lab.PortLink{}
	if s.OS != nil {
		for i := range s.OS.Links {
			links[s.OS.Links[i].Port] = &s.OS.Links[i]
		}
	}
	return s.Ports, links
}

func (b *BMC) findPort(w http.ResponseWriter, r *http.Request) (nic.Port, *lab.PortLink, bool) {
	ports, links := b.ports()
	for _, p := range ports {
		if p.Name == r.PathValue("nic") {
			return p, links[p.Name], true
		}
	}
	notFound(w, r)
	return nic.Port{}, nil, false
}

// portCollection is a collection with one member per NIC port under base.
func (b *BMC) portCollection(base, odataType, name string) map[string]any {
	ports, _ := b.ports()
	members := make([]string, 0, len(ports))
	for _, p := range ports {
		members = append(members, base+"/"+p.Name)
	}
	return collection(base, odataType, name, members...)
}

func (b *BMC) getNetworkAdapters(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, b.portCollection(chassisPath+b.host.Name()+"/NetworkAdapters", "#NetworkAdapterCollection.NetworkAdapterCollection", "Network Adapters"))
}

func (b *BMC) getNetworkAdapter(w http.ResponseWriter, r *http.Request) {
	p, _, ok := b.findPort(w, r)
	if !ok {
		return
	}
	health := nicHealth(p)
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":    chassisPath + b.host.Name() + "/NetworkAdapters/" + p.Name,
		"@odata.type":  "#NetworkAdapter.v1_11_0.NetworkAdapter",
		"Id":           p.Name,
		"Name":         "Intel Ethernet Controller X710 (" + p.Name + ")",
		"Manufacturer": "Intel Corporation",
		"Model":        "X710 (" + p.Model + ")",
		"Status":       map[string]string{"State": "Enabled", "Health": health},
		"Controllers": []any{map[string]any{
			"FirmwarePackageVersion": p.Active.Firmware,
			"Identifiers":            []any{map[string]string{"DurableName": p.MAC, "DurableNameFormat": "MAC"}},
		}},
		"Oem": map[string]any{"Upgradelab": map[string]any{
			"NVMImage": p.Active.Name, "EETrack": p.Active.EETrack, "AdminQueueAPI": p.Active.API.String(), "Flash": string(p.Flash),
		}},
	})
}

func (b *BMC) getEthernetInterfaces(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, b.portCollection(b.systemPath()+"/EthernetInterfaces", "#EthernetInterfaceCollection.EthernetInterfaceCollection", "Ethernet Interfaces"))
}

func (b *BMC) getEthernetInterface(w http.ResponseWriter, r *http.Request) {
	p, link, ok := b.findPort(w, r)
	if !ok {
		return
	}
	// The interface is Enabled whenever the port exists, host on or off,
	// as shipping BMCs report it: Disabled would mean switched off by an
	// administrator, and Ironic's out-of-band inspection makes ports of
	// Enabled interfaces only. The link tells whether a driver brought it
	// up.
	linkStatus := "NoLink"
	if link != nil && link.Up {
		linkStatus = "LinkUp"
	} else if link != nil {
		linkStatus = "LinkDown"
	}
	// The address the OS got by DHCP, which the BMC learns from the
	// running host (as iDRAC's service module or a host interface tells
	// it); with no OS up or no link it knows none.
	addresses := []any{}
	if a, ok := b.host.PortAddress(p.Name); ok && link != nil && link.Up {
		mask := net.CIDRMask(a.Bits(), 32)
		addresses = append(addresses, map[string]any{
			"Address": a.Addr().String(), "SubnetMask": net.IP(mask).String(), "AddressOrigin": "DHCP",
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":        b.systemPath() + "/EthernetInterfaces/" + p.Name,
		"@odata.type":      "#EthernetInterface.v1_12_0.EthernetInterface",
		"Id":               p.Name,
		"Name":             p.Name,
		"MACAddress":       p.MAC,
		"LinkStatus":       linkStatus,
		"SpeedMbps":        nicMbps,
		"FullDuplex":       true,
		"IPv4Addresses":    addresses,
		"InterfaceEnabled": true,
		"Status":           map[string]string{"State": "Enabled", "Health": "OK"},
	})
}

// nicHealth is a NIC's health: critical while it runs its recovery
// firmware (a cut flash).
func nicHealth(p nic.Port) string {
	if p.Flash == nic.FlashRecovery {
		return "Critical"
	}
	return "OK"
}
