package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Power in the steady states (available, provisioned) is managed as
// baremetal-operator's manageHostPower does:
//
//   - status.poweredOn follows the BMC first; a change is written before
//     anything is decided on it.
//   - The wanted power is spec.online, off while any reboot annotation
//     (reboot.metal3.io, reboot.metal3.io/KEY) is on the host. On an
//     available host only annotations with "force": true count.
//   - A host found off with the plain reboot.metal3.io annotation gets it
//     removed: that was the reboot, and the next pass powers the host on.
//     A suffixed one keeps the host off until its client removes it.
//   - Powering off is soft (the BMC's GracefulShutdown) unless an
//     annotation asks for {"mode": "hard"} or the last attempt failed; a
//     soft power-off that has not taken the host down within
//     SoftPowerOffTimeout is a PowerManagementError, and the next attempt
//     is hard (Ironic's soft_power_off_timeout, then BMO's fallback).
//
// Hosts that registered themselves have no BMC: their power is only
// reported (from whether their agent answers), as BMO cannot manage a
// host without one either.

// rebootRequest reads the host's reboot annotations: whether one asks for
// the host to be off, and whether any asks for a hard power-off. With
// forcedOnly, only annotations whose value has "force": true count.
func rebootRequest(host *metal3.BareMetalHost, forcedOnly bool) (wanted, hard bool) {
	for key, value := range host.Annotations {
		if key != metal3.RebootAnnotationPrefix && !strings.HasPrefix(key, metal3.RebootAnnotationPrefix+"/") {
			continue
		}
		args := metal3.RebootAnnotationArguments{Mode: metal3.RebootModeSoft}
		if value != "" {
			// A value that is not JSON is a soft reboot, as in BMO (which
			// also publishes an event about it).
			_ = json.Unmarshal([]byte(value), &args)
		}
		if forcedOnly && !args.Force {
			continue
		}
		wanted = true
		hard = hard || args.Mode == metal3.RebootModeHard
	}
	return wanted, hard
}

// managePower is the steady states' power management (see above). It
// also keeps what the BMC reports of a running host up to date: its
// NICs' addresses and its firmware versions.
func (r *Reconciler) managePower(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if registered(host) {
		st, err := r.registeredAgent(host).Status(ctx)
		host.Status.PoweredOn = err == nil && st.Phase != ""
		return ctrl.Result{RequeueAfter: r.steady()}, nil
	}
	bmc, err := r.dialBMC(ctx, host)
	if err != nil {
		return ctrl.Result{}, failed(metal3.PowerManagementError, "%v", err)
	}
	defer bmc.Close()
	if !bmc.PoweredOn() {
		// Off, whatever was booting is gone: a deploy boot asked for
		// before is void, and the next provisioning boots again.
		r.forgetDeployBoot(host)
		r.forgetSoftPowerOff(host)
	}
	if on := bmc.PoweredOn(); on != host.Status.PoweredOn {
		host.Status.PoweredOn = on
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	if _, plain := host.Annotations[metal3.RebootAnnotationPrefix]; plain && !host.Status.PoweredOn {
		patch := client.MergeFrom(host.DeepCopy())
		delete(host.Annotations, metal3.RebootAnnotationPrefix)
		if err := r.Client.Patch(ctx, host, patch); err != nil {
			return ctrl.Result{}, err
		}
		log.FromContext(ctx).Info("rebooted: the host is off, reboot annotation removed")
		return ctrl.Result{Requeue: true}, nil
	}
	provisioned := host.Status.Provisioning.State == metal3.StateProvisioned || host.Status.Provisioning.State == metal3.StateExternallyProvisioned
	reboot, hard := rebootRequest(host, !provisioned)
	want := host.Spec.Online && !reboot
	if host.Status.PoweredOn == want {
		r.forgetSoftPowerOff(host)
		if want && !r.refreshRunningHost(ctx, host, bmc) {
			// Booting, most likely: look again soon for the addresses.
			return ctrl.Result{RequeueAfter: min(r.steady(), 10*r.Poll)}, nil
		}
		return ctrl.Result{RequeueAfter: r.steady()}, nil
	}
	log.FromContext(ctx).Info("power change", "want", onOff(want), "reboot", reboot, "hard", hard)
	if want {
		if err := bmc.PowerOn(); err != nil {
			return ctrl.Result{}, failed(metal3.PowerManagementError, "power on: %v", err)
		}
		host.Status.PoweredOn = true
		return ctrl.Result{RequeueAfter: r.steady()}, nil
	}
	if hard || host.Status.ErrorCount > 0 {
		if err := bmc.PowerOff(); err != nil {
			return ctrl.Result{}, failed(metal3.PowerManagementError, "hard power off: %v", err)
		}
		r.forgetSoftPowerOff(host)
		r.forgetDeployBoot(host)
		host.Status.PoweredOn = false
		return ctrl.Result{RequeueAfter: r.steady()}, nil
	}
	return r.softPowerOff(ctx, host, bmc)
}

// softPowerOff asks the OS to shut down once, then waits for the power
// to go off, up to SoftPowerOffTimeout.
func (r *Reconciler) softPowerOff(ctx context.Context, host *metal3.BareMetalHost, bmc bmcDriver) (ctrl.Result, error) {
	r.mu.Lock()
	asked, pending := r.softOffs[host.UID]
	r.mu.Unlock()
	if !pending {
		if err := bmc.GracefulShutdown(); err != nil {
			return ctrl.Result{}, failed(metal3.PowerManagementError, "soft power off: %v", err)
		}
		r.mu.Lock()
		r.softOffs[host.UID] = time.Now()
		r.mu.Unlock()
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	if time.Since(asked) < r.SoftPowerOffTimeout {
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	r.forgetSoftPowerOff(host)
	return ctrl.Result{}, failed(metal3.PowerManagementError, "soft power off: the host was still on %s after the OS was asked to shut down; powering off hard next", r.SoftPowerOffTimeout)
}

func (r *Reconciler) forgetSoftPowerOff(host *metal3.BareMetalHost) {
	r.mu.Lock()
	delete(r.softOffs, host.UID)
	r.mu.Unlock()
}

// refreshRunningHost keeps status.hardware's NIC addresses (known to the
// BMC only while the OS runs) and the HostFirmwareComponents (changed by
// an in-place NIC flash) true. It says whether every NIC has an address.
// Best effort: a failed read is tried again at the next steady pass.
//
// BMO fills the addresses once, from in-band inspection (the deploy
// ramdisk's DHCP leases). This controller inspects out of band, over
// Redfish, while the host is off, so it takes them from the BMC while
// the installed OS runs instead.
func (r *Reconciler) refreshRunningHost(ctx context.Context, host *metal3.BareMetalHost, bmc bmcDriver) bool {
	hw, err := bmc.Inspect()
	if errors.Is(err, errInBandOnly) {
		// Nothing to learn out of band; in-band inspection took the
		// addresses (the deploy ramdisk's leases, which are the OS's).
		return true
	}
	if err != nil {
		log.FromContext(ctx).Info("refreshing the hardware details", "error", err.Error())
		return true
	}
	complete := true
	if d := host.Status.HardwareDetails; d != nil {
		ips := map[string]string{}
		for _, n := range hw.NICs {
			ips[strings.ToLower(n.MAC)] = n.IP
		}
		for i := range d.NIC {
			if ip := ips[strings.ToLower(d.NIC[i].MAC)]; ip != "" {
				d.NIC[i].IP = ip
			}
			complete = complete && d.NIC[i].IP != ""
		}
	}
	if err := r.writeFirmwareComponents(ctx, host, hw.Firmware); err != nil {
		log.FromContext(ctx).Info("refreshing the firmware components", "error", err.Error())
	}
	return complete
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// detached tells a host whose detached annotation is on and whose state
// may be detached (BMO detaches only steady hosts); deleteDelayed, one
// whose annotation asks that its deletion wait until it is attached again.
func detached(host *metal3.BareMetalHost) (isDetached, deleteDelayed bool) {
	value, ok := host.Annotations[metal3.DetachedAnnotation]
	if !ok {
		return false, false
	}
	switch host.Status.Provisioning.State {
	case metal3.StateProvisioned, metal3.StateExternallyProvisioned, metal3.StateAvailable, metal3.StateReady:
	default:
		return false, false
	}
	args := metal3.DetachedAnnotationArguments{}
	_ = json.Unmarshal([]byte(value), &args) // not JSON: delete at once, as BMO
	return true, args.DeleteAction == metal3.DetachedDeleteActionDelay
}
