// Package inplace is a Cluster API Runtime Extension that updates
// machines of the reference bare-metal provider in place: the new OS
// image goes into the host's inactive A/B slot, the host boots it once,
// and only a passing health check commits it; otherwise the bootloader
// falls back to the old slot. It implements CAPI's in-place hooks
// (CanUpdateMachine, CanUpdateMachineSet, UpdateMachine, gate
// InPlaceUpdates).
package inplace

import (
	"context"
	"encoding/json"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/sim/image"
)

// ManifestReader reads the manifest of the image at a URL (the header of
// the image bundle), to check an image's Kubernetes version.
type ManifestReader func(ctx context.Context, url string) (image.Manifest, error)

// coverMachine declares what this extension changes in place on one
// machine: the OS image (spec.image of the BareMetalMachine), the NIC
// firmware (spec.nicFirmware; whether an order keeps the NIC up is
// checked when the update runs, against the NVM the host really has) and,
// when the image carries it, the Kubernetes version, with the kubeadm
// feature gates KCP sets per version (a `kubeadm upgrade` applies them;
// currentKC and desiredKC are nil for a MachineSet). Everything else is
// left different, so CAPI rolls the machine out instead (a new host
// selector, another bootstrap change).
func coverMachine(ctx context.Context, readManifest ManifestReader, current, desired *clusterv1.MachineSpec, currentBMM, desiredBMM *infrav1.BareMetalMachineSpec, currentKC, desiredKC *bootstrapv1.KubeadmConfigSpec) error {
	currentBMM.Image = desiredBMM.Image
	currentBMM.NICFirmware = desiredBMM.NICFirmware.DeepCopy()
	if current.Version == desired.Version {
		return nil
	}
	m, err := readManifest(ctx, desiredBMM.Image.URL)
	if err != nil {
		return fmt.Errorf("reading the manifest of %s: %w", desiredBMM.Image.URL, err)
	}
	if m.KubernetesVersion != desired.Version {
		return nil // the image does not carry the version: roll out
	}
	current.Version = desired.Version
	if currentKC != nil && desiredKC != nil {
		currentKC.ClusterConfiguration.FeatureGates = desiredKC.ClusterConfiguration.FeatureGates
	}
	return nil
}

// Handlers serve the three hooks.
type Handlers struct {
	decoder runtime.Decoder
	updater *Updater
}

// NewHandlers builds the handlers; decoder must know the BareMetalMachine
// kinds and CABPK's. The updater's ManifestReader also answers CanUpdate.
func NewHandlers(decoder runtime.Decoder, updater *Updater) *Handlers {
	return &Handlers{decoder: decoder, updater: updater}
}

func (h *Handlers) decode(raw runtime.RawExtension, into runtime.Object) error {
	data := raw.Raw
	if data == nil && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return err
		}
	}
	_, _, err := h.decoder.Decode(data, nil, into)
	return err
}

// DoCanUpdateMachine answers KCP: patches that make the current objects
// equal the desired ones in what can change in place.
func (h *Handlers) DoCanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", req.Desired.Machine.Name)
	current, desired := req.Current.Machine.DeepCopy(), req.Desired.Machine.DeepCopy()
	currentBMM, desiredBMM := &infrav1.BareMetalMachine{}, &infrav1.BareMetalMachine{}
	if err := h.decode(req.Current.InfrastructureMachine, currentBMM); err != nil {
		fail(&resp.CommonResponse, "current infrastructure machine: %v", err)
		return
	}
	if err := h.decode(req.Desired.InfrastructureMachine, desiredBMM); err != nil {
		fail(&resp.CommonResponse, "desired infrastructure machine: %v", err)
		return
	}
	currentKC, desiredKC := &bootstrapv1.KubeadmConfig{}, &bootstrapv1.KubeadmConfig{}
	if err := h.decode(req.Current.BootstrapConfig, currentKC); err != nil {
		fail(&resp.CommonResponse, "current bootstrap config: %v", err)
		return
	}
	if err := h.decode(req.Desired.BootstrapConfig, desiredKC); err != nil {
		fail(&resp.CommonResponse, "desired bootstrap config: %v", err)
		return
	}
	originalBMM, originalKC := currentBMM.DeepCopy(), currentKC.DeepCopy()
	if err := coverMachine(ctx, h.updater.ReadManifest, &current.Spec, &desired.Spec, &currentBMM.Spec, &desiredBMM.Spec, &currentKC.Spec, &desiredKC.Spec); err != nil {
		fail(&resp.CommonResponse, "%v", err)
		return
	}
	var err error
	if resp.MachinePatch, err = patchFrom(req.Current.Machine, current); err == nil {
		resp.InfrastructureMachinePatch, err = patchFrom(originalBMM, currentBMM)
	}
	if err == nil {
		resp.BootstrapConfigPatch, err = patchFrom(originalKC, currentKC)
	}
	if err != nil {
		fail(&resp.CommonResponse, "%v", err)
		return
	}
	log.Info("CanUpdateMachine", "machinePatch", string(resp.MachinePatch.Patch), "infraPatch", string(resp.InfrastructureMachinePatch.Patch))
	resp.Status = runtimehooksv1.ResponseStatusSuccess
}

// DoCanUpdateMachineSet answers the MachineDeployment controller, on
// templates.
func (h *Handlers) DoCanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	current, desired := req.Current.MachineSet.DeepCopy(), req.Desired.MachineSet.DeepCopy()
	currentT, desiredT := &infrav1.BareMetalMachineTemplate{}, &infrav1.BareMetalMachineTemplate{}
	if err := h.decode(req.Current.InfrastructureMachineTemplate, currentT); err != nil {
		fail(&resp.CommonResponse, "current infrastructure machine template: %v", err)
		return
	}
	if err := h.decode(req.Desired.InfrastructureMachineTemplate, desiredT); err != nil {
		fail(&resp.CommonResponse, "desired infrastructure machine template: %v", err)
		return
	}
	originalT := currentT.DeepCopy()
	if err := coverMachine(ctx, h.updater.ReadManifest, &current.Spec.Template.Spec, &desired.Spec.Template.Spec, &currentT.Spec.Template.Spec, &desiredT.Spec.Template.Spec, nil, nil); err != nil {
		fail(&resp.CommonResponse, "%v", err)
		return
	}
	var err error
	if resp.MachineSetPatch, err = patchFrom(req.Current.MachineSet, current); err == nil {
		resp.InfrastructureMachineTemplatePatch, err = patchFrom(originalT, currentT)
	}
	if err != nil {
		fail(&resp.CommonResponse, "%v", err)
		return
	}
	resp.Status = runtimehooksv1.ResponseStatusSuccess
}

func fail(resp *runtimehooksv1.CommonResponse, format string, args ...any) {
	resp.Status = runtimehooksv1.ResponseStatusFailure
	resp.Message = fmt.Sprintf(format, args...)
}

// patchFrom is the JSON patch (RFC 6902) from original to modified, both
// marshalled the same way, so it holds only what the extension changed.
func patchFrom(original, modified any) (runtimehooksv1.Patch, error) {
	a, err := json.Marshal(original)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	b, err := json.Marshal(modified)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return runtimehooksv1.Patch{}, err
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONPatchType, Patch: patch}, nil
}
