package bmc

import (
	"net/http"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// The system firmware's settings over Redfish: Bios (current
// attributes), its settings object Bios/Settings (what applies at the
// next reset, @Redfish.SettingsApplyTime OnReset), the attribute registry
// they follow, and SecureBoot. Everything is the host model's
// (lab.FirmwareSettings): pending until the next POST, then current.

const (
	registriesPath   = "/redfish/v1/Registries"
	biosRegistryID   = "BiosAttributeRegistry.v1_0_0"
	biosRegistryFile = registriesPath + "/BiosAttributeRegistry"
	biosRegistryPath = biosRegistryFile + "/Registry"
)

func (b *BMC) biosPath() string { return b.systemPath() + "/Bios" }

func (b *BMC) getBios(w http.ResponseWriter, _ *http.Request) {
	f := b.host.Firmware()
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.biosPath(), "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Bios", "Name": "BIOS Configuration Current Settings",
		"AttributeRegistry": biosRegistryID, "Attributes": f.Attributes,
		"@Redfish.Settings": map[string]any{
			"@odata.type":         "#Settings.v1_3_0.Settings",
			"SettingsObject":      odataID(b.biosPath() + "/Settings"),
			"SupportedApplyTimes": []string{"OnReset"},
		},
	})
}

// getBiosSettings is the future state: the current attributes with the
// pending ones over them.
func (b *BMC) getBiosSettings(w http.ResponseWriter, _ *http.Request) {
	f := b.host.Firmware()
	future := map[string]string{}
	for k, v := range f.Attributes {
		future[k] = v
	}
	for k, v := range f.Pending {
		future[k] = v
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.biosPath() + "/Settings", "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Settings", "Name": "BIOS Configuration Pending Settings",
		"AttributeRegistry": biosRegistryID, "Attributes": future,
		"@Redfish.SettingsApplyTime": map[string]any{"ApplyTime": "OnReset"},
	})
}

func (b *BMC) patchBiosSettings(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Attributes map[string]any `json:"Attributes"`
		ApplyTime  *struct {
			ApplyTime string `json:"ApplyTime"`
		} `json:"@Redfish.SettingsApplyTime"`
	}
	if !decode(w, r, &p) {
		return
	}
	if len(p.Attributes) == 0 {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The request body needs Attributes.", "Attributes")
		return
	}
	if p.ApplyTime != nil && p.ApplyTime.ApplyTime != "OnReset" {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+p.ApplyTime.ApplyTime+" for ApplyTime is not supported: BIOS settings apply OnReset.", "@Redfish.SettingsApplyTime/ApplyTime")
		return
	}
	values := map[string]string{}
	for name, v := range p.Attributes {
		s, ok := v.(string)
		def := registryEntry(name)
		switch {
		case def == nil:
			writeError(w, http.StatusBadRequest, msgPropertyUnknown, "The property "+name+" is not in the attribute registry "+biosRegistryID+".", "Attributes/"+name)
			return
		case !ok:
			writeError(w, http.StatusBadRequest, msgPropertyValueType, "The value for the attribute "+name+" must be a string (an enumeration).", "Attributes/"+name)
			return
		}
		values[name] = s
	}
	if err := b.host.SetFirmwareAttributes(values); err != nil {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, err.Error(), "Attributes")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func registryEntry(name string) *lab.FirmwareAttribute {
	for i := range lab.FirmwareAttributes {
		if lab.FirmwareAttributes[i].Name == name {
			return &lab.FirmwareAttributes[i]
		}
	}
	return nil
}

func (b *BMC) getRegistries(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection(registriesPath, "#MessageRegistryFileCollection.MessageRegistryFileCollection", "Registry File Collection", biosRegistryFile))
}

func (b *BMC) getBiosRegistryFile(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": biosRegistryFile, "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
		"Id": "BiosAttributeRegistry", "Name": "BIOS Attribute Registry File", "Registry": biosRegistryID, "Languages": []string{"en"},
		"Location": []any{map[string]string{"Language": "en", "Uri": biosRegistryPath}},
	})
}

func (b *BMC) getBiosRegistry(w http.ResponseWriter, _ *http.Request) {
	var attrs []any
	for _, a := range lab.FirmwareAttributes {
		values := make([]any, len(a.Values))
		for i, v := range a.Values {
			values[i] = map[string]string{"ValueName": v, "ValueDisplayName": v}
		}
		attrs = append(attrs, map[string]any{
			"AttributeName": a.Name, "DisplayName": a.DisplayName, "HelpText": a.HelpText, "Type": "Enumeration",
			"Value": values, "DefaultValue": a.Default, "ResetRequired": a.ResetNeeded, "ReadOnly": false,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": biosRegistryPath, "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry",
		"Id": biosRegistryID, "Name": "BIOS Attribute Registry", "Language": "en", "RegistryVersion": "1.0.0",
		"OwningEntity": "upgradelab", "SupportedSystems": []any{map[string]string{"ProductName": "Simulated bare-metal server"}},
		"RegistryEntries": map[string]any{"Attributes": attrs},
	})
}

// getSecureBoot: SecureBootEnable is what the next boot will have (a
// change waits for the reset), SecureBootCurrentBoot what this one had.
func (b *BMC) getSecureBoot(w http.ResponseWriter, _ *http.Request) {
	f := b.host.Firmware()
	enable := f.SecureBoot
	if f.SecureBootPending != nil {
		enable = *f.SecureBootPending
	}
	current := "Disabled"
	if f.SecureBootCurrentBoot {
		current = "Enabled"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": b.systemPath() + "/SecureBoot", "@odata.type": "#SecureBoot.v1_0_5.SecureBoot",
		"Id": "SecureBoot", "Name": "UEFI Secure Boot", "SecureBootEnable": enable,
		"SecureBootCurrentBoot": current, "SecureBootMode": "DeployedMode",
	})
}

func (b *BMC) patchSecureBoot(w http.ResponseWriter, r *http.Request) {
	var p struct {
		SecureBootEnable *bool `json:"SecureBootEnable"`
	}
	if !decode(w, r, &p) {
		return
	}
	if p.SecureBootEnable == nil {
		writeError(w, http.StatusBadRequest, msgPropertyUnknown, "Only SecureBootEnable can be changed.", "SecureBootEnable")
		return
	}
	b.host.SetSecureBoot(*p.SecureBootEnable)
	w.WriteHeader(http.StatusNoContent)
}
