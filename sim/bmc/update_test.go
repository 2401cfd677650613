package bmc

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitTask polls a task monitor as a client following Retry-After does,
// until the task ends.
func (f *fixture) waitTask(t *testing.T, monitor string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", f.bmc.Endpoint()+monitor, nil)
		req.SetBasicAuth("admin", "upgradelab-bmc")
		resp, err := f.httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return body
		case http.StatusAccepted:
			if resp.Header.Get("Retry-After") == "" || resp.Header.Get("Location") != monitor {
				t.Fatalf("202 from the task monitor without Retry-After or Location: %v", resp.Header)
			}
		default:
			t.Fatalf("task monitor %s: %d", monitor, resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %v", monitor, body["TaskState"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) post(t *testing.T, path, contentType string, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", f.bmc.Endpoint()+path, bytes.NewReader(body))
	req.SetBasicAuth("admin", "upgradelab-bmc")
	req.Header.Set("Content-Type", contentType)
	resp, err := f.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// SimpleUpdate as real BMCs take it: without Targets (the NVM image goes
// to the NIC ports, bios-* to the BIOS), with TransferProtocol (HTTP and
// HTTPS; a URI without a scheme takes the protocol's), answered 202 with
// a task monitor that asks the client to come back (Retry-After); the
// task is listed in the TaskService and its acceptance is a lab event.
func TestSimpleUpdateWithoutTargetsAndTransferProtocol(t *testing.T) {
	f := newFixture(t, 0.01)
	action := updatePath + "/Actions/UpdateService.SimpleUpdate"
	nvm := f.lab.ImageServer().FirmwareURL("x710-nvm-9.50")
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"ImageURI": nvm, "TransferProtocol": "FTP"}, "TransferProtocol"},
		{map[string]any{"ImageURI": nvm, "TransferProtocol": "HTTPS"}, "does not match"},
		{map[string]any{"ImageURI": "http://x/mystery-image"}, "give Targets"},
		{map[string]any{"ImageURI": nvm, "Targets": []string{inventory + "NIC.eno1", inventory + "BIOS"}}, "more than one"},
	} {
		if code, e := f.do(t, "POST", action, c.body); code != http.StatusBadRequest || !strings.Contains(errorMessage(e), c.want) {
			t.Fatalf("SimpleUpdate %v: %d %s, want 400 saying %q", c.body, code, errorMessage(e), c.want)
		}
	}
	// An NVM image without Targets flashes the NIC (the host on: an
	// Immediate flash needs power), active after a reset.
	_, _ = f.do(t, "POST", "/redfish/v1/Systems/node-0/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
	body, _ := json.Marshal(map[string]any{"ImageURI": strings.TrimPrefix(nvm, "http://"), "TransferProtocol": "HTTP", "@Redfish.OperationApplyTime": "Immediate"})
	resp := f.post(t, action, "application/json", body)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("SimpleUpdate without Targets: %d %v", resp.StatusCode, resp.Header)
	}
	f.expect(t, "FirmwareUpdateAccepted")
	if done := f.waitTask(t, resp.Header.Get("Location")); done["TaskState"] != taskCompleted {
		t.Fatalf("NVM task: %v", done)
	}
	if p := f.host.Status().Ports[0]; p.Pending == nil || p.Pending.Name != "x710-nvm-9.50" {
		t.Fatalf("the NIC after an NVM update without Targets: %+v", p)
	}
	// bios-* without Targets goes to the BIOS.
	code, accepted := f.do(t, "POST", action, map[string]any{"ImageURI": "http://firmware.lab/bios-2.20.0"})
	if code != http.StatusAccepted {
		t.Fatalf("BIOS SimpleUpdate without Targets: %d", code)
	}
	if done := f.waitTask(t, accepted["TaskMonitor"].(string)); done["TaskState"] != taskCompleted {
		t.Fatalf("BIOS task: %v", done)
	}
	if _, sys := f.do(t, "GET", f.bmc.systemPath(), nil); sys["BiosVersion"] != "2.20.0" {
		t.Fatalf("BiosVersion after the update: %v", sys["BiosVersion"])
	}
	_, tasks := f.do(t, "GET", strings.TrimSuffix(tasksPath, "/"), nil)
	if tasks["Members@odata.count"] != float64(2) {
		t.Fatalf("TaskService lists %v tasks, want the two", tasks["Members@odata.count"])
	}
}

// MultipartHttpPushUri: the NVM update package itself in the request
// (its descriptor names the image), UpdateParameters with Targets and
// the apply time; a package the server does not know is refused.
func TestMultipartPushUpdatesTheNIC(t *testing.T) {
	f := newFixture(t, 0.01)
	_, svc := f.do(t, "GET", updatePath, nil)
	push, _ := svc["MultipartHttpPushUri"].(string)
	if push == "" {
		t.Fatalf("UpdateService without MultipartHttpPushUri: %v", svc)
	}
	form := func(params string, pkg any) ([]byte, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		pw, _ := mw.CreateFormField("UpdateParameters")
		pw.Write([]byte(params))
		fw, _ := mw.CreateFormFile("UpdateFile", "x710.nvmupdate")
		json.NewEncoder(fw).Encode(pkg)
		mw.Close()
		return buf.Bytes(), mw.FormDataContentType()
	}
	fake := f.lab.Definition().NVMImages["x710-nvm-9.50"]
	fake.Firmware = "99.0"
	b, ct := form(`{"Targets": ["`+inventory+`NIC.eno1"]}`, fake)
	if resp := f.post(t, push, ct, b); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a package whose descriptor is not the catalog's: %d", resp.StatusCode)
	}
	b, ct = form(`{"Targets": ["`+inventory+`NIC.eno1"], "@Redfish.OperationApplyTime": "OnReset"}`, f.lab.Definition().NVMImages["x710-nvm-9.50"])
	resp := f.post(t, push, ct, b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("multipart push: %d", resp.StatusCode)
	}
	_, pending := f.do(t, "GET", resp.Header.Get("Location"), nil)
	if pending["TaskState"] != taskPending {
		t.Fatalf("an OnReset push before the reset: %v", pending["TaskState"])
	}
	f.do(t, "POST", "/redfish/v1/Systems/node-0/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
	if done := f.waitTask(t, resp.Header.Get("Location")); done["TaskState"] != taskCompleted {
		t.Fatalf("pushed NVM task: %v", done)
	}
	if p := f.host.Status().Ports[0]; p.Active.Name != "x710-nvm-9.50" {
		t.Fatalf("the NIC after the pushed OnReset update: %+v", p.Active)
	}
	if resp := f.post(t, push, "application/json", []byte(`{}`)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a push that is not multipart: %d", resp.StatusCode)
	}
}
