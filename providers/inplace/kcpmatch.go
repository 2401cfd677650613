package inplace

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// MatchesAfterPatches judges a CanUpdateMachine answer as KCP v1.14 does
// (controlplane/kubeadm/reconcilers/kubeadmcontrolplane,
// inplace_canupdatemachine.go): the answer's JSON patches are applied to
// the current Machine, KubeadmConfig and InfraMachine, and the update is
// in place only when each spec then equals the desired one, the Machine
// spec without the fields CAPI never updates in place or syncs itself
// (cluster name, references, provider ID, readiness and deletion
// settings, taints). diffs name what is still different. The single-node
// controller decides with it, and the tests judge the extension with it.
func MatchesAfterPatches(req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) (bool, []string, error) {
	var diffs []string
	machine, err := json.Marshal(req.Current.Machine)
	if err != nil {
		return false, nil, err
	}
	if machine, err = applyJSONPatch(machine, resp.MachinePatch); err != nil {
		return false, nil, fmt.Errorf("Machine patch: %w", err)
	}
	patched := &clusterv1.Machine{}
	if err := json.Unmarshal(machine, patched); err != nil {
		return false, nil, err
	}
	if d := cmp.Diff(comparableMachineSpec(&patched.Spec), comparableMachineSpec(&req.Desired.Machine.Spec)); d != "" {
		diffs = append(diffs, "Machine: "+d)
	}
	for _, o := range []struct {
		name             string
		current, desired runtime.RawExtension
		patch            runtimehooksv1.Patch
	}{
		{"KubeadmConfig", req.Current.BootstrapConfig, req.Desired.BootstrapConfig, resp.BootstrapConfigPatch},
		{"InfraMachine", req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine, resp.InfrastructureMachinePatch},
	} {
		current, err := rawJSON(o.current)
		if err != nil {
			return false, nil, err
		}
		if current, err = applyJSONPatch(current, o.patch); err != nil {
			return false, nil, fmt.Errorf("%s patch: %w", o.name, err)
		}
		desired, err := rawJSON(o.desired)
		if err != nil {
			return false, nil, err
		}
		if d := cmp.Diff(specOf(current), specOf(desired)); d != "" {
			diffs = append(diffs, o.name+": "+d)
		}
	}
	return len(diffs) == 0, diffs, nil
}

func comparableMachineSpec(spec *clusterv1.MachineSpec) *clusterv1.MachineSpec {
	s := spec.DeepCopy()
	s.ClusterName, s.ProviderID = "", ""
	s.Bootstrap = clusterv1.Bootstrap{}
	s.InfrastructureRef = clusterv1.ContractVersionedObjectReference{}
	s.MinReadySeconds, s.ReadinessGates, s.Taints = nil, nil, nil
	s.Deletion.NodeDrainTimeoutSeconds, s.Deletion.NodeVolumeDetachTimeoutSeconds, s.Deletion.NodeDeletionTimeoutSeconds = nil, nil, nil
	return s
}

func rawJSON(r runtime.RawExtension) ([]byte, error) {
	if r.Raw != nil {
		return r.Raw, nil
	}
	return json.Marshal(r.Object)
}

func applyJSONPatch(doc []byte, p runtimehooksv1.Patch) ([]byte, error) {
	if !p.IsDefined() || len(p.Patch) == 0 {
		return doc, nil
	}
	if p.PatchType != runtimehooksv1.JSONPatchType {
		return nil, fmt.Errorf("patch type %q: only JSONPatch is used here", p.PatchType)
	}
	ops, err := jsonpatch.DecodePatch(p.Patch)
	if err != nil {
		return nil, err
	}
	return ops.Apply(doc)
}

// specOf is an object's spec as JSON values; nil when it has none.
func specOf(doc []byte) any {
	var o map[string]any
	if json.Unmarshal(doc, &o) != nil {
		return nil
	}
	return o["spec"]
}
