package bmc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// resetTypes are the ComputerSystem.Reset types the emulator performs.
var resetTypes = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PushPowerButton", "PowerCycle", "Nmi"}

var (
	overrideModes   = []string{string(lab.OverrideDisabled), string(lab.OverrideOnce), string(lab.OverrideContinuous)}
	overrideTargets = []string{"None", string(lab.BootPxe), string(lab.BootHdd), string(lab.BootCd), string(lab.BootUefiHttp), string(lab.BootBiosSetup)}
	bootModes       = []string{string(lab.BootModeUEFI), string(lab.BootModeLegacy)}
)

func (b *BMC) systemPath() string { return systemsPath + b.host.Name() }

func (b *BMC) getSystems(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Systems", "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", b.systemPath()))
}

func (b *BMC) getSystem(w http.ResponseWriter, _ *http.Request) {
	s := b.host.Status()
	spec := b.host.Spec()
	b.mu.Lock()
	bios := b.bios
	b.mu.Unlock()
	target := string(s.Override.Target)
	if target == "" {
		target = "None"
	}
	state, health := "Enabled", "OK"
	if s.Power == lab.PoweredOff {
		state = "StandbyOffline"
	}
	if s.PowerSupplyFailed {
		health = "Critical" // the system's rollup of its failed supply
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":    b.systemPath(),
		"@odata.type":  "#ComputerSystem.v1_20_0.ComputerSystem",
		"Id":           spec.Name,
		"Name":         spec.Name,
		"SystemType":   "Physical",
		"Manufacturer": "upgradelab",
		"Model":        "Simulated bare-metal server",
		"SerialNumber": lab.SerialNumber(spec.Name),
		"PowerState":   string(s.Power),
		"BiosVersion":  bios,
		"Status":       map[string]string{"State": state, "Health": health},
		"Boot": map[string]any{
			"BootSourceOverrideEnabled":                         string(s.Override.Mode),
			"BootSourceOverrideTarget":                          target,
			"BootSourceOverrideTarget@Redfish.AllowableValues":  overrideTargets,
			"BootSourceOverrideEnabled@Redfish.AllowableValues": overrideModes,
			"BootSourceOverrideMode":                            cmp.Or(string(s.Override.BootMode), firmwareMode(s.Firmware)),
			"BootSourceOverrideMode@Redfish.AllowableValues":    bootModes,
			"HttpBootUri": s.Override.HTTPBootURI,
			"BootOrder":   b.bootOrder(),
			"BootOptions": odataID(b.systemPath() + "/BootOptions"),
		},
		"Bios":         odataID(b.biosPath()),
		"SecureBoot":   odataID(b.systemPath() + "/SecureBoot"),
		"VirtualMedia": odataID(b.systemPath() + "/VirtualMedia"),
		"MemorySummary": map[string]any{"TotalSystemMemoryGiB": float64(spec.MemoryMiB) / 1024, "MemoryMirroring": "None",
			"Status": map[string]string{"State": "Enabled", "Health": health}},
		"ProcessorSummary": map[string]any{"Count": 1, "CoreCount": spec.CPUs, "LogicalProcessorCount": spec.CPUs, "Model": cpuModel,
			"Status": map[string]string{"State": "Enabled", "Health": health}},
		"EthernetInterfaces":      odataID(b.systemPath() + "/EthernetInterfaces"),
		"Processors":              odataID(b.systemPath() + "/Processors"),
		"Memory":                  odataID(b.systemPath() + "/Memory"),
		"Storage":                 odataID(b.systemPath() + "/Storage"),
		"SimpleStorage":           odataID(b.systemPath() + "/SimpleStorage"),
		"PCIeDevices":             odataIDs(b.pcieDevicePaths()),
		"PCIeDevices@odata.count": len(b.pcieDevicePaths()),
		"Links": map[string]any{
			"ManagedBy": []any{odataID(managerPath)},
			"Chassis":   []any{odataID(chassisPath + spec.Name)},
		},
		"Actions": map[string]any{
			"#ComputerSystem.Reset": map[string]any{
				"target":                            b.systemPath() + "/Actions/ComputerSystem.Reset",
				"ResetType@Redfish.AllowableValues": resetTypes,
			},
		},
	})
}

// bootPatch is the writable part of ComputerSystem.Boot. Other Boot
// properties a client may send unchanged are accepted and ignored.
type bootPatch struct {
	Boot *struct {
		BootSourceOverrideEnabled    *string  `json:"BootSourceOverrideEnabled"`
		BootSourceOverrideTarget     *string  `json:"BootSourceOverrideTarget"`
		BootSourceOverrideMode       *string  `json:"BootSourceOverrideMode"`
		UefiTargetBootSourceOverride string   `json:"UefiTargetBootSourceOverride"`
		BootNext                     string   `json:"BootNext"`
		BootOrder                    []string `json:"BootOrder"`
		HTTPBootURI                  *string  `json:"HttpBootUri"`
	} `json:"Boot"`
}

func (b *BMC) patchSystem(w http.ResponseWriter, r *http.Request) {
	var p bootPatch
	if !decode(w, r, &p) {
		return
	}
	if p.Boot == nil {
		writeError(w, http.StatusBadRequest, msgPropertyUnknown, "Only Boot can be changed on this system.", "Boot")
		return
	}
	if p.Boot.BootOrder != nil && !b.patchBootOrder(w, p.Boot.BootOrder) {
		return
	}
	pb := p.Boot
	if pb.BootSourceOverrideEnabled == nil && pb.BootSourceOverrideTarget == nil && pb.BootSourceOverrideMode == nil && pb.HTTPBootURI == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	cur := b.host.Status().Override
	next := cur
	if v := p.Boot.HTTPBootURI; v != nil {
		if *v != "" && !validHTTPBootURI(*v) {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+*v+" for the property HttpBootUri is not an http(s) URI.", "Boot/HttpBootUri")
			return
		}
		next.HTTPBootURI = *v
	}
	if v := p.Boot.BootSourceOverrideEnabled; v != nil {
		if !slices.Contains(overrideModes, *v) {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, fmt.Sprintf("The value %s for the property BootSourceOverrideEnabled is not in the list of acceptable values.", *v), "Boot/BootSourceOverrideEnabled")
			return
		}
		next.Mode = lab.OverrideMode(*v)
	}
	if v := p.Boot.BootSourceOverrideTarget; v != nil {
		if !slices.Contains(overrideTargets, *v) {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, fmt.Sprintf("The value %s for the property BootSourceOverrideTarget is not in the list of acceptable values.", *v), "Boot/BootSourceOverrideTarget")
			return
		}
		next.Target = lab.BootTarget(*v)
		if *v == "None" {
			next.Target, next.Mode = "", lab.OverrideDisabled
		}
	}
	if v := p.Boot.BootSourceOverrideMode; v != nil {
		if !slices.Contains(bootModes, *v) {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+*v+" for the property BootSourceOverrideMode is not in the list of acceptable values.", "Boot/BootSourceOverrideMode")
			return
		}
		// Honoured by the host's firmware model: a Legacy boot finds no
		// loader in the lab's EFI-only images (lab.ErrLegacyBoot).
		next.BootMode = lab.BootMode(*v)
	}
	if err := b.host.SetBootOverride(next); err != nil {
		writeError(w, http.StatusBadRequest, msgGeneralError, err.Error(), "Boot")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *BMC) postReset(w http.ResponseWriter, r *http.Request) {
	var p struct {
		ResetType *string `json:"ResetType"`
	}
	if !decode(w, r, &p) {
		return
	}
	if p.ResetType == nil {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.", "ResetType")
		return
	}
	if !slices.Contains(resetTypes, *p.ResetType) {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, fmt.Sprintf("The value %s for the parameter ResetType is not in the list of acceptable values.", *p.ResetType), "ResetType")
		return
	}
	if err := b.reset(r, *p.ResetType); err != nil {
		writeError(w, http.StatusInternalServerError, msgGeneralError, err.Error(), "")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// reset performs one reset type on the host; staged OnReset firmware is
// applied whenever the host goes through a power-on.
func (b *BMC) reset(r *http.Request, resetType string) error {
	h := b.host
	on := h.Status().Power == lab.PoweredOn
	var err error
	switch resetType {
	case "On":
		err = h.PowerOn()
	case "ForceOff":
		err = h.PowerOff()
	case "GracefulShutdown":
		if on {
			b.graceful(false)
		}
		return nil
	case "GracefulRestart":
		b.graceful(true) // applies staged updates once the host is on again
		return nil
	case "ForceRestart":
		err = h.Reset()
	case "PowerCycle":
		if on {
			err = h.Reset()
		} else {
			err = h.PowerOn()
		}
	case "PushPowerButton":
		if on {
			b.graceful(false)
			return nil
		}
		err = h.PowerOn()
	case "Nmi":
		// A diagnostic interrupt: the simulated OS logs it and goes on.
		return nil
	}
	if errors.Is(err, lab.ErrHung) {
		// The BMC signals the OS (ACPI) and answers at once, as real
		// ones do; a hung OS never acts on it and the power stays on.
		return nil
	}
	if err == nil && h.Status().Power == lab.PoweredOn {
		b.applyStaged()
	}
	return err
}

// graceful signals the OS to shut down (ACPI), and with restart powers
// the host on again once it is off. It answers at once, as real BMCs
// do: the shutdown takes the OS's time (up to systemd's 90 s stop
// timeout per unit), longer than a client waits for an answer. A hung
// OS never acts on it; a failure is a host event.
func (b *BMC) graceful(restart bool) {
	h := b.host
	go func() {
		err := h.Shutdown(context.Background())
		if err == nil && restart {
			if err = h.PowerOn(); err == nil {
				b.applyStaged()
			}
		}
		if err != nil && !errors.Is(err, lab.ErrHung) {
			h.Record(lab.EventBMC, "GracefulResetFailed", err.Error(), map[string]string{"protocol": "redfish"})
		}
	}()
}

// firmwareMode is the boot mode the firmware settings give (BootMode).
func firmwareMode(f lab.FirmwareSettings) string {
	if f.Attributes["BootMode"] == "LegacyBios" {
		return string(lab.BootModeLegacy)
	}
	return string(lab.BootModeUEFI)
}
