package agent

import (
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// The agent's answers are the wire API's types (api/hostagent/v1); the
// host's model keeps its own. These conversions are the one place the
// two meet, so the model can change without the wire moving, and nothing
// of the model's (the NIC rule that decided a link, the lab clock's boot
// time) leaks to a provider.

// WireOS is the running OS as the agent reports it; nil when none runs.
// The uptime is taken at now.
func WireOS(os *lab.RunningOS, now time.Time) *agentv1.RunningOS {
	if os == nil {
		return nil
	}
	out := &agentv1.RunningOS{Source: agentv1.OSSource(os.Source), Root: agentv1.RootID(os.Root), Trial: os.Trial,
		Image: os.Image, Media: os.Media, BootID: os.BootID, UptimeSeconds: now.Sub(os.BootedAt).Seconds()}
	for _, l := range os.Links {
		out.Links = append(out.Links, agentv1.PortLink{Port: l.Port, Firmware: l.Firmware, API: l.API, Up: l.Up,
			Recovery: l.Recovery, Level: l.Level, Message: l.Message})
	}
	return out
}
