package bmc

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An SSE client of the EventService sees the host's power changes,
// whoever made them (here the lab itself, as a PDU would), and an update
// task's start and end, each a Redfish Event from the ResourceEvent and
// TaskEvent registries.
func TestEventServiceStreamsPowerAndTaskEvents(t *testing.T) {
	f := newFixture(t, 0.01)
	_, svc := f.do(t, "GET", eventServicePath, nil)
	uri, _ := svc["ServerSentEventUri"].(string)
	if uri == "" || svc["ServiceEnabled"] != true {
		t.Fatalf("EventService: %v", svc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.bmc.Endpoint()+uri, nil)
	req.SetBasicAuth("admin", "upgradelab-bmc")
	resp, err := f.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("SSE: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	type message struct {
		MessageID         string   `json:"MessageId"`
		MessageArgs       []string `json:"MessageArgs"`
		OriginOfCondition struct {
			ID string `json:"@odata.id"`
		} `json:"OriginOfCondition"`
	}
	messages := make(chan message, 32)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				OdataType string    `json:"@odata.type"`
				Events    []message `json:"Events"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.OdataType != "#Event.v1_7_0.Event" {
				t.Errorf("SSE data %q: %v", data, err)
				continue
			}
			for _, m := range ev.Events {
				messages <- m
			}
		}
	}()
	var seen []string
	wait := func(id, arg string) message {
		t.Helper()
		for {
			select {
			case m := <-messages:
				seen = append(seen, m.MessageID+" "+strings.Join(m.MessageArgs, " "))
				if m.MessageID == id && (arg == "" || strings.Contains(strings.Join(m.MessageArgs, " "), arg)) {
					return m
				}
			case <-ctx.Done():
				t.Fatalf("no %s %s event", id, arg)
			}
		}
	}
	if err := f.host.PowerOn(); err != nil { // not through the BMC
		t.Fatal(err)
	}
	if m := wait("ResourceEvent.1.0.ResourceChanged", "On"); m.OriginOfCondition.ID != f.bmc.systemPath() {
		t.Fatalf("power event origin: %v", m.OriginOfCondition)
	}
	_, accepted := f.do(t, "POST", updatePath+"/Actions/UpdateService.SimpleUpdate", map[string]any{"ImageURI": "http://firmware.lab/bios-2.21.0"})
	id, _ := accepted["Id"].(string)
	wait("TaskEvent.1.0.TaskStarted", id)
	if m := wait("TaskEvent.1.0.TaskCompletedOK", id); m.OriginOfCondition.ID != tasksPath+id {
		t.Fatalf("task event origin: %v", m.OriginOfCondition)
	}
	// The BIOS update reset the host on the way: off, then on again.
	if !strings.Contains(strings.Join(seen, "\n"), "ResourceEvent.1.0.ResourceChanged PowerState Off") {
		t.Fatalf("no power-off event from the BIOS update's reset: %v", seen)
	}
}
