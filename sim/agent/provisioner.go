package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/sim/ipa"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// How a host finds the provisioner that drives it. Two ways, as on real
// fleets:
//
//   - Metal3/Ironic style: the provisioner boots the host from a deploy
//     ramdisk whose media URL carries agentv1.DeployCallbackParam (Ironic puts
//     ipa-api-url on the kernel command line). The ramdisk heartbeats its
//     hardware identity and its API URL there until the boot ends; the
//     provisioner then writes the disk through that API.
//   - Elemental style: a host of a registration pool runs recovery media
//     built with the pool's registration URL. Whenever it boots into
//     recovery it registers its identity and API URL there, and waits to
//     be installed through its API. Its machine ID lives on the persistent
//     partition, so a reset (which wipes it) makes it register anew under a
//     new identity.

// MachineIDFile is the persistent-partition file holding the identity a
// registering host reports.
const MachineIDFile = "machine-id"

// Provisioner is how the agent reaches its provisioner; zero means it
// reaches none (a deploy ramdisk without a callback only runs).
type Provisioner struct {
	// Client makes the calls; it must trust the provisioner's certificate.
	Client *http.Client
	// RegistrationURL is baked into this host's recovery media when the
	// host belongs to a registration pool.
	RegistrationURL string
	// Interval is the modelled time between heartbeats or registration
	// retries (Ironic's default heartbeat is 300 s; shorter keeps a
	// restarted provisioner from waiting long).
	Interval time.Duration
}

// minInterval keeps a zero time scale from spinning.
const minInterval = 50 * time.Millisecond

// SetProvisioner configures how the agent reaches its provisioner; call it
// before Run.
func (a *Agent) SetProvisioner(p Provisioner) {
	if p.Client == nil {
		p.Client = http.DefaultClient
	}
	if p.Interval == 0 {
		p.Interval = 10 * time.Second
	}
	a.mu.Lock()
	a.prov = p
	a.mu.Unlock()
}

func (a *Agent) provisioner() (Provisioner, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prov, a.apiURL
}

// announce repeats post every interval while boot is the current boot,
// until it succeeds once when once is set.
func (a *Agent) announce(ctx context.Context, boot int, once bool, post func(context.Context) error) {
	p, _ := a.provisioner()
	failures := 0
	for a.current(boot) && ctx.Err() == nil {
		err := post(ctx)
		if err == nil && once {
			return
		}
		if err != nil {
			failures++
			if failures == 1 || failures%20 == 0 {
				a.record("ProvisionerUnreachable", err.Error())
			}
		}
		wait := max(a.scale.Real(p.Interval), minInterval)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// deployRamdisk runs Ironic's agent when the kernel command line names
// Ironic (sim/ipa), and otherwise heartbeats to the provisioner named on
// the media URL.
func (a *Agent) deployRamdisk(ctx context.Context, boot int, running *lab.RunningOS) {
	if p, ok := ipa.ParseKernelArgs(running.KernelArgs); ok {
		what := "Ironic's agent, for " + p.APIURL
		if p.APIURL == "" {
			what = "Ironic's agent, inspecting for " + p.InspectionURL
		}
		a.record("DeployRamdiskRunning", what)
		ipa.Run(ctx, a.host, p, a.record, func() bool { return a.current(boot) })
		return
	}
	u, err := url.Parse(running.Media)
	if err != nil {
		return
	}
	callback := u.Query().Get(agentv1.DeployCallbackParam)
	if callback == "" {
		a.record("NoProvisioner", "deploy ramdisk booted without "+agentv1.DeployCallbackParam+": nothing will drive it")
		return
	}
	a.record("DeployRamdiskRunning", "heartbeating to "+callback)
	a.announce(ctx, boot, false, func(ctx context.Context) error {
		_, apiURL := a.provisioner()
		return a.post(ctx, callback+agentv1.PathHeartbeat, agentv1.Heartbeat{Hostname: a.host.Name(), MACs: a.macs(), AgentURL: apiURL, Image: running.Image.Name})
	})
}

// register announces a recovery OS of a registration pool.
func (a *Agent) register(ctx context.Context, boot int, running *lab.RunningOS) {
	p, apiURL := a.provisioner()
	if p.RegistrationURL == "" {
		return
	}
	id := a.host.Persistent()[MachineIDFile]
	if id == "" {
		b := make([]byte, 8)
		rand.Read(b)
		id = hex.EncodeToString(b)
		if err := a.host.SetPersistent(MachineIDFile, id); err != nil {
			a.record("RegistrationFailed", err.Error())
			return
		}
	}
	reg := agentv1.Registration{MachineID: id, Hostname: a.host.Name(), MACs: a.macs(), AgentURL: apiURL, Image: running.Image.Name}
	a.announce(ctx, boot, true, func(ctx context.Context) error {
		if err := a.post(ctx, p.RegistrationURL, reg); err != nil {
			return err
		}
		a.record("Registered", "registered as machine "+id+" at "+p.RegistrationURL)
		return nil
	})
}

func (a *Agent) macs() []string {
	var out []string
	for _, p := range a.host.Status().Ports {
		out = append(out, p.MAC)
	}
	return out
}

func (a *Agent) post(ctx context.Context, to string, body any) error {
	p, _ := a.provisioner()
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", to, resp.Status)
	}
	return nil
}

// isDeployRamdisk tells a deploy ramdisk booted from virtual media or
// the network.
func isDeployRamdisk(running *lab.RunningOS) bool {
	return running.DeployRamdisk()
}
