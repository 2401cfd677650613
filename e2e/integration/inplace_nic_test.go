package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// hostHistory records a host's lab events from now on.
type hostHistory struct {
	mu     sync.Mutex
	events []lab.Event
}

func recordHost(t *testing.T, l *lab.Lab, host string) *hostHistory {
	events, cancel := l.Subscribe()
	t.Cleanup(cancel)
	h := &hostHistory{}
	go func() {
		for e := range events {
			if e.Host == host {
				h.mu.Lock()
				h.events = append(h.events, e)
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// first is the index of the first event with reason whose data holds
// key=value, or -1.
func (h *hostHistory) first(reason, key, value string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, e := range h.events {
		if e.Reason == reason && e.Data[key] == value {
			return i
		}
	}
	return -1
}

func (h *hostHistory) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, e := range h.events {
		fmt.Fprintf(&b, "\n  %s %s %s %v", e.Time.Format("15:04:05.000"), e.Kind, e.Reason, e.Data)
	}
	return b.String()
}

// nvmOf is the firmware every port of a host runs ("" when they differ).
func nvmOf(h *lab.Host) string {
	var fw string
	for i, p := range h.Status().Ports {
		if i > 0 && p.Active.Firmware != fw {
			return ""
		}
		fw = p.Active.Firmware
	}
	return fw
}

// NIC firmware changes in place, on a worker of a three-node lab: alone;
// with an image whose driver asks for it, flashed first so no driver
// ever runs an NVM it warns about; and refused, with nothing touched,
// when the new driver needs an NVM API major the running one stops on.
func TestInPlaceNICFirmwareKeepsTheLinkUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, envOptions{lab: "three-node", scale: 0.01, extension: true, extensionArgs: []string{"--health-grace=2s"}})
	if _, err := reference.Enroll(ctx, e.c, e.site, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	workerVars := func(image, suffix, nvm string) map[string]string {
		v := e.clusterVars(t, ctx, "nic", "v1.35.3", image, suffix, 1, 1, 1, false)
		v["MD_MAX_SURGE"], v["MD_MAX_UNAVAILABLE"] = "0", "1"
		if nvm != "" {
			e.withNICFirmware(v, nvm)
		}
		return v
	}
	vars := workerVars("ubuntu-24.04-k8s-v1.35.3", "base", "")
	e.apply(t, ctx, "machine-templates.yaml", vars)
	e.apply(t, ctx, "cluster.yaml", vars)
	e.waitRolledOut(t, ctx, "nic", 1, 1, "v1.35.3")
	var worker string
	var id machineIdentity
	for name, m := range e.machineIdentities(t, ctx, "nic") {
		if strings.HasPrefix(name, "nic-md-") {
			worker, id = name, m
		}
	}
	host, _ := e.site.Lab.Host(id.host)
	if got := nvmOf(host); got != "9.20" {
		t.Fatalf("host %s runs NVM %q before the test; the lab gives 9.20", id.host, got)
	}
	sameMachine := func(step string) {
		t.Helper()
		if after := e.machineIdentities(t, ctx, "nic")[worker]; after != id {
			t.Fatalf("%s: machine %s is now %+v, was %+v; want it updated in place", step, worker, after, id)
		}
	}

	// The NVM alone: flashed through the BMC, the image stays in slot A.
	history := recordHost(t, e.site.Lab, id.host)
	e.upgradeWorkers(t, ctx, "nic", workerVars("ubuntu-24.04-k8s-v1.35.3", "nvm870", "x710-nvm-8.70"))
	waitFor(t, ctx, "NVM 8.70 on every port of "+id.host, func() (bool, string) {
		got := nvmOf(host)
		return got == "8.70", "NVM " + got
	})
	e.waitRolledOut(t, ctx, "nic", 1, 1, "v1.35.3")
	sameMachine("NVM only")
	if st := host.Status(); st.OS.Root != disk.SlotA || history.first("WriteStarted", "", "") >= 0 {
		t.Fatalf("an NVM-only update wrote an image: root %s, events %s", st.OS.Root, history)
	}

	// The driver of i40e 2.28 warns on 8.70 (API 1.12 < its minimum
	// 1.15), the running 2.25 driver runs 9.20 cleanly: NVM first.
	history = recordHost(t, e.site.Lab, id.host)
	e.upgradeWorkers(t, ctx, "nic", workerVars("ubuntu-24.04-k8s-v1.35.3-i40e-2.28", "i40e228", "x710-nvm-9.20"))
	waitFor(t, ctx, "the new image committed on "+id.host, func() (bool, string) {
		st := host.Status()
		ok := st.OS != nil && st.OS.Image.Name == "ubuntu-24.04-k8s-v1.35.3-i40e-2.28" && st.Disk.Images().Booted != nil && st.Disk.Images().Booted.Committed
		return ok, fmt.Sprintf("%+v", st.OS)
	})
	e.waitRolledOut(t, ctx, "nic", 1, 1, "v1.35.3")
	sameMachine("NVM first")
	flashed, written := history.first("FlashFinished", "nvm", "x710-nvm-9.20"), history.first("WriteStarted", "image", "ubuntu-24.04-k8s-v1.35.3-i40e-2.28")
	if flashed < 0 || written < 0 || flashed > written || nvmOf(host) != "9.20" {
		t.Fatalf("want the NVM 9.20 flashed before the image was written (flash at %d, write at %d, NVM now %q); events: %s", flashed, written, nvmOf(host), history)
	}
	for _, l := range host.Status().OS.Links {
		if !l.Up || l.Level != "" {
			t.Fatalf("port %s after the update: %+v; want up with no driver warning", l.Port, l)
		}
	}

	// A preview driver on NVM API 2.0: the running driver stops on the
	// new NVM, the new driver on the old one. CanUpdateMachineSet answers
	// no patch, so the MachineDeployment does what CAPI defines and rolls
	// the worker out (deletes it, a new Machine replaces it) instead of
	// updating it in place; the NIC is never flashed.
	history = recordHost(t, e.site.Lab, id.host)
	e.upgradeWorkers(t, ctx, "nic", workerVars("ubuntu-24.04-k8s-v1.36.3-i40e-3.0-preview", "preview", "x710-nvm-10.0-next"))
	e.waitRolledOutNotUpdated(t, ctx, worker)
	if history.first("FlashStarted", "port", host.Status().Ports[0].Name) >= 0 {
		t.Fatalf("a refused NVM change was flashed: events %s", history)
	}
}

// waitRolledOutNotUpdated waits for the MachineDeployment to delete worker
// (rolled out, a new Machine replaces it) and fails if an in-place update
// was started on it meanwhile.
func (e *providerEnv) waitRolledOutNotUpdated(t *testing.T, ctx context.Context, worker string) {
	t.Helper()
	waitFor(t, ctx, "worker "+worker+" rolled out by the MachineDeployment", func() (bool, string) {
		m := &clusterv1.Machine{}
		err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: worker}, m)
		if apierrors.IsNotFound(err) {
			return true, "gone"
		}
		if err != nil {
			return false, err.Error()
		}
		_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
		if updating {
			t.Fatalf("the refused change was started in place on %s", worker)
		}
		return !m.DeletionTimestamp.IsZero(), "deleting=" + fmt.Sprint(!m.DeletionTimestamp.IsZero())
	})
}
