package lab

import "fmt"

// Hardware and OS failures that are not a power cut (PowerOff is that):
// what a fault injects to make a host fail as real servers do.

// Hang freezes the running OS, as a kernel panic without a reboot or a
// hung kernel does: the power stays on and the BMC says so, but the
// kubelet, the static pods and the agent stop, nothing on the host
// answers, and a graceful shutdown or restart asked of it is never acted
// on (ErrHung). Work in flight stops where it is. Only a power cycle (a
// BMC's ForceRestart, ForceOff then On) brings the host back; the
// machine's disk is as the hang left it.
func (h *Host) Hang() error {
	if err := h.machine.lacks("Hang"); err != nil {
		return err
	}
	h.mu.Lock()
	if h.phase != PhaseRunning {
		phase := h.phase
		h.mu.Unlock()
		return fmt.Errorf("host %s: hang: the host is %s, not running: %w", h.spec.Name, phase, ErrNotRunning)
	}
	h.cancelCycle()
	h.phase = PhaseHung
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventBoot, EventOSHung, "the OS stopped responding (kernel hang): power stays on, kubelet and agent are frozen", nil)
	return nil
}

// EventOSHung is the boot event Hang announces.
const EventOSHung = "OSHung"

// FailPowerSupply is a power supply that dies for good: the host goes off
// at once (as PowerOff) and every later power-on is refused with
// ErrPowerSupplyFailed, whoever asks (a BMC, the lab). The BMC, on its
// own standby supply, keeps answering and reports the supply's failure.
// Persisted: a lab brought up again on the same state keeps it.
func (h *Host) FailPowerSupply() error {
	h.mu.Lock()
	h.psuFailed = true
	h.saveLocked()
	h.mu.Unlock()
	h.emit(EventPower, "PowerSupplyFailed", "the power supply failed: the host is off and cannot be powered on", nil)
	return h.PowerOff()
}
