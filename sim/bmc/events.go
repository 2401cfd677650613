package bmc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// The EventService: what happens to the host (power, the BMC's own acts)
// and to update tasks, pushed to clients over Server-Sent Events
// (ServerSentEventUri), each a Redfish Event with messages from the
// ResourceEvent and TaskEvent registries. The power events come from the
// host model's own events, so a power change anyone made (a provider, a
// fault, virsh) is seen, as a real BMC sees its host's.

const (
	eventServicePath = "/redfish/v1/EventService"
	ssePath          = eventServicePath + "/SSE"
)

// eventRecord is one message of an Event.
type eventRecord struct {
	MessageID, Message string
	Args               []string
	Severity           string
	Origin             string
}

func (b *BMC) getEventService(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": eventServicePath, "@odata.type": "#EventService.v1_10_0.EventService",
		"Id": "EventService", "Name": "Event Service", "ServiceEnabled": true,
		"ServerSentEventUri": ssePath, "RegistryPrefixes": []string{"ResourceEvent", "TaskEvent"},
		"ResourceTypes": []string{"ComputerSystem", "Task"}, "EventFormatTypes": []string{"Event"},
		"Status": map[string]string{"State": "Enabled", "Health": "OK"},
	})
}

// emit hands an event to every SSE client.
func (b *BMC) emitEvent(r eventRecord) { b.events.Emit(r) }

// forwardHostEvents turns the host's power and BMC events into Redfish
// events, until the subscription (taken by Start, ended by Close) ends.
func (b *BMC) forwardHostEvents(events <-chan lab.Event) {
	for e := range events {
		switch {
		case e.Kind == lab.EventPower && (e.Reason == "DomainStarted" || e.Reason == "DomainStopped"):
			state := "On"
			if e.Reason == "DomainStopped" {
				state = "Off"
			}
			b.emitEvent(eventRecord{MessageID: "ResourceEvent.1.0.ResourceChanged", Severity: "OK", Origin: b.systemPath(),
				Message: fmt.Sprintf("The PowerState of %s changed to %s.", b.host.Name(), state), Args: []string{"PowerState", state}})
		case e.Kind == lab.EventPower && e.Reason == "PowerSupplyFailed":
			b.emitEvent(eventRecord{MessageID: "ResourceEvent.1.0.ResourceStatusChangedCritical", Severity: "Critical", Origin: b.systemPath(),
				Message: "The health of " + b.host.Name() + " changed to Critical: " + e.Message, Args: []string{b.host.Name()}})
		}
	}
}

// taskEvent is the TaskEvent message for a task's new state.
func (b *BMC) taskEvent(t *task, state string) {
	id := map[string]string{
		taskRunning:   "TaskEvent.1.0.TaskStarted",
		taskCompleted: "TaskEvent.1.0.TaskCompletedOK",
		taskException: "TaskEvent.1.0.TaskAborted",
	}[state]
	if id == "" {
		return
	}
	severity := "OK"
	if state == taskException {
		severity = "Critical"
	}
	b.emitEvent(eventRecord{MessageID: id, Severity: severity, Origin: tasksPath + t.ID, Args: []string{t.ID},
		Message: fmt.Sprintf("The task with Id '%s' is %s.", t.ID, state)})
}

// getSSE streams events until the client goes or the BMC closes.
func (b *BMC) getSSE(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, msgGeneralError, "streaming is not supported on this connection", "")
		return
	}
	events, cancel := b.events.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case rec, ok := <-events:
			if !ok {
				return
			}
			b.mu.Lock()
			b.nextEventID++
			id := strconv.Itoa(b.nextEventID)
			b.mu.Unlock()
			body, _ := json.Marshal(map[string]any{
				"@odata.type": "#Event.v1_7_0.Event", "Id": id, "Name": "Redfish Event",
				"Events": []any{map[string]any{
					"EventId": id, "EventTimestamp": time.Now().UTC().Format(time.RFC3339Nano), "MemberId": "0",
					"MessageId": rec.MessageID, "Message": rec.Message, "MessageArgs": rec.Args,
					"MessageSeverity": rec.Severity, "OriginOfCondition": odataID(rec.Origin),
				}},
			})
			fmt.Fprintf(w, "id: %s\ndata: %s\n\n", id, body)
			flusher.Flush()
		}
	}
}
