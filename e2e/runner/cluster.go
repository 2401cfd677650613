package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/clustertemplate"
	"github.com/upgradelab/upgradelab/e2e/scenario"
)

// clusterName is the workload cluster's name in every run (each run has
// its own namespace and plane).
const clusterName = "sc"

// vars are the template variables of the scenario's cluster at a release.
func (r *run) vars(ctx context.Context, rel scenario.Release, suffix string) (map[string]string, error) {
	s, e := r.scenario, r.env
	cp, w := s.Cluster.ControlPlane, s.Cluster.Workers
	v := map[string]string{}
	for k, val := range r.provider.Variables {
		v[k] = val
	}
	for k, val := range map[string]string{
		"NAMESPACE": e.Namespace, "CLUSTER_NAME": clusterName,
		"KUBERNETES_VERSION": rel.Version, "TEMPLATE_SUFFIX": suffix,
		"CP_REPLICAS": strconv.Itoa(cp.Replicas), "CP_MAX_SURGE": strconv.Itoa(cp.MaxSurge),
		"WORKER_REPLICAS": strconv.Itoa(w.Replicas), "MD_MAX_SURGE": strconv.Itoa(w.MaxSurge), "MD_MAX_UNAVAILABLE": strconv.Itoa(w.MaxUnavailable),
		"NODE_REUSE": strconv.FormatBool(s.Strategy == scenario.ScaleIn || s.Strategy == scenario.Reset),
		// CAPI's Machine deletion.nodeDrainTimeoutSeconds (0: no limit).
		"NODE_DRAIN_TIMEOUT_SECONDS": strconv.Itoa(int(s.Workload.NodeDrainTimeout.Seconds())),
	} {
		v[k] = val
	}
	if err := r.coreDNSVars(v, rel); err != nil {
		return nil, err
	}
	if w.Replicas == 0 { // the MachineDeployment never rolls; the webhook still wants a way
		v["MD_MAX_SURGE"] = "1"
	}
	if !r.provider.Lab {
		return v, nil
	}
	if err := r.labVars(ctx, v, rel); err != nil {
		return nil, err
	}
	return v, nil
}

// coreDNSVars are the CoreDNS tag of rel (KCP's dns.imageTag) and of
// every release of the scenario, from the image catalog.
func (r *run) coreDNSVars(v map[string]string, rel scenario.Release) error {
	versions := map[string]string{}
	for _, each := range []scenario.Release{r.scenario.From, r.scenario.To} {
		img, err := r.lab.Catalog.Get(each.Image)
		if err != nil {
			return err
		}
		versions[each.Version] = img.CoreDNS
	}
	b, _ := json.Marshal(versions)
	v["COREDNS_VERSION"], v["COREDNS_VERSIONS"] = versions[rel.Version], string(b)
	return nil
}

// labVars are the variables of a cluster on the lab: its VIP, the
// release's image and NIC firmware on the lab's image server, and every
// release's image for the ClusterClass's images variable.
func (r *run) labVars(ctx context.Context, v map[string]string, rel scenario.Release) error {
	s, e := r.scenario, r.env
	vip, err := e.Site.VIP(ctx, e.Namespace+"/"+clusterName)
	if err != nil {
		return err
	}
	v["VIP_HOST"], v["VIP_PORT"] = vip.Host, strconv.Itoa(int(vip.Port))
	v["NIC_FIRMWARE"], v["NIC_FIRMWARE_URL"] = "null", ""
	img, err := e.Site.Lab.Definition().Catalog.Get(rel.Image)
	if err != nil {
		return err
	}
	v["IMAGE_URL"], v["IMAGE_CHECKSUM"] = e.Site.Lab.ImageServer().ImageURL(img.Name), img.SHA256
	if rel.NICFirmware != "" {
		url := e.Site.Lab.ImageServer().FirmwareURL(rel.NICFirmware)
		v["NIC_FIRMWARE"], v["NIC_FIRMWARE_URL"] = fmt.Sprintf("{url: %q}", url), url
	}
	images := map[string]map[string]string{}
	for _, rel := range []scenario.Release{s.From, s.To} {
		img, err := e.Site.Lab.Definition().Catalog.Get(rel.Image)
		if err != nil {
			return err
		}
		images[rel.Version] = map[string]string{"url": e.Site.Lab.ImageServer().ImageURL(img.Name), "checksum": img.SHA256}
	}
	b, _ := json.Marshal(images)
	v["IMAGES"] = string(b)
	return nil
}

// apply creates the objects of a provider's cluster template, each
// passed through edit (when not nil) first.
func (r *run) apply(ctx context.Context, file string, vars map[string]string, edit ...func(*unstructured.Unstructured) error) error {
	objs, err := clustertemplate.Render(filepath.Join(r.provider.TemplatesDir(), file), vars)
	if err != nil {
		return err
	}
	for _, o := range objs {
		for _, e := range edit {
			if err := e(o); err != nil {
				return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
		if err := r.env.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// createCluster creates the cluster at the scenario's from-release, in
// the run's form. A one-replica control plane updated in place is opted
// into the single-node controller.
func (r *run) createCluster(ctx context.Context) error {
	v, err := r.vars(ctx, r.scenario.From, "from")
	if err != nil {
		return err
	}
	singleNode := r.scenario.Strategy == scenario.InPlace && r.scenario.Cluster.ControlPlane.Replicas == 1 && r.provider.SingleNodeAnnotation != ""
	hc := r.scenario.Cluster.HealthCheck
	if r.form == scenario.ClusterClass {
		if err := r.apply(ctx, "clusterclass.yaml", v); err != nil {
			return err
		}
		if err := r.apply(ctx, "cluster-topology.yaml", v); err != nil {
			return err
		}
		if !singleNode && hc == nil {
			return nil
		}
		return r.patchCluster(ctx, func(c *clusterv1.Cluster) {
			if singleNode {
				c.Spec.Topology.ControlPlane.Metadata.Annotations = map[string]string{r.provider.SingleNodeAnnotation: "true"}
			}
			if hc != nil {
				c.Spec.Topology.ControlPlane.HealthCheck.Checks.UnhealthyNodeConditions = unhealthyNode(hc)
				for i := range c.Spec.Topology.Workers.MachineDeployments {
					c.Spec.Topology.Workers.MachineDeployments[i].HealthCheck.Checks.UnhealthyNodeConditions = unhealthyNode(hc)
				}
			}
		})
	}
	if err := r.apply(ctx, "machine-templates.yaml", v); err != nil {
		return err
	}
	if err := r.apply(ctx, "cluster.yaml", v, apiServerArgs(r.scenario.Cluster.ControlPlane.APIServerExtraArgs)); err != nil {
		return err
	}
	if hc != nil {
		if err := r.createHealthChecks(ctx, hc); err != nil {
			return err
		}
	}
	if singleNode {
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.env.Namespace, Name: clusterName + "-cp"}, kcp); err != nil {
			return err
		}
		patch := client.MergeFrom(kcp.DeepCopy())
		kcp.Annotations = map[string]string{r.provider.SingleNodeAnnotation: "true"}
		return r.env.Client.Patch(ctx, kcp, patch)
	}
	return nil
}

// apiServerArgs sets a KubeadmControlPlane's
// clusterConfiguration.apiServer.extraArgs to args (sorted by name, as
// CAPI's v1beta2 list), before KCP creates its first Machine from it.
func apiServerArgs(args map[string]string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		if len(args) == 0 || o.GetKind() != "KubeadmControlPlane" {
			return nil
		}
		var list []any
		for _, name := range slices.Sorted(maps.Keys(args)) {
			list = append(list, map[string]any{"name": name, "value": args[name]})
		}
		return unstructured.SetNestedSlice(o.Object, list, "spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer", "extraArgs")
	}
}

// unhealthyNode is a health check's Node conditions: Ready Unknown (the
// kubelet stopped reporting) or False, for its timeout.
func unhealthyNode(hc *scenario.HealthCheck) []clusterv1.UnhealthyNodeCondition {
	secs := ptr.To(int32(hc.UnhealthyAfter.Seconds()))
	return []clusterv1.UnhealthyNodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: secs},
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: secs},
	}
}

// createHealthChecks adds a plain cluster's MachineHealthChecks, as a
// user adds them beside the cluster.
func (r *run) createHealthChecks(ctx context.Context, hc *scenario.HealthCheck) error {
	for _, mhc := range healthChecks(r.env.Namespace, hc) {
		if err := r.env.Client.Create(ctx, mhc); err != nil {
			return fmt.Errorf("MachineHealthCheck %s: %w", mhc.Name, err)
		}
	}
	return nil
}

// healthChecks are a plain cluster's MachineHealthChecks: one for the
// control plane's Machines, one for the MachineDeployment's.
func healthChecks(namespace string, hc *scenario.HealthCheck) []*clusterv1.MachineHealthCheck {
	var out []*clusterv1.MachineHealthCheck
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{clusterName + "-cp", map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
		{clusterName + "-md", map[string]string{clusterv1.MachineDeploymentNameLabel: clusterName + "-md"}},
	} {
		out = append(out, &clusterv1.MachineHealthCheck{
			TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineHealthCheck"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: c.name},
			Spec: clusterv1.MachineHealthCheckSpec{ClusterName: clusterName, Selector: metav1.LabelSelector{MatchLabels: c.labels},
				Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: unhealthyNode(hc)}},
		})
	}
	return out
}

// upgrade moves the cluster to the to-release as a user would: a version
// bump of the topology, or new machine templates and the KCP and
// MachineDeployment pointed at them.
func (r *run) upgrade(ctx context.Context) error {
	return r.moveTo(ctx, r.scenario.To, "to")
}

// revert is the user going back to the from-release after a failed
// update: the same edits as the upgrade, to the from-templates (which
// the provisioning created), except CoreDNS: KCP's webhook refuses to
// migrate CoreDNS down, so its dns.imageTag stays as the upgrade asked
// (and KCP moves CoreDNS to it once the Machines are up to date). Only a
// plain cluster can be reverted: CAPI's Cluster webhook refuses to
// decrease spec.topology.version.
func (r *run) revert(ctx context.Context) error {
	return r.moveTo(ctx, r.scenario.From, "from")
}

// moveTo points the cluster at rel (its templates named by suffix), as a
// user upgrading (or reverting) would.
func (r *run) moveTo(ctx context.Context, to scenario.Release, suffix string) error {
	v, err := r.vars(ctx, to, suffix)
	if err != nil {
		return err
	}
	if r.form == scenario.ClusterClass {
		return r.patchCluster(ctx, func(c *clusterv1.Cluster) {
			c.Spec.Topology.Version = to.Version
			for i := range c.Spec.Topology.Variables {
				if c.Spec.Topology.Variables[i].Name == "nicFirmwareURL" {
					c.Spec.Topology.Variables[i].Value.Raw, _ = json.Marshal(v["NIC_FIRMWARE_URL"])
				}
			}
		})
	}
	reverting := suffix == "from"
	if !reverting {
		if err := r.apply(ctx, "machine-templates.yaml", v); err != nil {
			return err
		}
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.env.Namespace, Name: clusterName + "-cp"}, kcp); err != nil {
		return err
	}
	// Patches, not updates: KCP and the single-node controller write the
	// same objects at any moment, and a patch of the fields meant cannot
	// conflict with them.
	kcpPatch := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Version = to.Version
	if kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag != "" && !reverting { // the templates have KCP manage CoreDNS
		kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.DNS.ImageTag = v["COREDNS_VERSION"]
	}
	kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name = clusterName + "-cp-" + suffix
	if err := r.patchAsUser(ctx, kcp, kcpPatch); err != nil {
		return err
	}
	md := &clusterv1.MachineDeployment{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.env.Namespace, Name: clusterName + "-md"}, md); err != nil {
		return err
	}
	mdPatch := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.Version = to.Version
	md.Spec.Template.Spec.InfrastructureRef.Name = clusterName + "-md-" + suffix
	return r.env.Client.Patch(ctx, md, mdPatch)
}

// StepWriteRefused is the timeline's step for a user's write refused
// because an admission webhook could not be called.
const StepWriteRefused = "write-refused"

// patchAsUser patches obj as a user or a GitOps tool would: a write
// refused because an admission webhook could not be called (its server
// down, as a fail-closed webhook refuses then) is sent again every
// second until it goes through. The first refusal is a step on the
// timeline and a progress line, so the report shows when the change
// waited and why.
func (r *run) patchAsUser(ctx context.Context, obj client.Object, patch client.Patch) error {
	refused := false
	for {
		err := r.env.Client.Patch(ctx, obj, patch)
		if err == nil || !webhookUnreachable(err) {
			if err == nil && refused {
				r.say("the write of %s went through", obj.GetName())
			}
			return err
		}
		if !refused {
			refused = true
			r.say("the write of %s was refused (%v); sending it again, as a user or GitOps would", obj.GetName(), err)
			r.tl.Step(StepWriteRefused, fmt.Sprintf("%s: %v", obj.GetName(), err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// webhookUnreachable says whether the API server refused a write because
// it could not call an admission webhook.
func webhookUnreachable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

func (r *run) patchCluster(ctx context.Context, change func(*clusterv1.Cluster)) error {
	c := &clusterv1.Cluster{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.env.Namespace, Name: clusterName}, c); err != nil {
		return err
	}
	patch := client.MergeFrom(c.DeepCopy())
	change(c)
	return r.env.Client.Patch(ctx, c, patch)
}
