package bmc

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/sim/timescale"
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
	Item, Image        string
	ApplyTime          string
}

func (b *BMC) getUpdateService(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": updatePath, "@odata.type": "#UpdateService.v1_14_0.UpdateService",
		"Id": "UpdateService", "Name": "Update Service", "ServiceEnabled": true,
		"FirmwareInventory": odataID(strings.TrimSuffix(inventory, "/")),
		"Actions": map[string]any{
			"#UpdateService.SimpleUpdate": map[string]any{
				"target": updatePath + "/Actions/UpdateService.SimpleUpdate",
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

// postSimpleUpdate validates an update and answers 202 with a task
// monitor. Immediate updates start at once; OnReset ones wait, Pending,
// for the next reset of the system.
func (b *BMC) postSimpleUpdate(w http.ResponseWriter, r *http.Request) {
	var p simpleUpdate
	if !decode(w, r, &p) {
		return
	}
	if p.ImageURI == "" {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The action UpdateService.SimpleUpdate requires the parameter ImageURI to be present in the request body.", "ImageURI")
		return
	}
	u, err := url.Parse(p.ImageURI)
	if err != nil || u.Path == "" {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+p.ImageURI+" for the parameter ImageURI is not a URI.", "ImageURI")
		return
	}
	if len(p.Targets) != 1 {
		writeError(w, http.StatusBadRequest, msgActionParamMissing, "The action UpdateService.SimpleUpdate needs exactly one entry in Targets (a FirmwareInventory member).", "Targets")
		return
	}
	item := strings.TrimPrefix(strings.TrimSuffix(p.Targets[0], "/"), inventory)
	if _, versions := b.items(); versions[item] == "" || item == p.Targets[0] {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+p.Targets[0]+" for the parameter Targets is not a FirmwareInventory member.", "Targets")
		return
	}
	applyTime := p.ApplyTime
	if applyTime == "" {
		applyTime = "Immediate"
	}
	if applyTime != "Immediate" && applyTime != "OnReset" {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, "The value "+applyTime+" for @Redfish.OperationApplyTime is not supported (Immediate, OnReset).", "@Redfish.OperationApplyTime")
		return
	}
	imageName := path.Base(u.Path)
	if msg := b.checkImage(item, imageName); msg != "" {
		writeError(w, http.StatusBadRequest, msgPropertyValueNotIn, msg, "ImageURI")
		return
	}
	b.mu.Lock()
	b.nextID++
	t := &task{ID: strconv.Itoa(b.nextID), State: taskNew, Item: item, Image: imageName, ApplyTime: applyTime, Start: time.Now()}
	b.tasks[t.ID] = t
	if applyTime == "OnReset" {
		t.State, t.Message = taskPending, "Waiting for the next reset of the system."
		b.staged = append(b.staged, t)
	}
	b.mu.Unlock()
	if applyTime == "Immediate" {
		go b.run(t)
	}
	w.Header().Set("Location", "/redfish/v1/TaskService/TaskMonitors/"+t.ID)
	writeJSON(w, http.StatusAccepted, b.taskBody(t))
}

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
	t.State, t.Percent, t.Message = state, percent, msg
	if state == taskCompleted || state == taskException {
		t.End = time.Now()
	}
	b.mu.Unlock()
}

// run performs one update, reporting progress on its task.
func (b *BMC) run(t *task) {
	ctx := context.Background()
	b.setTask(t, taskRunning, 0, "Applying "+t.Image+" to "+t.Item+".")
	switch {
	case strings.HasPrefix(t.Item, itemNICPrefix):
		port := strings.TrimPrefix(t.Item, itemNICPrefix)
		img := b.cfg.NVMImages[t.Image]
		stop := b.progress(t, timescale.Seconds(img.FlashSeconds))
		err := b.host.FlashNVM(ctx, port, t.Image)
		stop()
		if err != nil {
			b.setTask(t, taskException, t.Percent, "NVM update of "+port+" failed: "+err.Error())
			return
		}
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
	case t.Item == itemBIOS:
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
	case t.Item == itemBMC:
		// The BMC reboots into its new firmware: unreachable meanwhile.
		down := b.cfg.Scale.Real(timescale.Seconds(b.cfg.BMCUpdateSeconds))
		b.setTask(t, taskRunning, 50, "The BMC is rebooting into "+t.Image+".")
		b.Unreachable(down)
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
		"Id": t.ID, "Name": "Update " + t.Item, "TaskState": t.State, "PercentComplete": t.Percent,
		"TaskMonitor": "/redfish/v1/TaskService/TaskMonitors/" + t.ID,
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
	w.Header().Set("Location", "/redfish/v1/TaskService/TaskMonitors/"+t.ID)
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
