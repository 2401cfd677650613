package bmc

import (
	"net/http"
	"net/url"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// UEFI boot options: one per boot device of the lab's servers, in the
// host's firmware boot order (Boot.BootOrder), which a PATCH rewrites at
// once, as UEFI's BootOrder variable is.

// bootOptions maps each boot device to its option (UEFI's Boot####).
var bootOptions = []struct {
	ref    string
	target lab.BootTarget
	name   string
	path   string // UEFI device path
}{
	{"Boot0001", lab.BootHdd, "UEFI Disk: SSD 0", "PciRoot(0x0)/Pci(0x17,0x0)/Sata(0x0,0xFFFF,0x0)"},
	{"Boot0002", lab.BootPxe, "UEFI PXEv4: NIC port 1", "PciRoot(0x0)/Pci(0x1C,0x0)/Pci(0x0,0x0)/MAC()/IPv4(0.0.0.0)"},
	{"Boot0003", lab.BootCd, "UEFI Virtual CD", "PciRoot(0x0)/Pci(0x14,0x0)/USB(0x5,0x0)/CDROM(0x1)"},
	{"Boot0004", lab.BootUefiHttp, "UEFI HTTPv4: NIC port 1", "PciRoot(0x0)/Pci(0x1C,0x0)/Pci(0x0,0x0)/MAC()/IPv4(0.0.0.0)/Uri()"},
}

func bootRef(t lab.BootTarget) string {
	for _, o := range bootOptions {
		if o.target == t {
			return o.ref
		}
	}
	return ""
}

func bootTarget(ref string) (lab.BootTarget, bool) {
	for _, o := range bootOptions {
		if o.ref == ref {
			return o.target, true
		}
	}
	return "", false
}

func (b *BMC) bootOrder() []string {
	var refs []string
	for _, t := range b.host.Firmware().BootOrder {
		refs = append(refs, bootRef(t))
	}
	return refs
}

func (b *BMC) getBootOptions(w http.ResponseWriter, _ *http.Request) {
	var members []string
	for _, o := range bootOptions {
		members = append(members, b.systemPath()+"/BootOptions/"+o.ref)
	}
	writeJSON(w, http.StatusOK, collection(b.systemPath()+"/BootOptions", "#BootOptionCollection.BootOptionCollection", "Boot Options", members...))
}

func (b *BMC) getBootOption(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("option")
	for _, o := range bootOptions {
		if o.ref == ref {
			writeJSON(w, http.StatusOK, map[string]any{
				"@odata.id": b.systemPath() + "/BootOptions/" + ref, "@odata.type": "#BootOption.v1_0_0.BootOption",
				"Id": ref, "Name": o.name, "BootOptionReference": ref, "DisplayName": o.name,
				"UefiDevicePath": o.path, "BootOptionEnabled": true, "Alias": string(o.target),
			})
			return
		}
	}
	notFound(w, r)
}

// patchBootOrder takes Boot.BootOrder (option references).
func (b *BMC) patchBootOrder(w http.ResponseWriter, refs []string) bool {
	var order []lab.BootTarget
	for _, ref := range refs {
		t, ok := bootTarget(ref)
		if !ok {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+ref+" in BootOrder is not a BootOptionReference of this system.", "Boot/BootOrder")
			return false
		}
		order = append(order, t)
	}
	if err := b.host.SetBootOrder(order); err != nil {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, err.Error(), "Boot/BootOrder")
		return false
	}
	return true
}

func validHTTPBootURI(uri string) bool {
	u, err := url.Parse(uri)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
