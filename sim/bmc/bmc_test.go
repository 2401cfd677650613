package bmc

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/internal/pki"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/labtest"
)

type fixture struct {
	lab    *lab.Lab
	host   *lab.Host
	bmc    *BMC
	ca     *pki.CA
	events <-chan lab.Event
}

func newFixture(t testing.TB, scale timescale.Scale) *fixture {
	t.Helper()
	l := labtest.Up(t, "single-node", scale)
	def := l.Definition()
	h, _ := l.Host("node-0")
	ca, err := pki.NewCA("test lab CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := ca.Serving("bmc", []string{"127.0.0.1"})
	cert, _ := pair.TLS()
	b, err := Start(Config{Host: h, Username: "admin", Password: "upgradelab-bmc", Certificate: cert,
		Scale: scale, NVMImages: def.NVMImages, BIOSVersion: "2.19.1", BMCVersion: "7.00", BMCUpdateSeconds: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	events, cancel := l.Subscribe()
	t.Cleanup(cancel)
	return &fixture{lab: l, host: h, bmc: b, ca: ca, events: events}
}

func (f *fixture) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}}, Timeout: 10 * time.Second}
}

// connect logs in with gofish, unmodified, trusting only the lab CA.
func (f *fixture) connect(t testing.TB, user, pass string, basic bool) (*gofish.APIClient, error) {
	t.Helper()
	return gofish.Connect(gofish.ClientConfig{Endpoint: f.bmc.Endpoint(), Username: user, Password: pass, BasicAuth: basic, HTTPClient: f.httpClient()})
}

func (f *fixture) system(t testing.TB, c *gofish.APIClient) *redfish.ComputerSystem {
	t.Helper()
	systems, err := c.Service.Systems()
	if err != nil || len(systems) != 1 {
		t.Fatalf("systems: %v %v", systems, err)
	}
	return systems[0]
}

func (f *fixture) expect(t testing.TB, reason string) lab.Event {
	t.Helper()
	return labtest.Expect(t, f.events, "", reason, 10*time.Second)
}

func TestSessionsAndWrongCredentials(t *testing.T) {
	f := newFixture(t, 0)
	c, err := f.connect(t, "admin", "upgradelab-bmc", false)
	if err != nil {
		t.Fatal(err)
	}
	sys := f.system(t, c)
	if sys.ID != "node-0" || sys.PowerState != redfish.OffPowerState || sys.MemorySummary.TotalSystemMemoryGiB != 32 {
		t.Fatalf("system %+v", sys)
	}
	sessions, err := c.Service.Sessions()
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions %v %v", sessions, err)
	}
	c.Logout()
	if _, err := c.Service.Systems(); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a logged-out token still works: %v", err)
	}

	for _, basic := range []bool{false, true} {
		bad, err := f.connect(t, "admin", "wrong", basic)
		if basic && err == nil {
			_, err = bad.Service.Systems()
		}
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("wrong password (basic=%v) accepted: %v", basic, err)
		}
	}
	basic, err := f.connect(t, "admin", "upgradelab-bmc", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := basic.Service.Systems(); err != nil {
		t.Fatalf("basic auth: %v", err)
	}
	if f.host.Status().Power != lab.PoweredOff {
		t.Fatal("a refused login changed the host")
	}
}

func TestResetTypesDriveThePower(t *testing.T) {
	f := newFixture(t, 0)
	c, err := f.connect(t, "admin", "upgradelab-bmc", false)
	if err != nil {
		t.Fatal(err)
	}
	sys := f.system(t, c)
	steps := []struct {
		reset redfish.ResetType
		want  lab.PowerState
	}{
		{redfish.OnResetType, lab.PoweredOn},
		{redfish.ForceOffResetType, lab.PoweredOff},
		{redfish.PushPowerButtonResetType, lab.PoweredOn},
		{redfish.ForceRestartResetType, lab.PoweredOn},
		{redfish.GracefulShutdownResetType, lab.PoweredOff},
		{redfish.PowerCycleResetType, lab.PoweredOn},
		{redfish.NmiResetType, lab.PoweredOn},
	}
	for _, s := range steps {
		if err := sys.Reset(s.reset); err != nil {
			t.Fatalf("Reset %s: %v", s.reset, err)
		}
		// A graceful request is answered before the OS has shut down.
		deadline := time.Now().Add(10 * time.Second)
		for f.host.Status().Power != s.want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := f.host.Status().Power; got != s.want {
			t.Fatalf("after %s the host is %s, want %s", s.reset, got, s.want)
		}
		again, _ := redfish.GetComputerSystem(c, sys.ODataID)
		if string(again.PowerState) != string(s.want) {
			t.Fatalf("after %s Redfish says %s, want %s", s.reset, again.PowerState, s.want)
		}
	}
}

// A graceful request is answered at once, as real BMCs do, while the OS
// takes its time to shut down: a client's request timeout must not cut
// a slow shutdown short, nor wait for it.
func TestAGracefulRestartIsAnsweredWhileTheOSShutsDown(t *testing.T) {
	f := newFixture(t, 0.01)
	c, err := f.connect(t, "admin", "upgradelab-bmc", false)
	if err != nil {
		t.Fatal(err)
	}
	sys := f.system(t, c)
	labtest.Provision(t, f.lab, f.host, f.events, "ubuntu-24.04-k8s-v1.35.3", nil)
	labtest.Expect(t, f.events, "node-0", "OSRunning", 30*time.Second)
	f.host.SetShutdownTime(5 * time.Minute) // 3 s of wall time
	asked := time.Now()
	if err := sys.Reset(redfish.GracefulRestartResetType); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(asked); took > time.Second {
		t.Fatalf("GracefulRestart was answered after %s, the shutdown's time", took)
	}
	labtest.Expect(t, f.events, "node-0", lab.EventOSShuttingDown, time.Second)
	if st := f.host.Status(); st.Power != lab.PoweredOn || st.Phase != lab.PhaseShuttingDown {
		t.Fatalf("while it shuts down the host is %s/%s, want On/ShuttingDown", st.Power, st.Phase)
	}
	labtest.Expect(t, f.events, "node-0", "OSRunning", 30*time.Second)
	if took := time.Since(asked); took < 3*time.Second {
		t.Fatalf("the host was running again %s after the request, before its 5-minute (3 s) shutdown ended", took)
	}
}

func TestBootOnceFromVirtualMediaThenDisk(t *testing.T) {
	f := newFixture(t, 0)
	c, _ := f.connect(t, "admin", "upgradelab-bmc", false)
	sys := f.system(t, c)
	managers, err := c.Service.Managers()
	if err != nil || len(managers) != 1 {
		t.Fatalf("managers %v %v", managers, err)
	}
	media, err := managers[0].VirtualMedia()
	if err != nil || len(media) != 1 {
		t.Fatalf("virtual media %v %v", media, err)
	}
	deploy := f.lab.ImageServer().ImageURL("deploy-ramdisk-2026.10")
	if err := media[0].InsertMedia(deploy, true, true); err != nil {
		t.Fatal(err)
	}
	if err := media[0].InsertMedia(deploy, true, true); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("inserting media twice: %v, want 409", err)
	}
	if err := sys.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}); err != nil {
		t.Fatal(err)
	}
	sys.Reset(redfish.OnResetType)
	if e := f.expect(t, "OSRunning"); e.Data["source"] != string(lab.FromVirtualMedia) {
		t.Fatalf("first boot %v, want virtual media", e.Data)
	}
	again, _ := redfish.GetComputerSystem(c, sys.ODataID)
	if again.Boot.BootSourceOverrideEnabled != redfish.DisabledBootSourceOverrideEnabled {
		t.Fatalf("Once override still %s after its boot", again.Boot.BootSourceOverrideEnabled)
	}
	sys.Reset(redfish.ForceRestartResetType)
	if e := f.expect(t, "OSRunning"); e.Data["source"] == string(lab.FromVirtualMedia) {
		t.Fatalf("second boot %v, want the disk (Once reverted)", e.Data)
	}
}

func TestNICFirmwareOnResetShowsOnlyAfterReset(t *testing.T) {
	f := newFixture(t, 0.001)
	c, _ := f.connect(t, "admin", "upgradelab-bmc", false)
	sys := f.system(t, c)
	sys.Reset(redfish.OnResetType)
	f.expect(t, "OSRunning")

	us, err := c.Service.UpdateService()
	if err != nil {
		t.Fatal(err)
	}
	version := func() string {
		inv, err := us.FirmwareInventories()
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range inv {
			if i.ID == "NIC.eno1" {
				return i.Version
			}
		}
		t.Fatal("no NIC.eno1 in the firmware inventory")
		return ""
	}
	if v := version(); v != "9.20" {
		t.Fatalf("NIC firmware %s, want 9.20", v)
	}
	resp, err := c.Post(updatePath+"/Actions/UpdateService.SimpleUpdate", map[string]any{
		"ImageURI":                    "http://firmware.lab/nvm/x710-nvm-9.50",
		"Targets":                     []string{inventory + "NIC.eno1"},
		"@Redfish.OperationApplyTime": "OnReset",
	})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	monitor := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || monitor == "" {
		t.Fatalf("SimpleUpdate: %d, Location %q", resp.StatusCode, monitor)
	}
	taskState := func() (string, int) {
		r, err := c.Get(monitor)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var body struct {
			TaskState       string
			PercentComplete int
		}
		json.NewDecoder(r.Body).Decode(&body)
		return body.TaskState, r.StatusCode
	}
	time.Sleep(50 * time.Millisecond)
	if s, code := taskState(); s != taskPending || code != http.StatusAccepted {
		t.Fatalf("OnReset task before a reset: %s (%d), want Pending (202)", s, code)
	}
	if v := version(); v != "9.20" {
		t.Fatalf("NIC firmware changed before the reset: %s", v)
	}
	if err := sys.Reset(redfish.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, code := taskState()
		if s == taskCompleted && code == http.StatusOK {
			break
		}
		if s == taskException || time.Now().After(deadline) {
			t.Fatalf("task %s (%d)", s, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := version(); v != "9.50" {
		t.Fatalf("NIC firmware after the reset: %s, want 9.50", v)
	}
}

func TestRedfishErrors(t *testing.T) {
	f := newFixture(t, 0)
	do := func(method, path, body string) (int, map[string]any) { return f.do(t, method, path, body) }
	messageID := func(body map[string]any) string {
		e, _ := body["error"].(map[string]any)
		infos, _ := e["@Message.ExtendedInfo"].([]any)
		if len(infos) == 0 {
			return ""
		}
		return infos[0].(map[string]any)["MessageId"].(string)
	}
	sys := systemsPath + "node-0"
	tests := []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"PATCH", sys, `{"Boot": {`, 400, msgMalformedJSON},
		{"PATCH", sys, `{"Boot": {"BootSourceOverrideTarget": "Cd"}, "Colour": "red"}`, 400, msgPropertyUnknown},
		{"PATCH", sys, `{"Boot": {"BootSourceOverrideTarget": "Floppy"}}`, 400, msgPropertyValueNotIn},
		{"POST", sys + "/Actions/ComputerSystem.Reset", `{}`, 400, msgActionParamMissing},
		{"POST", sys + "/Actions/ComputerSystem.Reset", `{"ResetType": "Explode"}`, 400, msgPropertyValueNotIn},
		{"GET", "/redfish/v1/Systems/other-host", "", 404, msgResourceNotFound},
		{"GET", "/redfish/v1/Nowhere", "", 404, msgResourceNotFound},
		{"DELETE", sys, "", 405, msgOperationNotAllowed},
		{"POST", managerPath + "/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", `{}`, 409, msgOperationNotAllowed},
		{"POST", updatePath + "/Actions/UpdateService.SimpleUpdate", `{"ImageURI": "http://x/x710-nvm-0.1", "Targets": ["` + inventory + `NIC.eno1"]}`, 400, msgPropertyValueNotIn},
	}
	for _, tt := range tests {
		status, body := do(tt.method, tt.path, tt.body)
		if status != tt.status || messageID(body) != tt.msg {
			t.Errorf("%s %s %s: %d %s, want %d %s (body %v)", tt.method, tt.path, tt.body, status, messageID(body), tt.status, tt.msg, body)
		}
	}
	if f.host.Status().Override.Mode != lab.OverrideDisabled {
		t.Fatal("a refused PATCH changed the boot override")
	}
	plain := strings.Replace(f.bmc.Endpoint(), "https://", "http://", 1)
	if resp, err := http.Get(plain + "/redfish/v1/"); err == nil && resp.StatusCode < 400 {
		t.Fatalf("plain HTTP answered %s", resp.Status)
	}
}

func TestFaults(t *testing.T) {
	f := newFixture(t, 0)
	hc := f.httpClient()
	get := func() (int, error) {
		req, _ := http.NewRequest("GET", f.bmc.Endpoint()+"/redfish/v1/Systems", nil)
		req.SetBasicAuth("admin", "upgradelab-bmc")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	f.bmc.SetFaults(Faults{ErrorRate: 1})
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("error rate 1: %d", code)
	}
	f.bmc.SetFaults(Faults{Latency: 100 * time.Millisecond})
	begin := time.Now()
	if code, _ := get(); code != 200 || time.Since(begin) < 100*time.Millisecond {
		t.Fatalf("latency fault: %d after %s", code, time.Since(begin))
	}
	f.bmc.SetFaults(Faults{})
	f.bmc.Unreachable(300 * time.Millisecond)
	if _, err := get(); err == nil {
		t.Fatal("an unreachable BMC answered")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, err := get()
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the BMC did not come back: %d %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FuzzRedfishRequests sends arbitrary methods, paths and bodies: the BMC
// must answer every one, with a Redfish error body for every error, and
// never fail inside (5xx) unless a fault was injected.
func FuzzRedfishRequests(f *testing.F) {
	f.Add("PATCH", "/redfish/v1/Systems/node-0", []byte(`{"Boot":{"BootSourceOverrideTarget":"Cd"}}`))
	f.Add("POST", "/redfish/v1/Systems/node-0/Actions/ComputerSystem.Reset", []byte(`{"ResetType":"ForceOff"}`))
	f.Add("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", []byte(`{"ImageURI":"http://x/bios-1","Targets":["/redfish/v1/UpdateService/FirmwareInventory/BIOS"]}`))
	f.Add("POST", "/redfish/v1/SessionService/Sessions", []byte(`{"UserName":"admin","Password":"x"}`))
	f.Add("GET", "/redfish/v1/Chassis/node-0/NetworkAdapters/eno1", []byte(nil))
	f.Add("GET", "/redfish/v1/Systems/node-0/Memory/DIMM1", []byte(nil))
	f.Add("GET", "/redfish/v1/Systems/node-0/Storage/1/Drives/Disk.0", []byte(nil))
	f.Add("GET", "/redfish/v1/Chassis/node-0/PCIeDevices/eno1", []byte(nil))
	f.Add("PATCH", "/redfish/v1/Systems/node-0/Bios/Settings", []byte(`{"Attributes":{"PxeBoot":"Disabled"},"@Redfish.SettingsApplyTime":{"ApplyTime":"OnReset"}}`))
	f.Add("PATCH", "/redfish/v1/Systems/node-0/SecureBoot", []byte(`{"SecureBootEnable":true}`))
	f.Add("PATCH", "/redfish/v1/Systems/node-0", []byte(`{"Boot":{"BootOrder":["Boot0002","Boot0001"],"HttpBootUri":"http://x/y"}}`))
	f.Add("POST", "/redfish/v1/UpdateService/upload", []byte("--b\r\nContent-Disposition: form-data; name=\"UpdateParameters\"\r\n\r\n{}\r\n--b--\r\n"))
	f.Add("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", []byte(`{"ImageURI":"x/x710-nvm-9.50","TransferProtocol":"HTTP"}`))
	fx := newFixture(f, 0)
	hc := fx.httpClient()
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n#?%") || method == "" || strings.ContainsAny(method, " \r\n()<>@,;:\\\"/[]?={}") {
			return
		}
		req, err := http.NewRequest(method, fx.bmc.Endpoint()+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.SetBasicAuth("admin", "upgradelab-bmc")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: no answer: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 && !strings.Contains(string(data), "GeneralError") {
			t.Fatalf("%s %s %q: %d %s", method, path, body, resp.StatusCode, data)
		}
		if resp.StatusCode >= 400 && method != "HEAD" && !json.Valid(data) {
			t.Fatalf("%s %s: error %d without a JSON body: %q", method, path, resp.StatusCode, data)
		}
	})
}

// simpleUpdate posts SimpleUpdate through gofish's client and returns the
// task monitor.
func postSimpleUpdate(t *testing.T, c *gofish.APIClient, image, item, applyTime string) string {
	t.Helper()
	resp, err := c.Post(updatePath+"/Actions/UpdateService.SimpleUpdate", map[string]any{
		"ImageURI": "http://firmware.lab/" + image, "Targets": []string{inventory + item}, "@Redfish.OperationApplyTime": applyTime,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("SimpleUpdate %s: %d", image, resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

type taskView struct {
	TaskState       string
	PercentComplete int
	Messages        []struct{ Message string }
}

func readTask(t *testing.T, c *gofish.APIClient, monitor string) taskView {
	t.Helper()
	r, err := c.Get(monitor)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var v taskView
	json.NewDecoder(r.Body).Decode(&v)
	return v
}

func TestImmediateNICFlashProgressesAndPowerLossLeavesRecoveryMode(t *testing.T) {
	f := newFixture(t, 0.02) // a 90 s flash takes 1.8 s
	c, _ := f.connect(t, "admin", "upgradelab-bmc", false)
	sys := f.system(t, c)
	sys.Reset(redfish.OnResetType)
	f.expect(t, "OSRunning")

	monitor := postSimpleUpdate(t, c, "x710-nvm-9.50", "NIC.eno1", "Immediate")
	deadline := time.Now().Add(5 * time.Second)
	for {
		v := readTask(t, c, monitor)
		if v.TaskState == taskRunning && v.PercentComplete > 0 && v.PercentComplete < 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task never reported progress: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := sys.Reset(redfish.ForceOffResetType); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		v := readTask(t, c, monitor)
		if v.TaskState == taskException {
			if !strings.Contains(v.Messages[0].Message, "power was lost") {
				t.Fatalf("exception message %q does not say the power was lost", v.Messages[0].Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a flash cut by power loss did not end in Exception: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	adapters, err := redfish.GetNetworkAdapter(c, chassisPath+"node-0/NetworkAdapters/eno1")
	if err != nil {
		t.Fatal(err)
	}
	if adapters.Status.Health != "Critical" || f.host.Status().Ports[0].Flash != "recovery" {
		t.Fatalf("NIC after a cut flash: health %s, flash %s; want Critical and recovery", adapters.Status.Health, f.host.Status().Ports[0].Flash)
	}
	sys.Reset(redfish.OnResetType)
	if e := f.expect(t, "recovery-mode"); e.Data["up"] != "false" {
		t.Fatalf("recovery-mode NIC event %+v", e)
	}
}

func TestBMCFirmwareUpdateMakesTheEndpointUnreachable(t *testing.T) {
	f := newFixture(t, 0.3) // BMCUpdateSeconds 10 -> 3 s down
	c, _ := f.connect(t, "admin", "upgradelab-bmc", true)
	postSimpleUpdate(t, c, "bmc-7.10", "BMC", "Immediate")
	down := false
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until) && !down; time.Sleep(20 * time.Millisecond) {
		_, err := c.Get(managerPath)
		down = err != nil
	}
	if !down {
		t.Fatal("the BMC kept answering while its firmware applied")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		m, err := redfish.GetManager(c, managerPath)
		if err == nil && m.FirmwareVersion == "7.10" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the update: %v, %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBIOSUpdateTakesEffectThroughAReset(t *testing.T) {
	f := newFixture(t, 0.001)
	c, _ := f.connect(t, "admin", "upgradelab-bmc", false)
	sys := f.system(t, c)
	sys.Reset(redfish.OnResetType)
	f.expect(t, "OSRunning")
	before := f.host.Status().BootCount
	monitor := postSimpleUpdate(t, c, "bios-2.20.0", "BIOS", "Immediate")
	deadline := time.Now().Add(5 * time.Second)
	for readTask(t, c, monitor).TaskState != taskCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("BIOS task: %+v", readTask(t, c, monitor))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.expect(t, "OSRunning")
	again, _ := redfish.GetComputerSystem(c, sys.ODataID)
	if again.BIOSVersion != "2.20.0" || f.host.Status().BootCount <= before {
		t.Fatalf("BIOS %s, boots %d -> %d; want 2.20.0 after a reboot", again.BIOSVersion, before, f.host.Status().BootCount)
	}
}

// A hung OS: the BMC accepts a graceful shutdown as real ones do (it
// only signals the OS) and the power stays on; ForceRestart is what
// brings the host back. A failed power supply: power-on is refused with
// a Redfish error, and the system's health says Critical.
func TestAHungOSIgnoresGracefulResetsAndADeadSupplyRefusesPowerOn(t *testing.T) {
	f := newFixture(t, 0)
	c, err := f.connect(t, "admin", "upgradelab-bmc", false)
	if err != nil {
		t.Fatal(err)
	}
	sys := f.system(t, c)
	if err := sys.Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	f.expect(t, "OSRunning")
	if err := f.host.Hang(); err != nil {
		t.Fatal(err)
	}
	for _, reset := range []redfish.ResetType{redfish.GracefulShutdownResetType, redfish.GracefulRestartResetType} {
		if err := sys.Reset(reset); err != nil {
			t.Fatalf("%s of a hung OS: %v, want it accepted", reset, err)
		}
		time.Sleep(100 * time.Millisecond) // the OS would act on it after the answer
		if s := f.host.Status(); s.Power != lab.PoweredOn || s.Phase != lab.PhaseHung {
			t.Fatalf("after %s the hung host is %s/%s, want on and still hung", reset, s.Power, s.Phase)
		}
	}
	if err := sys.Reset(redfish.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	f.expect(t, "OSRunning")

	if err := f.host.FailPowerSupply(); err != nil {
		t.Fatal(err)
	}
	err = sys.Reset(redfish.OnResetType)
	if err == nil || !strings.Contains(err.Error(), "power supply has failed") {
		t.Fatalf("power on with a failed supply: %v, want a Redfish error naming the supply", err)
	}
	again, _ := redfish.GetComputerSystem(c, sys.ODataID)
	if again.PowerState != redfish.OffPowerState || again.Status.Health != "Critical" {
		t.Fatalf("after the supply failed Redfish says power %s health %s, want Off and Critical", again.PowerState, again.Status.Health)
	}
}
