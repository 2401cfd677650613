package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/clustertemplate"
	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// A sandbox is a scenario's world with no one driving it: the plane, the
// lab with its hosts enrolled, the provider and the extension, and the
// recorders writing the timeline, as a run has them before its step 3.
// The user creates and upgrades the cluster by hand (kubectl apply of
// the rendered files), and the timeline is judged afterwards with the
// same rules (`upgradelab check`). The upgrade step is recorded when the
// cluster's version first moves off the from-release; the done step when
// the sandbox stops.

// SandboxFile names the sandbox's description in its folder.
const SandboxFile = "sandbox.json"

// Sandbox is a running sandbox. Its exported fields are also written to
// Dir/sandbox.json, for scripts.
type Sandbox struct {
	Dir        string `json:"dir"`
	Kubeconfig string `json:"kubeconfig"`
	Namespace  string `json:"namespace"`
	Cluster    string `json:"cluster"`
	// ClusterFile creates the cluster at the from-release; UpgradeFile
	// moves it to the to-release (kubectl apply -f each).
	ClusterFile string `json:"clusterFile"`
	UpgradeFile string `json:"upgradeFile"`
	From        string `json:"from"`
	To          string `json:"to"`

	run           *run
	stopRecording context.CancelFunc
	// watching is closed when watchUpgrade ends (nil: never started).
	watching chan struct{}
}

// StartSandbox brings up s's world on def for the form (plain or
// clusterclass) and renders its cluster files; Stop ends it.
func StartSandbox(ctx context.Context, s *scenario.Scenario, def *lab.Definition, form scenario.Form, o Options) (_ *Sandbox, err error) {
	r := &run{provider: o.Provider, scenario: s, lab: def, form: form, opts: o, prefix: "[sandbox " + s.Name + "/" + string(form) + "]"}
	if r.provider == nil {
		if r.provider, err = provider.Load(filepath.Join(o.RepoRoot, DefaultProvider)); err != nil {
			return nil, err
		}
	}
	if ok, why := r.provider.Runs(s); !ok {
		return nil, fmt.Errorf("sandbox: %s", why)
	}
	r.slowToIronic()
	r.scenario = s.AtScale(r.opts.Scale)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if r.tl, err = timeline.Create(filepath.Join(o.Dir, result.TimelineFile)); err != nil {
		return nil, err
	}
	sb := &Sandbox{Dir: o.Dir, run: r, Cluster: clusterName, From: s.From.Version, To: s.To.Version}
	defer func() {
		if err != nil {
			sb.Stop()
		}
	}()
	if err := r.build(ctx); err != nil {
		return sb, err
	}
	if err := r.start(ctx); err != nil {
		return sb, err
	}
	sb.Kubeconfig, sb.Namespace = r.env.Plane.Kubeconfig, r.env.Namespace
	r.tl.Step("env", "plane and lab up")
	recCtx, stop := context.WithCancel(context.Background())
	sb.stopRecording = stop
	if r.watched, err = monitor.WatchedReader(recCtx, r.env.Plane.RESTConfig, reference.Scheme(), r.env.Namespace); err != nil {
		return sb, err
	}
	rec := &monitor.Recorder{Management: r.watched, Namespace: r.env.Namespace, Timeline: r.tl,
		Workload: r.workloadClient, Hosts: r.provider.Lab, SpareLabel: r.provider.Hosts.SpareLabel}
	go rec.Run(recCtx)
	if r.provider.Lab {
		go monitor.RecordLab(recCtx, r.env.Site.Lab, r.tl, nil, rec.Wake)
		go monitor.RecordWorkload(recCtx, r.env.Site.Workloads, r.env.Namespace+"/"+clusterName, r.tl, rec.Wake)
	}
	if err := r.enrollHosts(ctx); err != nil {
		return sb, err
	}
	if err := sb.render(ctx); err != nil {
		return sb, err
	}
	sb.watching = make(chan struct{})
	go sb.watchUpgrade(recCtx)
	b, _ := json.MarshalIndent(sb, "", "  ")
	return sb, os.WriteFile(filepath.Join(o.Dir, SandboxFile), b, 0o644)
}

// render writes the cluster at the from-release and the upgrade to the
// to-release as the provider config's templates make them, the edits
// the runner would make included (the single-node annotation, health
// checks).
func (sb *Sandbox) render(ctx context.Context) error {
	r := sb.run
	from, err := r.vars(ctx, r.scenario.From, "from")
	if err != nil {
		return err
	}
	to, err := r.vars(ctx, r.scenario.To, "to")
	if err != nil {
		return err
	}
	var create, upgrade []string
	if r.form == scenario.ClusterClass {
		create, upgrade = []string{"clusterclass.yaml", "cluster-topology.yaml"}, []string{"cluster-topology.yaml"}
	} else {
		create, upgrade = []string{"machine-templates.yaml", "cluster.yaml"}, []string{"machine-templates.yaml", "cluster.yaml"}
	}
	sb.ClusterFile, sb.UpgradeFile = filepath.Join(sb.Dir, "cluster.yaml"), filepath.Join(sb.Dir, "upgrade.yaml")
	if err := sb.writeRendered(sb.ClusterFile, create, from); err != nil {
		return err
	}
	return sb.writeRendered(sb.UpgradeFile, upgrade, to)
}

func (sb *Sandbox) writeRendered(path string, templates []string, vars map[string]string) error {
	r := sb.run
	var out bytes.Buffer
	for _, t := range templates {
		objs, err := clustertemplate.Render(filepath.Join(r.provider.TemplatesDir(), t), vars)
		if err != nil {
			return err
		}
		for _, o := range objs {
			sb.edit(o)
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			out.WriteString("---\n")
			out.Write(b)
		}
	}
	if hc := r.scenario.Cluster.HealthCheck; hc != nil && r.form == scenario.Plain && path == sb.ClusterFile {
		for _, mhc := range healthChecks(r.env.Namespace, hc) {
			b, err := yaml.Marshal(mhc)
			if err != nil {
				return err
			}
			out.WriteString("---\n")
			out.Write(b)
		}
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// edit makes on a rendered object what createCluster makes after
// creating it: a one-replica in-place control plane opts into the
// provider's single-node handling.
func (sb *Sandbox) edit(o *unstructured.Unstructured) {
	r := sb.run
	s := r.scenario
	if s.Strategy != scenario.InPlace || s.Cluster.ControlPlane.Replicas != 1 || r.provider.SingleNodeAnnotation == "" {
		return
	}
	switch {
	case o.GetKind() == "KubeadmControlPlane":
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[r.provider.SingleNodeAnnotation] = "true"
		o.SetAnnotations(a)
	case o.GetKind() == "Cluster" && r.form == scenario.ClusterClass:
		_ = unstructured.SetNestedStringMap(o.Object, map[string]string{r.provider.SingleNodeAnnotation: "true"}, "spec", "topology", "controlPlane", "metadata", "annotations")
	}
}

// watchUpgrade records the upgrade step the first time the control
// plane or a MachineDeployment asks for another version than the
// from-release's, then follows the rollout with a run's progress lines
// and says when it is done and settled (what a run waits for before it
// judges).
func (sb *Sandbox) watchUpgrade(ctx context.Context) {
	defer close(sb.watching)
	r := sb.run
	for {
		if to, ok := sb.versionAsked(ctx); ok && to != r.scenario.From.Version {
			r.tl.Step(check.StepUpgrade, fmt.Sprintf("%s -> %s (by hand)", r.scenario.From.Version, to))
			r.say("the cluster asks for %s: upgrade step recorded", to)
			if err := r.waitRolledOut(ctx, to, "upgrade", r.provider.Intervals.Upgrade.Duration); err != nil {
				r.say("upgrade: %v", err)
				return
			}
			r.settle(ctx, DefaultSettle, r.scenario.Expect.Outcome)
			r.say("upgrade done: every Machine up to date at %s, CAPI's Cluster settled; Ctrl-C stops the sandbox for upgradelab check", to)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pollEvery):
		}
	}
}

// versionAsked is the version the control plane asks for, or a
// MachineDeployment's when it differs.
func (sb *Sandbox) versionAsked(ctx context.Context) (string, bool) {
	r := sb.run
	kcps := &controlplanev1.KubeadmControlPlaneList{}
	mds := &clusterv1.MachineDeploymentList{}
	if r.watched.List(ctx, kcps, client.InNamespace(r.env.Namespace)) != nil || r.watched.List(ctx, mds, client.InNamespace(r.env.Namespace)) != nil {
		return "", false
	}
	asked := ""
	for _, k := range kcps.Items {
		if k.Spec.Version != r.scenario.From.Version {
			return k.Spec.Version, true
		}
		asked = k.Spec.Version
	}
	for _, md := range mds.Items {
		if md.Spec.Template.Spec.Version != r.scenario.From.Version {
			return md.Spec.Template.Spec.Version, true
		}
		asked = md.Spec.Template.Spec.Version
	}
	return asked, asked != ""
}

// Stop records the done step, writes params.json (so `upgradelab check
// DIR` judges the timeline), and stops everything.
func (sb *Sandbox) Stop() {
	r := sb.run
	if r.env != nil {
		if r.watched != nil {
			r.tl.Step(check.StepDone, "the sandbox stopped")
		}
		r.recordForbidden()
	}
	if sb.stopRecording != nil {
		sb.stopRecording()
	}
	if sb.watching != nil {
		<-sb.watching
	}
	if r.env != nil {
		r.env.Stop()
	}
	if r.tl != nil {
		p := Params(r.scenario, r.lab, r.provider, r.tl.Entries())
		p.Scale = r.opts.Scale
		// No data was written and no application deployed (a run's step
		// 4): the rules about them have nothing to judge.
		p.HostData, p.OSTreeHosts, p.WorkloadData, p.Apps = false, false, false, false
		if b, err := json.MarshalIndent(p, "", "  "); err == nil {
			_ = os.WriteFile(filepath.Join(sb.Dir, result.ParamsFile), b, 0o644)
		}
		r.tl.Close()
	}
}
