package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/internal/jsonhttp"
	"github.com/upgradelab/upgradelab/sim/vm/qemu"
)

// Guest is a VM guest's agent API, reached through QEMU's forwarded port.
type Guest struct {
	// URL is the API's base URL on the host's loopback.
	URL    string
	client *http.Client
}

// NewGuest is the API at url.
func NewGuest(url string) *Guest { return &Guest{URL: url, client: &http.Client{}} }

// Machine is one VM and its guest's agent API.
type Machine struct {
	Spec qemu.VMSpec
	hv   *qemu.Hypervisor
	*Guest
	// BootTimeout bounds one boot, firmware to agent API.
	BootTimeout time.Duration
}

// NewMachine defines the VM.
func NewMachine(hv *qemu.Hypervisor, spec qemu.VMSpec) (*Machine, error) {
	if err := hv.Define(spec); err != nil {
		return nil, err
	}
	return &Machine{Spec: spec, hv: hv, Guest: NewGuest(fmt.Sprintf("http://127.0.0.1:%d", spec.AgentPort)),
		BootTimeout: 90 * time.Second}, nil
}

// PowerOn starts the VM (a no-op when it runs).
func (m *Machine) PowerOn() error {
	if on, err := m.hv.Running(m.Spec.Name); err != nil || on {
		return err
	}
	return m.hv.Start(m.Spec.Name)
}

// PowerCut cuts the VM's power at once.
func (m *Machine) PowerCut() error {
	if on, err := m.hv.Running(m.Spec.Name); err != nil || !on {
		return err
	}
	return m.hv.Destroy(m.Spec.Name)
}

// Remove powers the VM off and undefines it.
func (m *Machine) Remove() error { return m.hv.Undefine(m.Spec.Name) }

// Status asks the guest's agent, giving up after timeout. QEMU's user
// network accepts the host side of a forwarded connection before the guest
// listens, so a connection alone says nothing: only an answer does.
func (g *Guest) Status(ctx context.Context, timeout time.Duration) (agentv1.Status, error) {
	var st agentv1.Status
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return st, g.call(ctx, http.MethodGet, agentv1.PathStatus, nil, &st)
}

// WaitBoot waits until the guest answers from a boot other than
// previousBootID ("" for any boot), and answers its status. A boot that
// never comes names the console's last lines.
func (m *Machine) WaitBoot(ctx context.Context, previousBootID string) (agentv1.Status, error) {
	deadline := time.Now().Add(m.BootTimeout)
	for {
		st, err := m.Status(ctx, 500*time.Millisecond)
		if err == nil && st.OS != nil && st.OS.BootID != previousBootID {
			return st, nil
		}
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("vm %s: no boot within %s (last answer: %s); console:\n%s", m.Spec.Name, m.BootTimeout, fmt.Sprint(err), qemu.ConsoleTail(m.Spec, 15))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Call posts body (nil: none) to the agent and decodes its answer into out.
func (g *Guest) Call(ctx context.Context, path string, body, out any) error {
	return g.call(ctx, http.MethodPost, path, body, out)
}

// ErrAgent is an error the agent answered with.
var ErrAgent = errors.New("agent refused")

// AgentError is the agent's answer to a refused call.
type AgentError struct {
	Status  int
	Message string
}

func (e *AgentError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }
func (e *AgentError) Unwrap() error { return ErrAgent }

func (g *Guest) call(ctx context.Context, method, path string, body, out any) error {
	req, err := jsonhttp.NewRequest(ctx, method, g.URL+path, body)
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e agentv1.Error
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("%s %s: %w", method, path, &AgentError{Status: resp.StatusCode, Message: e.Error})
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
