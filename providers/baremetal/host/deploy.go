package host

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
)

// installTries is how many boots a fresh install gets before its
// bootloader gives up.
const installTries = 3

// ResetRequestedAnnotation records when a registered host was asked to
// reset, so a stalled reset is asked again after ResetTimeout.
const ResetRequestedAnnotation = "infrastructure.upgradelab.dev/reset-requested-at"

// provision writes the image and the user data and boots the host from
// disk. Every step is safe to repeat, so a provider restarted halfway
// starts over without harm: an image already staged with the right
// checksum is not written again.
func (r *Reconciler) provision(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if host.Spec.ConsumerRef == nil || imageChanged(host) {
		r.forgetDeployBoot(host)
		setState(host, metal3.StateDeprovisioning)
		return ctrl.Result{Requeue: true}, nil
	}
	var bmc bmcDriver
	var ag *hostagent.Client
	if registered(host) {
		ag = r.registeredAgent(host)
	} else {
		if r.deployBootPending(host) {
			return ctrl.Result{RequeueAfter: r.heartbeatWait()}, nil
		}
		var err error
		if bmc, err = r.dialBMC(ctx, host); err != nil {
			return ctrl.Result{}, failed(metal3.ProvisioningError, "%v", err)
		}
		defer bmc.Close()
		host.Status.PoweredOn = bmc.PoweredOn()
		if ag, err = r.deployRamdisk(ctx, host, bmc); ag == nil || err != nil {
			return ctrl.Result{RequeueAfter: r.heartbeatWait()}, err
		}
	}
	userData, metaData, err := r.configDrive(ctx, host)
	if err != nil {
		return ctrl.Result{}, failed(metal3.ProvisioningError, "%v", err)
	}
	if err := install(ctx, ag, host.Spec.Image, userData, metaData); err != nil {
		return ctrl.Result{}, failed(metal3.ProvisioningError, "%v", err)
	}
	// Boot the installed OS.
	if bmc != nil {
		if err := bmc.BootDisk(); err != nil {
			return ctrl.Result{}, failed(metal3.ProvisioningError, "%v", err)
		}
		if err := bmc.PowerOn(); err != nil {
			return ctrl.Result{}, failed(metal3.PowerManagementError, "restarting into the installed OS: %v", err)
		}
		host.Status.PoweredOn = true
	} else if err := ag.Reboot(ctx); err != nil {
		return ctrl.Result{}, failed(metal3.ProvisioningError, "rebooting into the installed OS: %v", err)
	}
	r.forgetDeployBoot(host)
	host.Status.Provisioning.Image = *host.Spec.Image
	host.Status.OperationHistory.Provision.End = metav1.Now()
	setState(host, metal3.StateProvisioned)
	log.FromContext(ctx).Info("provisioned", "image", host.Spec.Image.URL)
	// Soon: the first steady pass reads what the BMC learns of the OS.
	return ctrl.Result{RequeueAfter: r.Poll}, nil
}

// install runs in the deploy ramdisk (or recovery OS): stage the image
// (skipped when already staged), config drive, activate. Where the image
// goes (slot A on a blank A/B disk, a first OSTree deployment) is the
// host's business.
func install(ctx context.Context, ag *hostagent.Client, img *metal3.Image, userData []byte, metaData map[string]string) error {
	st, err := ag.Status(ctx)
	if err != nil {
		return err
	}
	if st.OS == nil || st.OS.Source == agentv1.FromDisk {
		return errors.New("the host runs its installed OS, not a deploy or recovery environment")
	}
	var root agentv1.RootID
	if s := st.Images.Staged; s != nil && s.State == agentv1.RootWritten && s.Checksum == img.Checksum {
		root = s.ID
	} else if root, err = ag.Stage(ctx, img.URL, img.Checksum); err != nil {
		return fmt.Errorf("staging %s: %w", img.URL, err)
	}
	if err := ag.WriteConfigDrive(ctx, userData, metaData); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	if err := ag.Activate(ctx, root, installTries); err != nil {
		return fmt.Errorf("activating %s (root %s): %w", img.URL, root, err)
	}
	return nil
}

// deprovision cleans a BMC host (deploy ramdisk erases the disk, then
// power off) or resets a registered one.
func (r *Reconciler) deprovision(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if registered(host) {
		return r.reset(ctx, host)
	}
	if r.deployBootPending(host) {
		return ctrl.Result{RequeueAfter: r.heartbeatWait()}, nil
	}
	bmc, err := r.dialBMC(ctx, host)
	if err != nil {
		return ctrl.Result{}, failed(metal3.ProvisioningError, "%v", err)
	}
	defer bmc.Close()
	if host.Spec.AutomatedCleaningMode != metal3.CleaningModeDisabled {
		ag, err := r.deployRamdisk(ctx, host, bmc)
		if ag == nil || err != nil {
			return ctrl.Result{RequeueAfter: r.heartbeatWait()}, err
		}
		if err := ag.Clean(ctx); err != nil {
			return ctrl.Result{}, failed(metal3.ProvisioningError, "cleaning: %v", err)
		}
	}
	if err := powerOff(bmc); err != nil {
		return ctrl.Result{}, failed(metal3.PowerManagementError, "powering off after cleaning: %v", err)
	}
	r.forgetDeployBoot(host)
	if clearRebootAnnotations(host) {
		// As BMO: a reboot asked of the last consumer ends with it.
		if err := r.Client.Update(ctx, host); err != nil {
			return ctrl.Result{}, err
		}
	}
	host.Status.PoweredOn = false
	host.Status.Provisioning.Image = metal3.Image{}
	host.Status.OperationHistory.Deprovision.End = metav1.Now()
	setState(host, metal3.StateAvailable)
	return ctrl.Result{Requeue: true}, nil
}

// reset asks a registered host to reset (recovery wipes and reinstalls,
// then the host registers anew and callback deletes this object). A reset
// that has not finished after ResetTimeout is asked for again.
func (r *Reconciler) reset(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if at, err := time.Parse(time.RFC3339Nano, host.Annotations[ResetRequestedAnnotation]); err == nil && time.Since(at) < r.ResetTimeout {
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	if err := r.registeredAgent(host).Reset(ctx); err != nil {
		return ctrl.Result{}, failed(metal3.ProvisioningError, "reset: %v", err)
	}
	patch := client.MergeFrom(host.DeepCopy())
	host.Annotations[ResetRequestedAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	if err := r.Client.Patch(ctx, host, patch); err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("reset requested; waiting for the host to register anew")
	return ctrl.Result{RequeueAfter: r.Poll}, nil
}

// deployRamdisk returns the agent of the host's deploy ramdisk once it
// heartbeats after the boot this controller asked for; until then it
// boots the host from the deploy media (again after DeployTimeout) and
// returns nil.
func (r *Reconciler) deployRamdisk(ctx context.Context, host *metal3.BareMetalHost, bmc bmcDriver) (*hostagent.Client, error) {
	switch b := r.deployBoot(host); {
	case b.agentURL != "":
		return hostagent.New(r.AgentHTTP, b.agentURL), nil
	case b.pending:
		return nil, nil
	case b.asked:
		log.FromContext(ctx).Info("no heartbeat from the deploy ramdisk; booting it again", "after", time.Since(b.at).Round(time.Second))
	}
	// As Ironic's deploy and tear-down: the host is off before its boot
	// device is set. A host that is on may be in POST, and firmware that
	// reads the one-time override before the restart comes uses it up on
	// the boot being cut short; the restart then boots the installed OS,
	// and no ramdisk heartbeats until DeployTimeout (seen in CI: a
	// provisioned IPMI host deleted just after it was powered on).
	if err := bmc.PowerOff(); err != nil {
		return nil, failed(metal3.PowerManagementError, "powering off before the deploy boot: %v", err)
	}
	media := r.DeployImageURL + "?" + agentv1.DeployCallbackParam + "=" + url.QueryEscape(r.CallbackURL)
	if err := bmc.BootDeploy(media); err != nil {
		return nil, failed(metal3.ProvisioningError, "%v", err)
	}
	if err := bmc.PowerOn(); err != nil {
		return nil, failed(metal3.PowerManagementError, "booting the deploy ramdisk: %v", err)
	}
	host.Status.PoweredOn = true
	r.mu.Lock()
	r.deployBoots[host.UID] = time.Now()
	if r.awaiting != nil && host.Spec.BootMACAddress != "" {
		r.awaiting[strings.ToLower(host.Spec.BootMACAddress)] = client.ObjectKeyFromObject(host)
	}
	r.mu.Unlock()
	return nil, nil
}

// deployBootState is where a host's deploy boot stands: asked for (at),
// heartbeating since (agentURL), or neither heartbeating nor past its
// DeployTimeout yet (pending).
type deployBootState struct {
	asked, pending bool
	at             time.Time
	agentURL       string
}

func (r *Reconciler) deployBoot(host *metal3.BareMetalHost) deployBootState {
	r.mu.Lock()
	at, asked := r.deployBoots[host.UID]
	r.mu.Unlock()
	if !asked {
		return deployBootState{}
	}
	b := deployBootState{asked: true, at: at}
	if seen, found := r.Heartbeats.Lookup(host.Spec.BootMACAddress); found && seen.At.After(at) {
		b.agentURL = seen.AgentURL
	} else {
		b.pending = time.Since(at) < r.DeployTimeout
	}
	return b
}

// deployBootPending tells a host with nothing to do but wait for its
// deploy ramdisk, and so no reason to reach its BMC. With a hundred
// hosts booting at once, a BMC connection per host per look would be
// most of the host controller's time.
func (r *Reconciler) deployBootPending(host *metal3.BareMetalHost) bool {
	return r.deployBoot(host).pending
}

func (r *Reconciler) forgetDeployBoot(host *metal3.BareMetalHost) {
	r.mu.Lock()
	delete(r.deployBoots, host.UID)
	delete(r.awaiting, strings.ToLower(host.Spec.BootMACAddress))
	r.mu.Unlock()
}

// clearRebootAnnotations drops every reboot annotation; it says whether
// there was one.
func clearRebootAnnotations(host *metal3.BareMetalHost) bool {
	found := false
	for key := range host.Annotations {
		if key == metal3.RebootAnnotationPrefix || strings.HasPrefix(key, metal3.RebootAnnotationPrefix+"/") {
			delete(host.Annotations, key)
			found = true
		}
	}
	return found
}
