package bmc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Firmware inventory ids: the system firmware, the BMC's own, and one NVM
// per NIC port.
const (
	itemBIOS      = "BIOS"
	itemBMC       = "BMC"
	itemNICPrefix = "NIC."
)

// Task states as Redfish names them.
const (
	taskNew       = "New"
	taskPending   = "Pending"
	taskRunning   = "Running"
	taskCompleted = "Completed"
	taskException = "Exception"
)

type task struct {
	ID, State, Message string
	Percent            int
	Start, End         time.Time
	// Items are the inventory ids the image goes to: one, or every NIC
	// port an NVM image without Targets fits, flashed in turn.
	Items     []string
	Image     string
	ApplyTime string
}

func (t *task) items() string { return strings.Join(t.Items, ", ") }

func (b *BMC) getUpdateService(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": updatePath, "@odata.type": "#UpdateService.v1_14_0.UpdateService",
		"Id": "UpdateService", "Name": "Update Service", "ServiceEnabled": true,
		"FirmwareInventory":    odataID(strings.TrimSuffix(inventory, "/")),
		"MultipartHttpPushUri": pushPath,
		"Actions": map[string]any{
			"#UpdateService.SimpleUpdate": map[string]any{
				"target": updatePath + "/Actions/UpdateService.SimpleUpdate",
				"TransferProtocol@Redfish.AllowableValues": transferProtocols,
				"@Redfish.OperationApplyTimeSupport": map[string]any{
					"SupportedValues": []string{"Immediate", "OnReset"},
				},
			},
		},
	})
}

// items lists inventory ids with their current versions.
func (b *BMC) items() ([]string, map[string]string) {
	b.mu.Lock()
	versions := map[string]string{itemBIOS: b.bios, itemBMC: b.bmcFW}
	b.mu.Unlock()
	ids := []string{itemBIOS, itemBMC}
	for _, p := range b.host.Status().Ports {
		ids = append(ids, itemNICPrefix+p.Name)
		versions[itemNICPrefix+p.Name] = p.Active.Firmware
	}
	return ids, versions
}

func (b *BMC) getFirmwareInventory(w http.ResponseWriter, _ *http.Request) {
	ids, _ := b.items()
	members := make([]string, len(ids))
	for i, id := range ids {
		members[i] = inventory + id
	}
	writeJSON(w, http.StatusOK, collection(strings.TrimSuffix(inventory, "/"), "#SoftwareInventoryCollection.SoftwareInventoryCollection", "Firmware Inventory", members...))
}

func (b *BMC) getFirmwareItem(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("item")
	_, versions := b.items()
	v, ok := versions[id]
	if !ok {
		notFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": inventory + id, "@odata.type": "#SoftwareInventory.v1_10_0.SoftwareInventory",
		"Id": id, "Name": id + " firmware", "Version": v, "Updateable": true,
		"Status": map[string]string{"State": "Enabled", "Health": "OK"},
	})
}

type simpleUpdate struct {
	ImageURI         string   `json:"ImageURI"`
	Targets          []string `json:"Targets"`
	TransferProtocol string   `json:"TransferProtocol"`
	ForceUpdate      bool     `json:"ForceUpdate"`
	Username         string   `json:"Username"`
	Password         string   `json:"Password"`
	ApplyTime        string   `json:"@Redfish.OperationApplyTime"`
}

// transferProtocols are what the BMC downloads with.
var transferProtocols = []string{"HTTP", "HTTPS"}

// pushPath is the MultipartHttpPushUri: the image is in the request.
const pushPath = updatePath + "/upload"

// postSimpleUpdate validates an update and answers 202 with a task
// monitor. Targets may be left out, as real BMCs allow: the image names
// its component (an NVM image goes to every NIC port, bios-* to the BIOS,
// bmc-* to the BMC). Immediate updates start at once; OnReset ones wait,
// Pending, for the next reset of the system.
func (b *BMC) postSimpleUpdate(w http.ResponseWriter, r *http.Request) {
	var p simpleUpdate
	if !decode(w, r, &p) {
		return
	}
	if p.ImageURI == "" {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The action UpdateService.SimpleUpdate requires the parameter ImageURI to be present in the request body.", "ImageURI")
		return
	}
	uri := p.ImageURI
	if p.TransferProtocol != "" {
		if !slices.Contains(transferProtocols, p.TransferProtocol) {
			writeError(w, http.StatusBadRequest, msgParamNotSupported, "The value "+p.TransferProtocol+" for the parameter TransferProtocol is not supported (HTTP, HTTPS).", "TransferProtocol")
			return
		}
		if !strings.Contains(uri, "://") {
			// A URI without a scheme takes the protocol's (Redfish's rule).
			uri = strings.ToLower(p.TransferProtocol) + "://" + uri
		}
	}
	u, err := url.Parse(uri)
	if err != nil || u.Path == "" || (u.Scheme != "http" && u.Scheme != "https") {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+p.ImageURI+" for the parameter ImageURI is not an http(s) URI.", "ImageURI")
		return
	}
	if p.TransferProtocol != "" && !strings.EqualFold(u.Scheme, p.TransferProtocol) {
		writeError(w, http.StatusBadRequest, msgParamNotSupported, "TransferProtocol "+p.TransferProtocol+" does not match the ImageURI's scheme "+u.Scheme+".", "TransferProtocol")
		return
	}
	b.startUpdate(w, path.Base(u.Path), p.Targets, p.ApplyTime)
}

// postMultipartPush is the MultipartHttpPushUri: a multipart/form-data
// body with UpdateParameters (JSON: Targets, @Redfish.OperationApplyTime)
// and UpdateFile, the package itself. An NVM update package names its
// image in its descriptor; a BIOS or BMC image is named by its file name.
func (b *BMC) postMultipartPush(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		writeError(w, http.StatusBadRequest, msgMalformedJSON, "The request is not multipart/form-data with UpdateParameters and UpdateFile: "+err.Error(), "")
		return
	}
	var params struct {
		Targets   []string `json:"Targets"`
		ApplyTime string   `json:"@Redfish.OperationApplyTime"`
		Oem       any      `json:"Oem"`
	}
	if raw := r.MultipartForm.Value["UpdateParameters"]; len(raw) > 0 {
		if err := decodeStrict(strings.NewReader(raw[0]), &params); err != nil {
			writeError(w, http.StatusBadRequest, msgMalformedJSON, "UpdateParameters: "+err.Error(), "UpdateParameters")
			return
		}
	} else if files := r.MultipartForm.File["UpdateParameters"]; len(files) > 0 {
		f, err := files[0].Open()
		if err == nil {
			err = decodeStrict(f, &params)
			f.Close()
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, msgMalformedJSON, "UpdateParameters: "+err.Error(), "UpdateParameters")
			return
		}
	}
	files := r.MultipartForm.File["UpdateFile"]
	if len(files) != 1 {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The request needs one UpdateFile part.", "UpdateFile")
		return
	}
	f, err := files[0].Open()
	if err != nil {
		writeError(w, http.StatusBadRequest, msgGeneralError, err.Error(), "UpdateFile")
		return
	}
	defer f.Close()
	var desc imagev1.NVMImage
	name := files[0].Filename
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&desc); err == nil && desc.Name != "" {
		if known, ok := b.cfg.NVMImages[desc.Name]; !ok || known != desc {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The NVM update package "+desc.Name+" is not one of this server's NVM images, or its descriptor differs.", "UpdateFile")
			return
		}
		name = desc.Name
	}
	b.startUpdate(w, name, params.Targets, params.ApplyTime)
}

// startUpdate checks the image against its targets and answers 202 with
// the task's monitor.
func (b *BMC) startUpdate(w http.ResponseWriter, imageName string, targets []string, applyTime string) {
	var items []string
	switch {
	case len(targets) > 1:
		writeError(w, http.StatusBadRequest, msgParamNotSupported, "Targets names more than one FirmwareInventory member; give one, or none and let the image name its component.", "Targets")
		return
	case len(targets) == 1:
		item := strings.TrimPrefix(strings.TrimSuffix(targets[0], "/"), inventory)
		if _, versions := b.items(); versions[item] == "" || item == targets[0] {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+targets[0]+" for the parameter Targets is not a FirmwareInventory member.", "Targets")
			return
		}
		items = []string{item}
	default:
		items = b.componentsOf(imageName)
		if len(items) == 0 {
			writeError(w, http.StatusBadRequest, msgActionParamMissing, "The image "+imageName+" does not name its component (an NVM image, bios-VERSION or bmc-VERSION): give Targets.", "Targets")
			return
		}
	}
	if applyTime == "" {
		applyTime = "Immediate"
	}
	if applyTime != "Immediate" && applyTime != "OnReset" {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+applyTime+" for @Redfish.OperationApplyTime is not supported (Immediate, OnReset).", "@Redfish.OperationApplyTime")
		return
	}
	for _, item := range items {
		if msg := b.checkImage(item, imageName); msg != "" {
			writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, msg, "ImageURI")
			return
		}
	}
	b.mu.Lock()
	b.nextID++
	t := &task{ID: strconv.Itoa(b.nextID), State: taskNew, Items: items, Image: imageName, ApplyTime: applyTime, Start: time.Now()}
	b.tasks[t.ID] = t
	if applyTime == "OnReset" {
		t.State, t.Message = taskPending, "Waiting for the next reset of the system."
		b.staged = append(b.staged, t)
	}
	b.mu.Unlock()
	if applyTime == "Immediate" {
		go b.run(t)
	}
	b.host.Record(lab.EventBMC, "FirmwareUpdateAccepted", fmt.Sprintf("task %s: %s for %s, %s", t.ID, imageName, t.items(), applyTime),
		map[string]string{"task": t.ID, "image": imageName, "items": t.items(), "applyTime": applyTime})
	w.Header().Set("Location", taskMonitorPath+t.ID)
	w.Header().Set("Retry-After", retryAfter)
	writeJSON(w, http.StatusAccepted, b.taskBody(t))
}

// componentsOf is what an image without Targets goes to.
func (b *BMC) componentsOf(image string) []string {
	switch {
	case strings.HasPrefix(image, "bios-"):
		return []string{itemBIOS}
	case strings.HasPrefix(image, "bmc-"):
		return []string{itemBMC}
	}
	if _, ok := b.cfg.NVMImages[image]; !ok {
		return nil
	}
	var items []string
	for _, p := range b.host.Status().Ports {
		items = append(items, itemNICPrefix+p.Name)
	}
	return items
}

// taskMonitorPath is where a task's monitor is; retryAfter the seconds a
// 202 from it tells the client to wait.
const (
	taskMonitorPath = "/redfish/v1/TaskService/TaskMonitors/"
	retryAfter      = "1"
)

// checkImage says what is wrong with an image for an inventory item.
func (b *BMC) checkImage(item, image string) string {
	switch {
	case strings.HasPrefix(item, itemNICPrefix):
		if _, ok := b.cfg.NVMImages[image]; !ok {
			return fmt.Sprintf("The image %s is not an NVM image for %s.", image, item)
		}
	case item == itemBIOS && !strings.HasPrefix(image, "bios-"), item == itemBMC && !strings.HasPrefix(image, "bmc-"):
		return fmt.Sprintf("The image %s is not a %s firmware image (bios-VERSION or bmc-VERSION).", image, item)
	}
	return ""
}

// applyStaged starts the OnReset updates once the system has reset.
func (b *BMC) applyStaged() {
	b.mu.Lock()
	staged := b.staged
	b.staged = nil
	b.mu.Unlock()
	for _, t := range staged {
		go b.run(t)
	}
}

func (b *BMC) setTask(t *task, state string, percent int, msg string) {
	b.mu.Lock()
	changed := t.State != state
	t.State, t.Percent, t.Message = state, percent, msg
	if state == taskCompleted || state == taskException {
		t.End = time.Now()
	}
	b.mu.Unlock()
	if changed {
		b.taskEvent(t, state)
	}
}

// run performs one update, reporting progress on its task.
func (b *BMC) run(t *task) {
	ctx := context.Background()
	b.setTask(t, taskRunning, 0, "Applying "+t.Image+" to "+t.items()+".")
	switch item := t.Items[0]; {
	case strings.HasPrefix(item, itemNICPrefix):
		img := b.cfg.NVMImages[t.Image]
		var ports []string
		for _, it := range t.Items {
			port := strings.TrimPrefix(it, itemNICPrefix)
			ports = append(ports, port)
			stop := b.progress(t, timescale.Seconds(img.FlashSeconds))
			err := b.host.FlashNVM(ctx, port, t.Image)
			stop()
			if err != nil {
				b.setTask(t, taskException, t.Percent, "NVM update of "+port+" failed: "+err.Error())
				return
			}
		}
		port := strings.Join(ports, ", ")
		if t.ApplyTime == "OnReset" {
			// Staged firmware is applied during POST; the server resets once
			// more so the NIC loads it, as real servers do.
			if err := b.host.Reset(); err != nil {
				b.setTask(t, taskException, 100, "NVM written, but the reset that activates it failed: "+err.Error())
				return
			}
			b.setTask(t, taskCompleted, 100, fmt.Sprintf("NVM %s applied to %s and active.", t.Image, port))
			return
		}
		b.setTask(t, taskCompleted, 100, fmt.Sprintf("NVM %s written to %s; it becomes active at the next reset.", t.Image, port))
	case item == itemBIOS:
		// System firmware is written by the BMC and takes effect in the
		// POST that follows: Immediate resets the server now, OnReset came
		// here from a reset the user asked for.
		stop := b.progress(t, timescale.Seconds(60))
		err := b.cfg.Scale.Sleep(ctx, timescale.Seconds(60))
		stop()
		if err == nil && t.ApplyTime == "Immediate" {
			err = b.host.Reset()
		}
		if err != nil {
			b.setTask(t, taskException, t.Percent, "BIOS update failed: "+err.Error())
			return
		}
		b.mu.Lock()
		b.bios = strings.TrimPrefix(t.Image, "bios-")
		b.mu.Unlock()
		b.setTask(t, taskCompleted, 100, "BIOS updated to "+strings.TrimPrefix(t.Image, "bios-")+".")
	case item == itemBMC:
		// The BMC reboots into its new firmware: unreachable meanwhile.
		down := b.cfg.Scale.Real(timescale.Seconds(b.cfg.BMCUpdateSeconds))
		b.setTask(t, taskRunning, 50, "The BMC is rebooting into "+t.Image+".")
		b.reboot(down)
		time.Sleep(down)
		b.mu.Lock()
		b.bmcFW = strings.TrimPrefix(t.Image, "bmc-")
		b.mu.Unlock()
		b.setTask(t, taskCompleted, 100, "BMC firmware updated to "+strings.TrimPrefix(t.Image, "bmc-")+".")
	}
}

// progress moves PercentComplete along a modelled duration until stopped.
func (b *BMC) progress(t *task, modelled time.Duration) (stop func()) {
	real := b.cfg.Scale.Real(modelled)
	done := make(chan struct{})
	go func() {
		begin := time.Now()
		tick := time.NewTicker(max(real/20, 10*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				pct := 99
				if real > 0 {
					pct = min(99, int(100*time.Since(begin)/real))
				}
				b.mu.Lock()
				if t.State == taskRunning {
					t.Percent = pct
				}
				b.mu.Unlock()
			}
		}
	}()
	return func() { close(done) }
}

func (b *BMC) taskBody(t *task) map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	body := map[string]any{
		"@odata.id": tasksPath + t.ID, "@odata.type": "#Task.v1_7_3.Task",
		"Id": t.ID, "Name": "Update " + t.items(), "TaskState": t.State, "PercentComplete": t.Percent,
		"TaskMonitor": taskMonitorPath + t.ID,
		"StartTime":   t.Start.UTC().Format(time.RFC3339),
		"Messages":    []any{map[string]string{"MessageId": "Update.1.0.UpdateInProgress", "Message": t.Message}},
		"TaskStatus":  "OK",
	}
	if t.State == taskException {
		body["TaskStatus"] = "Critical"
	}
	if !t.End.IsZero() {
		body["EndTime"] = t.End.UTC().Format(time.RFC3339)
	}
	return body
}

func (b *BMC) lookupTask(w http.ResponseWriter, r *http.Request) (*task, bool) {
	b.mu.Lock()
	t, ok := b.tasks[r.PathValue("task")]
	b.mu.Unlock()
	if !ok {
		notFound(w, r)
	}
	return t, ok
}

func (b *BMC) getTask(w http.ResponseWriter, r *http.Request) {
	if t, ok := b.lookupTask(w, r); ok {
		writeJSON(w, http.StatusOK, b.taskBody(t))
	}
}

// getTaskMonitor answers 202 while the task runs and 200 once it ended.
func (b *BMC) getTaskMonitor(w http.ResponseWriter, r *http.Request) {
	t, ok := b.lookupTask(w, r)
	if !ok {
		return
	}
	body := b.taskBody(t)
	if s := body["TaskState"]; s == taskCompleted || s == taskException {
		writeJSON(w, http.StatusOK, body)
		return
	}
	w.Header().Set("Location", taskMonitorPath+t.ID)
	w.Header().Set("Retry-After", retryAfter)
	writeJSON(w, http.StatusAccepted, body)
}

func (b *BMC) getTaskService(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": "/redfish/v1/TaskService", "@odata.type": "#TaskService.v1_2_1.TaskService",
		"Id": "TaskService", "Name": "Task Service", "ServiceEnabled": true,
		"Tasks": odataID(strings.TrimSuffix(tasksPath, "/")),
	})
}

func (b *BMC) getTasks(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	var members []string
	for id := range b.tasks {
		members = append(members, tasksPath+id)
	}
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, collection(strings.TrimSuffix(tasksPath, "/"), "#TaskCollection.TaskCollection", "Tasks", members...))
}
