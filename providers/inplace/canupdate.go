package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
)

// ManifestReader reads the manifest of the image at a URL (the header of
// the image bundle), to check an image's Kubernetes version.
type ManifestReader func(ctx context.Context, url string) (imagev1.Manifest, error)

// HostReader reads the agent's report of the host behind a Machine (its
// running OS, images and NIC ports), found through the Machine's Node.
type HostReader func(ctx context.Context, machine client.ObjectKey) (agentv1.Status, error)

// coverage is one CanUpdate question: the current objects (patched in
// place toward the desired ones in what the extension covers) and the
// hosts they run on (one for a Machine, every Machine's for a MachineSet).
// currentKC and desiredKC are the KubeadmConfigs' specs, or for a
// MachineSet its bootstrap templates' (nil when it has none).
type coverage struct {
	current, desired       *clusterv1.MachineSpec
	currentBMM, desiredBMM *infrav1.BareMetalMachineSpec
	currentKC, desiredKC   *bootstrapv1.KubeadmConfigSpec
	hosts                  []agentv1.Status
}

// cover is the one place that decides whether a change can be made in
// place. It claims only what UpdateMachine applies: the OS image
// (spec.image, which must carry the desired Kubernetes version), the NIC
// firmware (spec.nicFirmware, only when every host has an order of image
// and NVM that keeps its links up, from the NVM it reports and the
// drivers of both images), the version, the kubeadm feature gates KCP
// sets per version (the host's `kubeadm upgrade node` applies the
// cluster's kubeadm-config, and UpdateMachine waits until the host
// reports them), and the KubeadmConfig's files when each is written as
// it is (filesRefusal: UpdateMachine writes them on the host). Anything
// it does not cover stays different (a new host selector, any other
// bootstrap change), and a refusal leaves everything different, so CAPI
// rolls out instead. The refusal says why.
func (h *Handlers) cover(ctx context.Context, c coverage) (refusal string, err error) {
	imageChanges := c.currentBMM.Image != c.desiredBMM.Image
	var next imagev1.Manifest
	if imageChanges || c.current.Version != c.desired.Version {
		if next, err = h.updater.ReadManifest(ctx, c.desiredBMM.Image.URL); err != nil {
			return "", fmt.Errorf("reading the manifest of %s: %w", c.desiredBMM.Image.URL, err)
		}
		if next.KubernetesVersion != c.desired.Version {
			return fmt.Sprintf("image %s carries Kubernetes %s, not %s", c.desiredBMM.Image.URL, next.KubernetesVersion, c.desired.Version), nil
		}
	}
	if fw := c.desiredBMM.NICFirmware; fw != nil {
		nvm, err := h.updater.ReadFirmware(ctx, fw.URL)
		if err != nil {
			return "", fmt.Errorf("reading the firmware package %s: %w", fw.URL, err)
		}
		for _, st := range c.hosts {
			if refusal := nicRefusal(st, next, imageChanges, nvm); refusal != "" {
				return refusal, nil
			}
		}
	}
	c.currentBMM.Image = c.desiredBMM.Image
	c.currentBMM.NICFirmware = c.desiredBMM.NICFirmware.DeepCopy()
	c.current.Version = c.desired.Version
	if c.currentKC != nil && c.desiredKC != nil {
		c.currentKC.ClusterConfiguration.FeatureGates = maps.Clone(c.desiredKC.ClusterConfiguration.FeatureGates)
		if filesRefusal(c.currentKC.Files, c.desiredKC.Files) == "" {
			c.currentKC.Files = slices.Clone(c.desiredKC.Files)
		}
	}
	return "", nil
}

// filesRefusal says why the KubeadmConfig's files cannot change in place
// ("" when they can): UpdateMachine writes files, as cloud-init's
// write_files did at the first boot, so it covers a file added or given
// new content inline. A file removed would stay on the host (nothing
// deletes what cloud-init wrote), and a file whose content comes from a
// Secret, or that is not written as it is (an encoding, another owner or
// mode, an append), is not what the host's file would be: those stay
// different, and CAPI rolls the Machine out.
func filesRefusal(current, desired []bootstrapv1.File) string {
	want := map[string]bool{}
	for _, f := range desired {
		want[f.Path] = true
		if refusal := plainFile(f); refusal != "" {
			return refusal
		}
	}
	for _, f := range current {
		if !want[f.Path] {
			return fmt.Sprintf("file %s would be removed, and nothing removes a file from the host", f.Path)
		}
	}
	return ""
}

// plainFile says why a file is not one UpdateMachine writes as it is.
func plainFile(f bootstrapv1.File) string {
	switch {
	case f.ContentFrom.IsDefined():
		return fmt.Sprintf("file %s takes its content from a Secret", f.Path)
	case f.Encoding != "" || f.Append != nil && *f.Append:
		return fmt.Sprintf("file %s is encoded or appended", f.Path)
	case f.Owner != "" || f.Permissions != "":
		return fmt.Sprintf("file %s names an owner or permissions", f.Path)
	}
	return ""
}

// nicRefusal says why a host cannot take an NVM change with the image
// change in place ("" when it can, or has nothing to flash): the order
// is the one UpdateMachine will follow (planNIC).
func nicRefusal(st agentv1.Status, next imagev1.Manifest, imageChanges bool, nvm imagev1.NVMImage) string {
	if st.OS == nil {
		return fmt.Sprintf("host %s reports no running OS, so its NIC firmware cannot be judged", st.Host)
	}
	ports, api, err := portsToFlash(st.OS.Links, nvm)
	if err != nil {
		return fmt.Sprintf("host %s: %v", st.Host, err)
	}
	if len(ports) == 0 {
		return ""
	}
	running := st.OS.Image.I40eDriver()
	driver := running
	if imageChanges {
		driver = next.I40eDriver()
	}
	if _, err := planNIC(running, driver, imageChanges, api, nvm.API); err != nil {
		return fmt.Sprintf("host %s: NVM %s: %v", st.Host, nvm.Firmware, err)
	}
	return ""
}

// ours says whether a request's infrastructure object is of the kind
// this extension updates; any other kind is answered with no patches
// (so CAPI rolls it out), never a Failure, which CAPI would retry forever.
func ours(raw runtime.RawExtension, kind string) bool {
	var meta metav1.TypeMeta
	data := raw.Raw
	if data == nil && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return false
		}
	}
	if json.Unmarshal(data, &meta) != nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	return err == nil && gv.Group == infrav1.GroupVersion.Group && meta.Kind == kind
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
// equal the desired ones in what can change in place, or none (CAPI then
// rolls the Machine out). A Failure means the question could not be
// answered now (a manifest or host that could not be read); KCP asks
// again.
func (h *Handlers) DoCanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", req.Desired.Machine.Name)
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	if !ours(req.Current.InfrastructureMachine, "BareMetalMachine") {
		log.Info("CanUpdateMachine: not a BareMetalMachine; no in-place update")
		return
	}
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
	var hosts []agentv1.Status
	if desiredBMM.Spec.NICFirmware != nil {
		st, err := h.updater.readHost(ctx, client.ObjectKeyFromObject(&req.Current.Machine))
		if err != nil {
			fail(&resp.CommonResponse, "the host of Machine %s: %v", req.Current.Machine.Name, err)
			return
		}
		hosts = append(hosts, st)
	}
	originalBMM, originalKC := currentBMM.DeepCopy(), currentKC.DeepCopy()
	refusal, err := h.cover(ctx, coverage{current: &current.Spec, desired: &desired.Spec, currentBMM: &currentBMM.Spec, desiredBMM: &desiredBMM.Spec,
		currentKC: &currentKC.Spec, desiredKC: &desiredKC.Spec, hosts: hosts})
	if err != nil {
		fail(&resp.CommonResponse, "%v", err)
		return
	}
	if refusal != "" {
		log.Info("CanUpdateMachine: not in place", "why", refusal)
		resp.Message = "not in place: " + refusal
		return
	}
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
	log.Info("CanUpdateMachine", "machinePatch", string(resp.MachinePatch.Patch), "infraPatch", string(resp.InfrastructureMachinePatch.Patch), "bootstrapPatch", string(resp.BootstrapConfigPatch.Patch))
}

// DoCanUpdateMachineSet answers the MachineDeployment controller, on
// templates; the hosts judged are those of the current MachineSet's
// Machines, which an in-place update would move to the new one.
func (h *Handlers) DoCanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	log := ctrl.LoggerFrom(ctx).WithValues("MachineSet", req.Current.MachineSet.Name)
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	if !ours(req.Current.InfrastructureMachineTemplate, "BareMetalMachineTemplate") {
		log.Info("CanUpdateMachineSet: not a BareMetalMachineTemplate; no in-place update")
		return
	}
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
	var hosts []agentv1.Status
	if desiredT.Spec.Template.Spec.NICFirmware != nil {
		var err error
		if hosts, err = h.hostsOfMachineSet(ctx, &req.Current.MachineSet); err != nil {
			fail(&resp.CommonResponse, "the hosts of MachineSet %s: %v", req.Current.MachineSet.Name, err)
			return
		}
	}
	originalT := currentT.DeepCopy()
	c := coverage{current: &current.Spec.Template.Spec, desired: &desired.Spec.Template.Spec,
		currentBMM: &currentT.Spec.Template.Spec, desiredBMM: &desiredT.Spec.Template.Spec, hosts: hosts}
	// The bootstrap templates, when the MachineSet has one (a KubeadmConfigTemplate).
	var currentKCT, desiredKCT, originalKCT *bootstrapv1.KubeadmConfigTemplate
	if req.Current.BootstrapConfigTemplate.Raw != nil || req.Current.BootstrapConfigTemplate.Object != nil {
		currentKCT, desiredKCT = &bootstrapv1.KubeadmConfigTemplate{}, &bootstrapv1.KubeadmConfigTemplate{}
		if err := h.decode(req.Current.BootstrapConfigTemplate, currentKCT); err != nil {
			fail(&resp.CommonResponse, "current bootstrap config template: %v", err)
			return
		}
		if err := h.decode(req.Desired.BootstrapConfigTemplate, desiredKCT); err != nil {
			fail(&resp.CommonResponse, "desired bootstrap config template: %v", err)
			return
		}
		originalKCT = currentKCT.DeepCopy()
		c.currentKC, c.desiredKC = &currentKCT.Spec.Template.Spec, &desiredKCT.Spec.Template.Spec
	}
	refusal, err := h.cover(ctx, c)
	if err != nil {
		fail(&resp.CommonResponse, "%v", err)
		return
	}
	if refusal != "" {
		log.Info("CanUpdateMachineSet: not in place", "why", refusal)
		resp.Message = "not in place: " + refusal
		return
	}
	if resp.MachineSetPatch, err = patchFrom(req.Current.MachineSet, current); err == nil {
		resp.InfrastructureMachineTemplatePatch, err = patchFrom(originalT, currentT)
	}
	if err == nil && currentKCT != nil {
		resp.BootstrapConfigTemplatePatch, err = patchFrom(originalKCT, currentKCT)
	}
	if err != nil {
		fail(&resp.CommonResponse, "%v", err)
	}
}

// hostsOfMachineSet reads the host of every Machine the MachineSet owns.
func (h *Handlers) hostsOfMachineSet(ctx context.Context, ms *clusterv1.MachineSet) ([]agentv1.Status, error) {
	machines := &clusterv1.MachineList{}
	if err := h.updater.Client.List(ctx, machines, client.InNamespace(ms.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: ms.Spec.ClusterName}); err != nil {
		return nil, err
	}
	var out []agentv1.Status
	for i := range machines.Items {
		m := &machines.Items[i]
		if !ownedBy(m, ms.Name) || !m.DeletionTimestamp.IsZero() {
			continue
		}
		st, err := h.updater.readHost(ctx, client.ObjectKeyFromObject(m))
		if err != nil {
			return nil, fmt.Errorf("Machine %s: %w", m.Name, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func ownedBy(m *clusterv1.Machine, machineSet string) bool {
	for _, ref := range m.OwnerReferences {
		if ref.Kind == "MachineSet" && ref.Name == machineSet {
			return true
		}
	}
	return false
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
