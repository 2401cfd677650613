package inplace

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// nicOrder is when the NIC's NVM is flashed relative to the new OS image.
type nicOrder string

const (
	// nicUnchanged: every port already runs the wanted NVM.
	nicUnchanged nicOrder = "unchanged"
	// nicOnly: the image stays, only the NVM changes.
	nicOnly nicOrder = "nvm-only"
	// nicFirst: flash, boot the old image on the new NVM, then the image.
	nicFirst nicOrder = "nvm-first"
	// nicAfter: the image first (its driver on the old NVM), then flash.
	nicAfter nicOrder = "nvm-after-image"
)

// nicPlan is the order and why.
type nicPlan struct {
	order  nicOrder
	reason string
}

// driverLink says whether an i40e driver brings a port up on an NVM and
// the warning it logs, as Intel documents the driver: an NVM whose
// admin-queue API major differs from the driver's stops it; a newer
// minor, or one older than the driver's minimum, runs with a warning.
// The extension carries this knowledge itself (it is not the lab's rule
// file), so a disagreement with the lab shows as a failed update.
func driverLink(d imagev1.Driver, nvm imagev1.APIVersion) (up bool, note string) {
	switch {
	case nvm.Major > d.API.Major:
		return false, fmt.Sprintf("driver %s (API %s) stops on NVM API %s: major newer", d.Version, d.API, nvm)
	case nvm.Major < d.API.Major:
		return false, fmt.Sprintf("driver %s (API %s) stops on NVM API %s: major older", d.Version, d.API, nvm)
	case nvm.Minor > d.API.Minor:
		return true, fmt.Sprintf("driver %s (API %s) warns on NVM API %s: newer than it knows", d.Version, d.API, nvm)
	case nvm.Minor < d.MinAPIMinor:
		return true, fmt.Sprintf("driver %s (API %s) warns on NVM API %s: below its minimum %d.%d", d.Version, d.API, nvm, d.API.Major, d.MinAPIMinor)
	}
	return true, ""
}

// planNIC orders an NVM change around an image change so the NIC never
// runs on a pairing its driver stops on: between the two steps either the
// old driver runs the new NVM (NVM first) or the new driver the old NVM
// (image first). Of two working orders the one without a driver warning
// wins, image first on a tie (a failing image then falls back with the
// NVM untouched). When neither order keeps the port up, or the new
// driver does not run the new NVM at all, the update is refused before
// anything is touched.
func planNIC(oldDriver, newDriver imagev1.Driver, imageChanges bool, current, wanted imagev1.APIVersion) (nicPlan, error) {
	if up, note := driverLink(newDriver, wanted); !up {
		return nicPlan{}, fmt.Errorf("the image's %s", note)
	}
	if !imageChanges {
		return nicPlan{order: nicOnly, reason: "the image is in place, the NVM is left"}, nil
	}
	firstUp, firstNote := driverLink(oldDriver, wanted)
	afterUp, afterNote := driverLink(newDriver, current)
	switch {
	case !firstUp && !afterUp:
		return nicPlan{}, fmt.Errorf("no order keeps the NIC up: flashing first, the running %s; imaging first, the new %s", firstNote, afterNote)
	case !afterUp:
		return nicPlan{order: nicFirst, reason: "on the old NVM the new " + afterNote}, nil
	case !firstUp:
		return nicPlan{order: nicAfter, reason: "on the new NVM the running " + firstNote}, nil
	case afterNote != "" && firstNote == "":
		return nicPlan{order: nicFirst, reason: "on the old NVM the new " + afterNote}, nil
	case firstNote != "":
		return nicPlan{order: nicAfter, reason: "on the new NVM the running " + firstNote}, nil
	}
	return nicPlan{order: nicAfter, reason: "the new driver runs the old NVM"}, nil
}

// portsToFlash are the ports of the running OS not on the wanted NVM,
// and the NVM API they run (all must agree: one plan per host).
func portsToFlash(links []agentv1.PortLink, wanted imagev1.NVMImage) ([]string, imagev1.APIVersion, error) {
	var ports []string
	var api imagev1.APIVersion
	apis := map[imagev1.APIVersion]bool{}
	for _, l := range links {
		if l.Firmware == wanted.Firmware {
			continue
		}
		ports = append(ports, l.Port)
		api = l.API
		apis[l.API] = true
	}
	if len(apis) > 1 {
		return nil, api, fmt.Errorf("ports %s run NVMs of different API versions; flash them to one first", strings.Join(ports, ", "))
	}
	return ports, api, nil
}

// FirmwareReader reads the descriptor of the firmware package at a URL:
// the NVM image it carries with its firmware and API versions.
type FirmwareReader func(ctx context.Context, url string) (imagev1.NVMImage, error)

// nicFlash is the NVM change an update still has to make on its host.
type nicFlash struct {
	url   string
	nvm   imagev1.NVMImage
	ports []string
	plan  nicPlan
	// recovery are the ports whose driver reports the NIC's recovery
	// firmware: a flash of them was cut short (power lost while it was
	// written) and only a complete one brings them back. bootID is the
	// boot of the OS that reports them.
	recovery []string
	bootID   string
}

// maxFlashes bounds how often one NVM is staged on a host: a flash cut
// short is tried again, a NIC that stays in recovery is a Failure.
const maxFlashes = 3

// inRecovery says which ports the i40e driver found in firmware recovery
// mode.
func inRecovery(links []agentv1.PortLink) []string {
	var out []string
	for _, l := range links {
		if l.Recovery {
			out = append(out, l.Port)
		}
	}
	return out
}

// nicWork finds what the NICs still need: nil when no firmware is wanted
// or every port runs it; a refusal when no safe order exists. onNewImage
// means the host already runs the wanted image (the NVM comes after it,
// or the NVM is all that changes).
func (u *Updater) nicWork(ctx context.Context, st agentv1.Status, want infrav1.Image, fw *infrav1.FirmwarePackage, onNewImage bool) (flash *nicFlash, refusal string, err error) {
	if fw == nil {
		return nil, "", nil
	}
	nvm, err := u.ReadFirmware(ctx, fw.URL)
	if err != nil {
		return nil, "", fmt.Errorf("reading the firmware package %s: %w", fw.URL, err)
	}
	ports, api, err := portsToFlash(st.OS.Links, nvm)
	if err != nil {
		return nil, err.Error(), nil
	}
	if len(ports) == 0 {
		return nil, "", nil
	}
	running := st.OS.Image.I40eDriver()
	next := running
	if !onNewImage {
		m, err := u.ReadManifest(ctx, want.URL)
		if err != nil {
			return nil, "", fmt.Errorf("reading the manifest of %s: %w", want.URL, err)
		}
		next = m.I40eDriver()
	}
	plan, err := planNIC(running, next, !onNewImage, api, nvm.API)
	if err != nil {
		return nil, fmt.Sprintf("NVM %s with %s: %v; nothing was changed", nvm.Firmware, want.URL, err), nil
	}
	return &nicFlash{url: fw.URL, nvm: nvm, ports: ports, plan: plan, recovery: inRecovery(st.OS.Links), bootID: st.OS.BootID}, "", nil
}

// flashNIC stages the NVM on every port that needs it through the BMC
// (applied at the next reset, when no driver holds the NIC), drains the
// node first and resets the host. The BMC resets the host once more when
// the flash is written, so the NIC comes up on the new NVM.
func (u *Updater) flashNIC(ctx context.Context, bmm *infrav1.BareMetalMachine, wl client.Client, node *corev1.Node, f *nicFlash, key string) (progress, error) {
	attempts := flashAttempts(bmm, f.nvm.Firmware)
	staged, wasStaged := readMark(bmm, NICFlashAnnotation, f.nvm.Firmware)
	// A port in recovery under a boot after the one the flash was staged
	// under: that flash was cut short.
	restarted := staged.bootID != f.bootID
	cut := wasStaged && len(f.recovery) > 0 && restarted
	switch {
	case cut && attempts >= maxFlashes:
		return u.recordFailure(ctx, bmm, key, fmt.Sprintf("NIC ports %s of %s stay in firmware recovery mode after %d flashes of NVM %s",
			strings.Join(f.recovery, ", "), node.Name, attempts, f.nvm.Firmware))
	case cut: // stage it again below
	case wasStaged && !restarted && u.now().Sub(staged.at) > u.rebootRetry():
		// The OS that ran when the flash was staged is still up: the
		// reset that applies it never reached the host. Ask again.
		if err := u.reboot(ctx, bmm, nil, true); err != nil {
			return progress{}, fmt.Errorf("resetting %s to apply NVM %s: %w", node.Name, f.nvm.Firmware, err)
		}
		if err := u.annotate(ctx, bmm, NICFlashAnnotation, markValue(f.nvm.Firmware, u.now(), f.bootID)); err != nil {
			return progress{}, err
		}
		return running("reset %s again to apply NVM %s", node.Name, f.nvm.Firmware), nil
	case wasStaged:
		if u.now().Sub(staged.at) > u.FlashTimeout {
			return u.recordFailure(ctx, bmm, key, fmt.Sprintf("NVM %s staged %s ago is still not active on %s of %s", f.nvm.Firmware, u.now().Sub(staged.at).Round(time.Second), strings.Join(f.ports, ", "), node.Name))
		}
		return running("flashing NVM %s on %s of %s (%s: %s)", f.nvm.Firmware, strings.Join(f.ports, ", "), node.Name, f.plan.order, f.plan.reason), nil
	}
	if p, ok, err := u.drain(ctx, bmm, wl, node, key); err != nil || !ok {
		return p, err
	}
	bmc, err := u.dialBMC(ctx, bmm)
	if err != nil {
		return progress{}, err
	}
	if bmc == nil {
		return u.recordFailure(ctx, bmm, key, fmt.Sprintf("host %s has no BMC to flash NVM %s with; nothing was changed", bmm.Status.Host, f.nvm.Firmware))
	}
	defer bmc.Close()
	for _, port := range f.ports {
		if err := bmc.StageFirmware(f.url, "NIC."+port); err != nil {
			return progress{}, err
		}
	}
	if err := u.annotate(ctx, bmm, NICFlashAttemptsAnnotation, fmt.Sprintf("%s:%d", f.nvm.Firmware, attempts+1)); err != nil {
		return progress{}, err
	}
	if err := u.annotate(ctx, bmm, NICFlashAnnotation, markValue(f.nvm.Firmware, u.now(), f.bootID)); err != nil {
		return progress{}, err
	}
	if err := u.reboot(ctx, bmm, nil, true); err != nil { // a restart: the BMC flashes during it
		return progress{}, err
	}
	return running("staged NVM %s on %s of %s and reset the host (%s: %s)", f.nvm.Firmware, strings.Join(f.ports, ", "), node.Name, f.plan.order, f.plan.reason), nil
}

// flashAttempts is how often NVM firmware was staged on the host.
func flashAttempts(bmm *infrav1.BareMetalMachine, firmware string) int {
	v, ok := strings.CutPrefix(bmm.Annotations[NICFlashAttemptsAnnotation], firmware+":")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// linksDown says which ports of the running OS have no link, and why.
func linksDown(links []agentv1.PortLink) string {
	var down []string
	for _, l := range links {
		if !l.Up {
			down = append(down, fmt.Sprintf("port %s down on NVM %s: %s", l.Port, l.Firmware, l.Message))
		}
	}
	return strings.Join(down, "; ")
}
