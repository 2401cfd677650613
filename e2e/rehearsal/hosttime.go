package rehearsal

import (
	"slices"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Split is one cluster's upgrade in one run, its wall time split by
// whose clock ran it.
type Split struct {
	// Wall is the upgrade's wall time, from the upgrade step to done.
	Wall time.Duration
	// Host is the part of Wall in which one of the cluster's hosts at
	// least was in a modelled step: firmware POST and boot (from power
	// on until an OS or the deploy ramdisk runs), an image write, a
	// shutdown, an NVM flash, kubeadm's init or join, a kubelet's wait
	// before it tries again. The lab runs these at the time scale.
	Host time.Duration
	// Finished: the timeline reached done. An upgrade that did not
	// counts until its last entry, and has no duration to predict.
	Finished bool
}

// Controller is the rest of Wall: the managers' own waits and work
// (CAPI's requeues, drains, the provider's and Ironic's calls), which
// run in real time whatever the scale.
func (s Split) Controller() time.Duration { return s.Wall - s.Host }

// Lab is the upgrade's duration as the site would see it: the host
// steps at their modelled length (Host / scale), the controllers' time
// as it was.
func (s Split) Lab(scale float64) time.Duration { return s.Controller() + unscaled(s.Host, scale) }

// unscaled is a modelled span's length in the lab's time: the wall time
// it took over the scale it ran at (no scale: as it took).
func unscaled(wall time.Duration, scale float64) time.Duration {
	if scale <= 0 {
		return wall
	}
	return time.Duration(float64(wall) / scale)
}

// The lab's events that begin and end a modelled step (sim/lab's and
// sim/agent's reasons); a power-on begins a boot, which ends with the OS
// (or the deploy ramdisk) running, and a power-off ends every step of
// its host.
var (
	stepBegins = map[string]string{"WriteStarted": "write", vocab.LabOSShuttingDown: "shutdown", "FlashStarted": "flash",
		"Kubeadm": "kubeadm", "KubeletFailed": "kubelet"}
	stepEnds = map[string][]string{
		"write":    {"WriteFinished", "WriteRefused", "WriteInterrupted"},
		"shutdown": {vocab.LabOSShutdown},
		"flash":    {"FlashFinished"},
		"boot":     {vocab.LabOSRunning, "NoBootDevice", "FirmwareSetup"},
		"kubeadm":  {"InstallCommitted", "KubeadmFailed"},
		"kubelet":  {"KubeletRunning", "KubeletFailed"},
	}
)

type interval struct{ from, to time.Time }

// SplitUpgrade splits the upgrade the timeline records (the upgrade step
// to done, or to its last entry when it never got there).
func SplitUpgrade(entries []timeline.Entry) (Split, bool) {
	var from, to time.Time
	for _, e := range entries {
		if e.Kind != timeline.KindStep {
			continue
		}
		switch e.Name {
		case check.StepUpgrade:
			from = e.Time
		case check.StepDone:
			to = e.Time
		}
	}
	if from.IsZero() {
		return Split{}, false
	}
	finished := !to.IsZero()
	if !finished {
		to = entries[len(entries)-1].Time
	}
	return Split{Wall: to.Sub(from), Host: covered(hostSteps(entries, to), from, to), Finished: finished}, true
}

// hostSteps are the modelled steps of every host in the timeline; a step
// still under way at end lasts until end.
func hostSteps(entries []timeline.Entry, end time.Time) []interval {
	open := map[string]time.Time{} // host/step -> begun
	var out []interval
	closeStep := func(key string, at time.Time) {
		if begun, ok := open[key]; ok {
			out = append(out, interval{begun, at})
			delete(open, key)
		}
	}
	for _, e := range entries {
		if e.Kind != timeline.KindLab {
			continue
		}
		reason := e.New[vocab.FieldReason]
		off := e.New[vocab.FieldLabKind] == vocab.LabKindPower && e.New[vocab.FieldPower] == vocab.LabPowerOff
		for step, ends := range stepEnds {
			if off || slices.Contains(ends, reason) {
				closeStep(e.Name+"/"+step, e.Time)
			}
		}
		if step, ok := stepBegins[reason]; ok {
			open[e.Name+"/"+step] = e.Time
		}
		if e.New[vocab.FieldLabKind] == vocab.LabKindPower && e.New[vocab.FieldPower] == "On" {
			open[e.Name+"/boot"] = e.Time
		}
	}
	for _, begun := range open {
		out = append(out, interval{begun, end})
	}
	return out
}

// covered is how much of [from, to] the intervals cover together.
func covered(steps []interval, from, to time.Time) time.Duration {
	slices.SortFunc(steps, func(a, b interval) int { return a.from.Compare(b.from) })
	var total time.Duration
	cursor := from
	for _, s := range steps {
		a, b := maxTime(s.from, cursor), minTime(s.to, to)
		if b.After(a) {
			total += b.Sub(a)
			cursor = b
		}
	}
	return total
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
