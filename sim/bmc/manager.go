package bmc

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/upgradelab/upgradelab/internal/timescale"
)

func (b *BMC) getManagers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Managers", "#ManagerCollection.ManagerCollection", "Manager Collection", managerPath))
}

func (b *BMC) getManager(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	fw := b.bmcFW
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":       managerPath,
		"@odata.type":     "#Manager.v1_19_0.Manager",
		"Id":              "bmc",
		"Name":            "BMC of " + b.host.Name(),
		"ManagerType":     "BMC",
		"FirmwareVersion": fw,
		"Status":          map[string]string{"State": "Enabled", "Health": "OK"},
		"VirtualMedia":    odataID(managerPath + "/VirtualMedia"),
		"Links": map[string]any{
			"ManagerForServers": []any{odataID(b.systemPath())},
			"ManagerForChassis": []any{odataID(chassisPath + b.host.Name())},
		},
		"Actions": map[string]any{
			"#Manager.Reset": map[string]any{
				"target":                            managerPath + "/Actions/Manager.Reset",
				"ResetType@Redfish.AllowableValues": []string{"GracefulRestart", "ForceRestart"},
			},
		},
	})
}

// postManagerReset reboots the BMC itself: the endpoint goes away for the
// modelled reboot time; the host keeps running.
func (b *BMC) postManagerReset(w http.ResponseWriter, r *http.Request) {
	var p struct {
		ResetType string `json:"ResetType"`
	}
	if !decode(w, r, &p) {
		return
	}
	if p.ResetType != "" && p.ResetType != "GracefulRestart" && p.ResetType != "ForceRestart" {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+p.ResetType+" for the parameter ResetType is not in the list of acceptable values.", "ResetType")
		return
	}
	w.WriteHeader(http.StatusNoContent)
	go b.reboot(b.cfg.Scale.Real(timescale.Seconds(30)))
}

// The virtual CD is one device reachable at two places: under the
// Manager (older BMCs, and gofish's ManagedBy walk) and under the System
// (Redfish 2021.2 on, what newer BMCs and sushy prefer). base is either.

func (b *BMC) getVirtualMediaCollection(base string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, collection(base+"/VirtualMedia", "#VirtualMediaCollection.VirtualMediaCollection", "Virtual Media", base+"/VirtualMedia/Cd"))
	}
}

func (b *BMC) getVirtualMedia(base string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { b.writeVirtualMedia(w, base) }
}

func (b *BMC) writeVirtualMedia(w http.ResponseWriter, base string) {
	media := b.host.Status().Media
	name := ""
	if u, err := url.Parse(media); err == nil && media != "" {
		name = u.Path
	}
	protocol := "HTTP"
	if strings.HasPrefix(media, "https:") {
		protocol = "HTTPS"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":            base + "/VirtualMedia/Cd",
		"@odata.type":          "#VirtualMedia.v1_6_2.VirtualMedia",
		"Id":                   "Cd",
		"Name":                 "Virtual CD",
		"MediaTypes":           []string{"CD", "DVD"},
		"Image":                media,
		"ImageName":            name,
		"Inserted":             media != "",
		"WriteProtected":       true,
		"ConnectedVia":         connectedVia(media),
		"TransferMethod":       "Stream",
		"TransferProtocolType": protocol,
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": base + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
				"TransferProtocolType@Redfish.AllowableValues": []string{"HTTP", "HTTPS"}},
			"#VirtualMedia.EjectMedia": map[string]string{"target": base + "/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia"},
		},
	})
}

func connectedVia(media string) string {
	if media == "" {
		return "NotConnected"
	}
	return "URI"
}

func (b *BMC) postInsertMedia(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Image                string `json:"Image"`
		Inserted             *bool  `json:"Inserted"`
		WriteProtected       *bool  `json:"WriteProtected"`
		TransferMethod       string `json:"TransferMethod"`
		TransferProtocolType string `json:"TransferProtocolType"`
		UserName             string `json:"UserName"`
		Password             string `json:"Password"`
	}
	if !decode(w, r, &p) {
		return
	}
	if p.Image == "" {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.", "Image")
		return
	}
	u, err := url.Parse(p.Image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+p.Image+" for the parameter Image is not an http(s) URL.", "Image")
		return
	}
	if t := p.TransferProtocolType; t != "" && !strings.EqualFold(t, u.Scheme) {
		writeError(w, http.StatusBadRequest, msgParamNotSupported, "The value "+t+" for TransferProtocolType is not supported for "+p.Image+" (HTTP or HTTPS, as its scheme says).", "TransferProtocolType")
		return
	}
	if p.WriteProtected != nil && !*p.WriteProtected {
		writeError(w, http.StatusBadRequest, msgParamNotSupported, "The virtual CD is read-only: WriteProtected false is not supported.", "WriteProtected")
		return
	}
	if p.Inserted != nil && !*p.Inserted {
		writeError(w, http.StatusBadRequest, msgParamNotSupported, "Inserted false with InsertMedia is not supported (use EjectMedia).", "Inserted")
		return
	}
	if err := b.host.InsertMedia(p.Image); err != nil {
		writeError(w, http.StatusConflict, msgResourceInUse, "The change to the requested resource failed because the resource is in use or in transition: "+err.Error(), "Image")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *BMC) postEjectMedia(w http.ResponseWriter, r *http.Request) {
	var p struct{}
	if r.ContentLength != 0 && !decode(w, r, &p) {
		return
	}
	if err := b.host.EjectMedia(); err != nil {
		writeError(w, http.StatusConflict, msgOperationNotAllowed, err.Error(), "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
