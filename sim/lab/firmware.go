package lab

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The system firmware's settings (UEFI setup), what a BMC's Redfish
// Bios, Bios/Settings, SecureBoot and Boot.BootOrder read and change.
// Changes are pending until the next POST, as on real servers: a BIOS
// setting or a secure boot change asked for now takes effect at the next
// power-on or reset, and only then does the firmware report it as
// current. The attributes are a table (FirmwareAttributes), like a BIOS
// attribute registry; those with a rule change how the host boots.

// FirmwareAttribute is one BIOS attribute as the registry describes it.
type FirmwareAttribute struct {
	Name        string
	DisplayName string
	Values      []string // an enumeration's allowed values
	Default     string
	ResetNeeded bool
	HelpText    string
}

// FirmwareAttributes is the lab servers' attribute registry. BootMode and
// PxeBoot are rules of the boot (boot.go): LegacyBios makes every boot
// without an override's own mode legacy (no loader, ErrLegacyBoot);
// PxeBoot Disabled makes the Pxe device fail. The others are recorded
// and reported only.
var FirmwareAttributes = []FirmwareAttribute{
	{Name: "BootMode", DisplayName: "Boot Mode", Values: []string{"Uefi", "LegacyBios"}, Default: "Uefi", ResetNeeded: true,
		HelpText: "The firmware's boot mode; the lab's images boot in UEFI mode only."},
	{Name: "PxeBoot", DisplayName: "PXE Boot", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetNeeded: true,
		HelpText: "Network (PXE) boot from the NICs."},
	{Name: "ProcVirtualization", DisplayName: "Virtualization Technology", Values: []string{"Enabled", "Disabled"}, Default: "Enabled", ResetNeeded: true,
		HelpText: "VT-x and AMD-V."},
	{Name: "SriovGlobalEnable", DisplayName: "SR-IOV Global Enable", Values: []string{"Enabled", "Disabled"}, Default: "Disabled", ResetNeeded: true,
		HelpText: "SR-IOV for PCIe devices."},
}

// FirmwareSettings is what the firmware holds, current and pending.
type FirmwareSettings struct {
	// Attributes are the current values, every registry attribute.
	Attributes map[string]string `json:"attributes"`
	// Pending are values asked for, applied at the next POST.
	Pending map[string]string `json:"pending,omitempty"`
	// BootOrder is the order without an override (default the lab
	// file's bootOrder).
	BootOrder []BootTarget `json:"bootOrder"`
	// SecureBoot is whether secure boot is enabled; SecureBootPending
	// what it will be after the next POST; SecureBootCurrentBoot whether
	// the running boot had it.
	SecureBoot            bool  `json:"secureBoot"`
	SecureBootPending     *bool `json:"secureBootPending,omitempty"`
	SecureBootCurrentBoot bool  `json:"secureBootCurrentBoot"`
}

func defaultFirmware(spec HostSpec) FirmwareSettings {
	f := FirmwareSettings{Attributes: map[string]string{}, BootOrder: slices.Clone(spec.BootOrder)}
	for _, a := range FirmwareAttributes {
		f.Attributes[a.Name] = a.Default
	}
	return f
}

func (f FirmwareSettings) clone() FirmwareSettings {
	f.Attributes, f.Pending, f.BootOrder = maps.Clone(f.Attributes), maps.Clone(f.Pending), slices.Clone(f.BootOrder)
	if f.SecureBootPending != nil {
		v := *f.SecureBootPending
		f.SecureBootPending = &v
	}
	return f
}

// Firmware returns the host's firmware settings.
func (h *Host) Firmware() FirmwareSettings {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.firmware.clone()
}

// SetFirmwareAttributes asks for attribute values, applied at the next
// POST; each must be a registry attribute with an allowed value (the
// error names the first that is not), and nothing is taken unless all
// are.
func (h *Host) SetFirmwareAttributes(values map[string]string) error {
	names := slices.Sorted(maps.Keys(values))
	for _, name := range names {
		i := slices.IndexFunc(FirmwareAttributes, func(a FirmwareAttribute) bool { return a.Name == name })
		if i < 0 {
			return fmt.Errorf("host %s: firmware attribute %q is not in the registry", h.spec.Name, name)
		}
		if !slices.Contains(FirmwareAttributes[i].Values, values[name]) {
			return fmt.Errorf("host %s: firmware attribute %s: %q is not one of %v", h.spec.Name, name, values[name], FirmwareAttributes[i].Values)
		}
	}
	h.mu.Lock()
	if h.firmware.Pending == nil {
		h.firmware.Pending = map[string]string{}
	}
	maps.Copy(h.firmware.Pending, values)
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventBoot, "FirmwareSettingsPending", "applied at the next POST: "+formatAttrs(values), values)
	return nil
}

// SetSecureBoot asks for secure boot on or off from the next POST.
func (h *Host) SetSecureBoot(enabled bool) {
	h.mu.Lock()
	h.firmware.SecureBootPending = &enabled
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventBoot, "FirmwareSettingsPending", fmt.Sprintf("secure boot %s at the next POST", onOff(enabled)), map[string]string{"secureBoot": onOff(enabled)})
}

// SetBootOrder replaces the boot order at once (UEFI's BootOrder
// variable is written immediately); each target once.
func (h *Host) SetBootOrder(order []BootTarget) error {
	seen := map[BootTarget]bool{}
	for _, t := range order {
		switch t {
		case BootHdd, BootCd, BootPxe, BootUefiHttp:
		default:
			return fmt.Errorf("host %s: boot order: %q is not Hdd, Cd, Pxe or UefiHttp", h.spec.Name, t)
		}
		if seen[t] {
			return fmt.Errorf("host %s: boot order: %s is listed twice", h.spec.Name, t)
		}
		seen[t] = true
	}
	if len(order) == 0 {
		return fmt.Errorf("host %s: boot order: empty", h.spec.Name)
	}
	h.mu.Lock()
	h.firmware.BootOrder = slices.Clone(order)
	h.saveLocked()
	h.mu.Unlock()
	words := make([]string, len(order))
	for i, t := range order {
		words[i] = string(t)
	}
	h.emit(EventBoot, "BootOrderSet", strings.Join(words, ", "), nil)
	return nil
}

// applyPendingLocked is the POST's part: pending settings become current.
// It says what changed ("" for nothing).
func (h *Host) applyPendingLocked() string {
	f := &h.firmware
	var changed []string
	if len(f.Pending) > 0 {
		maps.Copy(f.Attributes, f.Pending)
		changed = append(changed, formatAttrs(f.Pending))
		f.Pending = nil
	}
	if f.SecureBootPending != nil {
		f.SecureBoot = *f.SecureBootPending
		f.SecureBootPending = nil
		changed = append(changed, "secure boot "+onOff(f.SecureBoot))
	}
	f.SecureBootCurrentBoot = f.SecureBoot
	return strings.Join(changed, ", ")
}

func formatAttrs(values map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		out = append(out, k+"="+values[k])
	}
	return strings.Join(out, " ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
