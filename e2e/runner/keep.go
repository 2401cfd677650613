package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Planes keeps one management plane between the runs of one process
// (Options.Planes), so that each run after the first starts only its own
// lab and provider, not kube-apiserver, etcd and CAPI's managers again:
// a plane's start is tens of seconds and several seconds of
// kube-apiserver's CPU on a loaded machine, a single-node run's largest
// cost.
//
// A run on a kept plane is a run of its own in every other way: its lab,
// its provider and extension (restarted with the lab's flags), a
// namespace of its own, its recorder. When it ends, its Cluster is paused
// and its namespace emptied (finalizers lifted, as nothing is left to
// release them), so the next run finds the plane as a fresh one would be
// but for an empty namespace. Runs that could tell the difference get a
// plane of their own: those with faults (a fault may act on the plane or
// on a manager), on Metal3's managers or Ironic, on a provider whose
// managers bind fixed ports, on real VMs or a non-embedded plane.
type Planes struct {
	// Dir holds the kept plane's logs; each run copies its part of them
	// into its own folder.
	Dir string

	mu   sync.Mutex
	key  string
	base *Env
	n    int
	// busy: a run has the plane and has not emptied its namespace yet (a
	// spec Ginkgo gave up on may still be emptying it).
	busy bool
}

// errPlaneBusy: the kept plane is still an earlier run's.
var errPlaneBusy = errors.New("the kept plane is still busy with an earlier run")

// Stop stops the kept plane.
func (k *Planes) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stop()
}

func (k *Planes) stop() {
	if k.base != nil {
		k.base.Stop()
		k.base = nil
	}
	k.busy = false
}

// StopIdle stops the kept plane unless a run has it: a run that starts a
// plane of its own does not leave a second one idle beside it. A nil
// Planes keeps nothing.
func (k *Planes) StopIdle() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.busy {
		k.stop()
	}
}

// release gives the plane back once its run has emptied its namespace;
// failed, it stops the plane and the next run starts its own.
func (k *Planes) release(failed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if failed {
		k.stop()
	}
	k.busy = false
}

// planeKey says which runs can share a plane: those whose plane would
// start alike.
func planeKey(o EnvOptions) string {
	return fmt.Sprintf("%s|%v|%v|%v|%v|%s", o.config().Path(), o.RateLimitedReconciles, o.ExtraFeatureGates, o.ManagerArgs, o.ControllerManager, o.Management)
}

// env is a run's environment on the kept plane: the plane started for
// it (the first run, or one whose plane differs from the kept one's) or
// the kept plane with the run's lab started and the provider pointed at
// it. The Env's Stop stops the run's part only.
func (k *Planes) env(ctx context.Context, o EnvOptions) (*Env, *keptMarks, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.busy {
		return nil, nil, errPlaneBusy
	}
	key := planeKey(o)
	if k.base != nil && k.key != key {
		k.stop()
	}
	if k.base == nil {
		k.n++
		o.PlaneDir = filepath.Join(k.Dir, fmt.Sprintf("plane-%d", k.n))
		e, err := StartEnv(ctx, o)
		if err != nil {
			return nil, nil, err
		}
		k.base, k.key, k.busy = e.detach(), key, true
		return e, &keptMarks{usage: planeUsage{}, logs: logMarks{}}, nil
	}
	from := &keptMarks{usage: usageOf(k.base.Plane), logs: marksOf(k.base.Plane.LogDir), refusals: k.base.Plane.RefusalsSoFar(), at: time.Now()}
	e, err := k.base.reuse(ctx, o)
	if err != nil {
		k.stop() // managers half restarted: the next run starts its own
		return nil, nil, err
	}
	k.busy = true
	return e, from, nil
}

// keptMarks are where a run on a kept plane began (a plane started for
// it: nothing used, no logs, no refusals, no crashes before it): the run
// is judged and profiled on what came after.
type keptMarks struct {
	usage    planeUsage
	logs     logMarks
	refusals mgmt.RefusalMark
	at       time.Time
}

// detach splits the plane off e: the Env returned keeps it (and stops
// it), e keeps its lab and namespace and stops only those.
func (e *Env) detach() *Env {
	base := &Env{Plane: e.Plane, Client: e.Client, cfg: e.cfg, labelsOf: e.labelsOf, watched: e.watched, planeStops: e.planeStops}
	e.planeStops = nil
	return base
}

// reuse starts the run's lab and its provider's managers on the kept
// plane (base), in a namespace of the run's own.
func (base *Env) reuse(ctx context.Context, o EnvOptions) (_ *Env, err error) {
	e := &Env{Plane: base.Plane, Client: base.Client, cfg: base.cfg, labelsOf: base.labelsOf, watched: &sharedCache{}}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	providers, err := e.managers(ctx, o)
	if err != nil {
		return nil, err
	}
	for _, p := range providers {
		if err := e.Plane.Restart(ctx, p.Name, p.Binary, p.Args); err != nil {
			return nil, fmt.Errorf("pointing %s at the run's lab: %w", p.Name, err)
		}
	}
	e.nsLabels = e.labelsFor(o.Strategy)
	if e.Namespace, err = e.newNamespace(ctx, e.nsLabels); err != nil {
		return nil, err
	}
	return e, nil
}

// sharesPlane says whether the run may take the kept plane (Planes says
// which runs may not).
func (r *run) sharesPlane() bool {
	p := r.provider
	if r.opts.Planes == nil || r.opts.Shared != nil || !p.Lab || p.Metal3Inventory() || len(p.FixedPorts()) > 0 ||
		len(r.scenario.Faults) > 0 || r.lab.Backend() != lab.BackendTest {
		return false
	}
	if k := r.opts.Management.Kind; k != "" && k != mgmt.Embedded {
		return false
	}
	return !slices.ContainsFunc(p.Managers, func(m provider.Manager) bool { return m.Reference != "baremetal" && m.Reference != "inplace" })
}

// planeUsage is what each process of a plane had used, by name.
type planeUsage map[string]mgmt.ProcessCPU

func usageOf(p *mgmt.Plane) planeUsage {
	out := planeUsage{}
	for _, c := range p.CPU() {
		out[c.Name] = c
	}
	return out
}

// stopKept ends a run on a kept plane: what each process used since the
// run began goes to its profile (a process started since, all it used;
// the peak RSS is the process's own), its managers' refusals to the
// timeline, its part of the plane's logs to its folder, and its
// namespace is emptied and its lab stopped.
func (r *run) stopKept(ctx context.Context) {
	for _, c := range r.env.Plane.CPU() {
		cpu := c.CPU
		if was, ok := r.keptFrom.usage[c.Name]; ok && was.PID == c.PID {
			cpu -= was.CPU
		}
		r.profile.CPU = append(r.profile.CPU, result.ProcessCPU{Name: c.Name, CPU: cpu, PeakRSS: c.PeakRSS})
	}
	r.recordForbidden()
	_ = r.timed(ctx, result.PhaseStop, func(ctx context.Context) error {
		// Run ends this, also after its timeout: the next run must find
		// the plane clean, or a plane of its own.
		err := r.env.emptyNamespace(context.WithoutCancel(ctx))
		r.env.Stop()
		logErr := copyLogs(r.env.Plane.LogDir, filepath.Join(r.opts.Dir, "mgmt", "mgmt"), r.keptFrom.logs)
		if err != nil {
			r.say("the kept plane is stopped, the next run starts its own: emptying namespace %s: %v", r.env.Namespace, err)
		}
		r.opts.Planes.release(err != nil)
		return logErr
	})
}

// logMarks are the sizes of the kept plane's logs when a run began.
type logMarks map[string]int64

func marksOf(dir string) logMarks {
	out := logMarks{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			out[f] = st.Size()
		}
	}
	return out
}

// copyLogs copies what the plane's logs in dir gained since from into
// to, one file each, so a run's folder holds its managers' logs.
func copyLogs(dir, to string, from logMarks) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		if err := copyFrom(f, filepath.Join(to, filepath.Base(f)), from[f]); err != nil {
			return err
		}
	}
	return nil
}

func copyFrom(src, dst string, offset int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := in.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// emptyNamespace leaves a kept plane as the next run should find it:
// the run's Clusters paused (CAPI's controllers and the extension then
// leave their objects alone), every object of the namespace deleted and
// its finalizers lifted, since nothing that would release them is left
// (the lab is stopping). The empty namespace stays: the plane runs no
// namespace controller.
func (e *Env) emptyNamespace(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(e.Plane.RESTConfig)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(e.Plane.RESTConfig)
	if err != nil {
		return err
	}
	clusters := dyn.Resource(clusterv1.GroupVersion.WithResource("clusters")).Namespace(e.Namespace)
	if err := pauseAll(ctx, clusters); err != nil {
		return fmt.Errorf("pausing the run's Clusters: %w", err)
	}
	lists, err := disc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return err
	}
	resources := deletable(lists)
	for {
		left, err := deleteAll(ctx, dyn, e.Namespace, resources)
		if err != nil || left == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s: %d object(s) still there: %w", e.Namespace, left, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deletable are the resources of lists whose objects in a namespace can
// be listed, patched and deleted together.
func deletable(lists []*metav1.APIResourceList) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "deletecollection") || !slices.Contains(r.Verbs, "patch") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out
}

// pauseAll sets spec.paused on every Cluster of a namespace.
func pauseAll(ctx context.Context, clusters dynamic.ResourceInterface) error {
	l, err := clusters.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range l.Items {
		if _, err := clusters.Patch(ctx, c.GetName(), types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// deleteAll deletes the namespace's objects of each resource (one
// request each) and lifts the finalizers of those left (in that order: a
// controller adds none to an object being deleted), and says how many
// were left.
func deleteAll(ctx context.Context, dyn dynamic.Interface, ns string, resources []schema.GroupVersionResource) (int, error) {
	left := 0
	for _, gvr := range resources {
		ri := dyn.Resource(gvr).Namespace(ns)
		// Refused for now (a ClusterClass still in use): the next round.
		_ = ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		l, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // a resource not served any more
		}
		for _, o := range l.Items {
			left++
			if len(o.GetFinalizers()) > 0 && o.GetDeletionTimestamp() != nil {
				_, _ = ri.Patch(ctx, o.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
	}
	return left, ctx.Err()
}
