package bmc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

// do sends one request as a plain HTTPS client would (the bodies follow
// the DMTF schema guide's examples) and decodes the answer. A string body
// is sent as it is (malformed JSON, say); anything else as its JSON.
func (f *fixture) do(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		raw, _ = json.Marshal(b)
	}
	rd := bytes.NewReader(raw)
	req, _ := http.NewRequest(method, f.bmc.Endpoint()+path, rd)
	req.SetBasicAuth("admin", "upgradelab-bmc")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func errorMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	b, _ := json.Marshal(e)
	return string(b)
}

// Boot.BootOrder lists the firmware's boot options and a PATCH rewrites
// it at once; a UefiHttp override with an HttpBootUri loads that image;
// the virtual CD is the same device from the System and the Manager.
func TestBootOrderHTTPBootAndVirtualMediaFromTheSystem(t *testing.T) {
	f := newFixture(t, 0)
	sys := f.bmc.systemPath()
	_, body := f.do(t, "GET", sys, nil)
	boot := body["Boot"].(map[string]any)
	if got := boot["BootOrder"]; !slices.Equal(anyStrings(got), []string{"Boot0001", "Boot0002"}) {
		t.Fatalf("BootOrder of a host whose lab file says Hdd, Pxe: %v", got)
	}
	if !slices.Contains(anyStrings(boot["BootSourceOverrideTarget@Redfish.AllowableValues"]), "BiosSetup") ||
		!slices.Equal(anyStrings(boot["BootSourceOverrideMode@Redfish.AllowableValues"]), []string{"UEFI", "Legacy"}) {
		t.Fatalf("allowable values: %v", boot)
	}
	_, opts := f.do(t, "GET", sys+"/BootOptions", nil)
	if opts["Members@odata.count"] != float64(4) {
		t.Fatalf("boot options: %v", opts)
	}
	_, opt := f.do(t, "GET", sys+"/BootOptions/Boot0003", nil)
	if opt["BootOptionReference"] != "Boot0003" || opt["Alias"] != "Cd" {
		t.Fatalf("Boot0003: %v", opt)
	}
	if code, _ := f.do(t, "PATCH", sys, map[string]any{"Boot": map[string]any{"BootOrder": []string{"Boot0003", "Boot0001"}}}); code != http.StatusNoContent {
		t.Fatalf("PATCH BootOrder: %d", code)
	}
	f.expect(t, "BootOrderSet")
	if got := f.host.Firmware().BootOrder; !slices.Equal(got, []lab.BootTarget{lab.BootCd, lab.BootHdd}) {
		t.Fatalf("the host's boot order after the PATCH: %v", got)
	}
	if code, e := f.do(t, "PATCH", sys, map[string]any{"Boot": map[string]any{"BootOrder": []string{"Boot0009"}}}); code != http.StatusBadRequest || !strings.Contains(errorMessage(e), "Boot0009") {
		t.Fatalf("PATCH BootOrder with an unknown option: %d %s", code, errorMessage(e))
	}

	// The virtual CD through the System: inserted there, seen at the Manager.
	deploy := f.lab.ImageServer().ImageURL(labtest.DeployImage)
	if code, e := f.do(t, "POST", sys+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": deploy, "TransferProtocolType": "HTTPS"}); code != http.StatusBadRequest {
		t.Fatalf("InsertMedia of an http URL as HTTPS: %d %s", code, errorMessage(e))
	}
	if code, e := f.do(t, "POST", sys+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": deploy, "TransferProtocolType": "HTTP", "WriteProtected": true, "Inserted": true}); code != http.StatusNoContent {
		t.Fatalf("InsertMedia through the System: %d %s", code, errorMessage(e))
	}
	_, cd := f.do(t, "GET", managerPath+"/VirtualMedia/Cd", nil)
	if cd["Inserted"] != true || cd["Image"] != deploy || cd["TransferProtocolType"] != "HTTP" || cd["WriteProtected"] != true {
		t.Fatalf("the Manager's virtual CD after an insert through the System: %v", cd)
	}
	f.do(t, "POST", managerPath+"/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", map[string]any{})
	if _, cd := f.do(t, "GET", sys+"/VirtualMedia/Cd", nil); cd["Inserted"] != false {
		t.Fatalf("the System's virtual CD after an eject at the Manager: %v", cd)
	}

	// UEFI HTTP boot of the deploy ramdisk from a URI.
	if code, e := f.do(t, "PATCH", sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "HttpBootUri": "ftp://x/y"}}); code != http.StatusBadRequest {
		t.Fatalf("an ftp HttpBootUri: %d %s", code, errorMessage(e))
	}
	if code, e := f.do(t, "PATCH", sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "HttpBootUri": deploy}}); code != http.StatusNoContent {
		t.Fatalf("PATCH UefiHttp: %d %s", code, errorMessage(e))
	}
	if code, _ := f.do(t, "POST", sys+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"}); code != http.StatusNoContent {
		t.Fatalf("power on: %d", code)
	}
	if e := f.expect(t, "OSRunning"); e.Data["source"] != string(lab.FromNetwork) || e.Data["target"] != string(lab.BootUefiHttp) {
		t.Fatalf("UEFI HTTP boot: %v", e.Data)
	}
	if os := f.host.Status().OS; os == nil || os.Media != deploy {
		t.Fatalf("the HTTP-booted OS: %+v", os)
	}
}

// BIOS attributes change through Bios/Settings and take effect at the
// next reset, as the registry says; secure boot too. A setting with a
// rule changes the boot: PxeBoot Disabled fails the Pxe device,
// BootMode LegacyBios finds no loader.
func TestBiosSettingsAndSecureBootApplyAtTheNextReset(t *testing.T) {
	f := newFixture(t, 0)
	sys := f.bmc.systemPath()
	_, bios := f.do(t, "GET", sys+"/Bios", nil)
	attrs, _ := bios["Attributes"].(map[string]any)
	if attrs["PxeBoot"] != "Enabled" || attrs["BootMode"] != "Uefi" || bios["AttributeRegistry"] != biosRegistryID {
		t.Fatalf("Bios: %v", bios)
	}
	settings, _ := bios["@Redfish.Settings"].(map[string]any)
	obj, _ := settings["SettingsObject"].(map[string]any)
	if obj["@odata.id"] != sys+"/Bios/Settings" {
		t.Fatalf("@Redfish.Settings: %v", settings)
	}
	// The registry, found as a client does: Registries, its file, the Uri.
	_, file := f.do(t, "GET", registriesPath+"/BiosAttributeRegistry", nil)
	loc := file["Location"].([]any)[0].(map[string]any)["Uri"].(string)
	_, reg := f.do(t, "GET", loc, nil)
	entries := reg["RegistryEntries"].(map[string]any)["Attributes"].([]any)
	if len(entries) != len(lab.FirmwareAttributes) || reg["Id"] != biosRegistryID {
		t.Fatalf("registry: %v", reg)
	}

	refusesBadBiosSettings(t, f, sys)
	if code, e := f.do(t, "PATCH", sys+"/Bios/Settings", map[string]any{"Attributes": map[string]any{"PxeBoot": "Disabled"},
		"@Redfish.SettingsApplyTime": map[string]string{"ApplyTime": "OnReset"}}); code != http.StatusNoContent {
		t.Fatalf("PATCH Bios/Settings: %d %s", code, errorMessage(e))
	}
	if code, _ := f.do(t, "PATCH", sys+"/SecureBoot", map[string]any{"SecureBootEnable": true}); code != http.StatusNoContent {
		t.Fatalf("PATCH SecureBoot: %d", code)
	}
	_, bios = f.do(t, "GET", sys+"/Bios", nil)
	_, pending := f.do(t, "GET", sys+"/Bios/Settings", nil)
	_, sb := f.do(t, "GET", sys+"/SecureBoot", nil)
	if bios["Attributes"].(map[string]any)["PxeBoot"] != "Enabled" || pending["Attributes"].(map[string]any)["PxeBoot"] != "Disabled" ||
		sb["SecureBootEnable"] != true || sb["SecureBootCurrentBoot"] != "Disabled" {
		t.Fatalf("before the reset: current %v, pending %v, secure boot %v", bios["Attributes"], pending["Attributes"], sb)
	}

	// The next power-on applies both; a PXE boot then fails.
	c, err := f.connect(t, "admin", "upgradelab-bmc", true)
	if err != nil {
		t.Fatal(err)
	}
	s := f.system(t, c)
	if err := s.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	if e := f.expect(t, "FirmwareSettingsApplied"); !strings.Contains(e.Message, "PxeBoot=Disabled") || !strings.Contains(e.Message, "secure boot on") {
		t.Fatalf("applied: %s", e.Message)
	}
	if e := f.expect(t, "BootDeviceFailed"); !strings.Contains(e.Message, "PXE boot is disabled") {
		t.Fatalf("PXE with PxeBoot Disabled: %s", e.Message)
	}
	_, bios = f.do(t, "GET", sys+"/Bios", nil)
	_, sb = f.do(t, "GET", sys+"/SecureBoot", nil)
	if bios["Attributes"].(map[string]any)["PxeBoot"] != "Disabled" || sb["SecureBootCurrentBoot"] != "Enabled" {
		t.Fatalf("after the reset: %v, secure boot %v", bios["Attributes"], sb)
	}

	// BootMode LegacyBios: the system reports Legacy, and no boot finds
	// a loader.
	f.do(t, "PATCH", sys+"/Bios/Settings", map[string]any{"Attributes": map[string]any{"BootMode": "LegacyBios"}})
	if err := s.Reset(redfish.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	if e := f.expect(t, "NoBootDevice"); !strings.Contains(e.Message, "legacy boot") {
		t.Fatalf("a LegacyBios boot: %s", e.Message)
	}
	if _, body := f.do(t, "GET", sys, nil); body["Boot"].(map[string]any)["BootSourceOverrideMode"] != "Legacy" {
		t.Fatalf("BootSourceOverrideMode with BootMode LegacyBios: %v", body["Boot"])
	}
}

// refusesBadBiosSettings PATCHes settings the registry or the service
// refuses (an unknown attribute, a value not in the list, a wrong type,
// an apply time the BMC does not offer): each is a 400 naming it.
func refusesBadBiosSettings(t *testing.T, f *fixture, sys string) {
	t.Helper()
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"Attributes": map[string]any{"TurboMode": "Enabled"}}, "TurboMode"},
		{map[string]any{"Attributes": map[string]any{"PxeBoot": "Off"}}, "PxeBoot"},
		{map[string]any{"Attributes": map[string]any{"PxeBoot": true}}, "PxeBoot"},
		{map[string]any{"Attributes": map[string]any{"PxeBoot": "Disabled"}, "@Redfish.SettingsApplyTime": map[string]string{"ApplyTime": "Immediate"}}, "ApplyTime"},
	} {
		if code, e := f.do(t, "PATCH", sys+"/Bios/Settings", c.body); code != http.StatusBadRequest || !strings.Contains(errorMessage(e), c.want) {
			t.Fatalf("PATCH %v: %d %s, want 400 naming %s", c.body, code, errorMessage(e), c.want)
		}
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
