package rehearsal

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/upgradelab/upgradelab/sim/bmc"
	"github.com/upgradelab/upgradelab/sim/ipmi"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

// The flaky BMC a plan's flaky-bmc fault makes of every BMC: the error
// rate of the scenario bmc-slow-and-flaky (scenarios/faults), with a
// latency of 2 s rather than its 10 s. Latency is real time, as a slow
// BMC's is, and counts as the managers' time in the prediction.
const (
	flakyLatency   = 2 * time.Second
	flakyErrorRate = 0.2
)

// InWave is what a fault does once the wave begins, on the fleet's site;
// nil for a fault that is a change of the inventory (Site.WithFault) or
// none. hosts are the lab's hosts the wave's clusters hold (not the
// idle ones); say tells what it did.
func InWave(fault string, hosts []string, say func(string)) func(context.Context, *site.Site) {
	switch fault {
	case FaultFlakyBMC:
		return func(_ context.Context, s *site.Site) { degradeBMCs(s, say) }
	case FaultHostDoesNotReturn:
		return func(ctx context.Context, s *site.Site) { killFirstPoweredOff(ctx, s.Lab, hosts, say) }
	}
	return nil
}

// degradeBMCs slows every BMC and makes it fail a share of requests.
func degradeBMCs(s *site.Site, say func(string)) {
	for _, b := range s.BMCs.BMCs {
		b.SetFaults(bmc.Faults{Latency: flakyLatency, ErrorRate: flakyErrorRate})
	}
	for _, b := range s.BMCs.IPMI {
		b.SetFaults(ipmi.Faults{Latency: flakyLatency, DropRate: flakyErrorRate})
	}
	say(fmt.Sprintf("fault %s: every BMC answers after %s, %.0f%% of Redfish requests with 503 and of IPMI datagrams lost", FaultFlakyBMC, flakyLatency, flakyErrorRate*100))
}

// killFirstPoweredOff waits for the first of hosts to power off and
// kills its power supply: nothing, not even its BMC, powers it on again.
func killFirstPoweredOff(ctx context.Context, l *lab.Lab, hosts []string, say func(string)) {
	events, stop := l.Subscribe()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Kind != lab.EventPower || e.Data["power"] != string(lab.PoweredOff) || !slices.Contains(hosts, e.Host) {
				continue
			}
			h, err := l.Host(e.Host)
			if err == nil {
				err = h.FailPowerSupply()
			}
			if err != nil {
				say(fmt.Sprintf("fault %s: host %s: %v", FaultHostDoesNotReturn, e.Host, err))
				return
			}
			say(fmt.Sprintf("fault %s: host %s powered off and its power supply died: it does not come back", FaultHostDoesNotReturn, e.Host))
			return
		}
	}
}
