package runner

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/scenario"
)

// The application a run deploys into the workload cluster before the
// upgrade, as an operator would with kubectl (through CAPI's kubeconfig):
// what the upgrade must drain around and bring back (scenario.Application).
const (
	appDeployment = "web"
	appDaemonSet  = "node-agent"
	appScratchPod = "scratch"
)

// appObjects are the application's objects for the scenario's cluster.
func (r *run) appObjects() []client.Object {
	a, c := r.scenario.Workload, r.scenario.Cluster
	ns := monitor.AppNamespace
	// On the control-plane nodes (a compact or single-node cluster, or
	// by choice) the pods tolerate their taint and select them; on the
	// workers the taint keeps them off the control plane.
	var tolerations []corev1.Toleration
	var selector map[string]string
	if a.NodesFor(c) == scenario.OnControlPlane {
		tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		selector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	}
	spec := func(name string) corev1.PodSpec {
		return corev1.PodSpec{Tolerations: tolerations, NodeSelector: selector, TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{Name: name, Image: appImage(name, "1")}}}
	}
	labels := func(app string) map[string]string { return map[string]string{"app": app} }
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: appDeployment},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(a.ReplicasFor(c))), Selector: &metav1.LabelSelector{MatchLabels: labels(appDeployment)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(appDeployment)}, Spec: spec(appDeployment)}}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: appDaemonSet},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels(appDaemonSet)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(appDaemonSet)},
					Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{Name: appDaemonSet, Image: appImage(appDaemonSet, "1")}}}}}},
	}
	scratch := spec(appScratchPod)
	scratch.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	scratch.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: appScratchPod, Labels: labels(appScratchPod)}, Spec: scratch})
	if field, value := a.Budget.Limit(); field != "" {
		bound := intstr.Parse(value)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: appDeployment},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels(appDeployment)}}}
		if field == "minAvailable" {
			pdb.Spec.MinAvailable = &bound
		} else {
			pdb.Spec.MaxUnavailable = &bound
		}
		objs = append(objs, pdb)
	}
	return objs
}

// appImage is the image of the application's container name at release
// ("1" as deployed, "2" after rollApp).
func appImage(name, release string) string { return "registry.example/" + name + ":" + release }

// rollApp moves the application's Deployment and DaemonSet to their
// second image (Application.RollDuringUpgrade): their controllers roll
// the pods within their strategies while the upgrade drains nodes.
func (r *run) rollApp(ctx context.Context) error {
	wl, err := r.workloadClient(ctx)
	if err != nil {
		return err
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: monitor.AppNamespace, Name: name}
	}
	dep, ds := &appsv1.Deployment{ObjectMeta: meta(appDeployment)}, &appsv1.DaemonSet{ObjectMeta: meta(appDaemonSet)}
	for _, o := range []struct {
		obj  client.Object
		spec *corev1.PodSpec
	}{{dep, &dep.Spec.Template.Spec}, {ds, &ds.Spec.Template.Spec}} {
		name := o.obj.GetName()
		if err := wl.Get(ctx, client.ObjectKeyFromObject(o.obj), o.obj); err != nil {
			return fmt.Errorf("rolling the application's %s: %w", name, err)
		}
		before := o.obj.DeepCopyObject().(client.Object)
		o.spec.Containers[0].Image = appImage(name, "2")
		if err := wl.Patch(ctx, o.obj, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("rolling the application's %s: %w", name, err)
		}
	}
	r.say("the application's %s and %s roll to their second image beside the upgrade", appDeployment, appDaemonSet)
	return nil
}

// deployApp creates the application and waits until every pod is Ready
// and its budget is computed: the upgrade starts from a healthy app.
func (r *run) deployApp(ctx context.Context, wl client.Client) error {
	for _, o := range r.appObjects() {
		if err := wl.Create(ctx, o); err != nil {
			return fmt.Errorf("deploying the application: %T %s: %w", o, o.GetName(), err)
		}
	}
	replicas := int32(r.scenario.Workload.ReplicasFor(r.scenario.Cluster))
	budgetField, _ := r.scenario.Workload.Budget.Limit()
	return r.wait(ctx, time.Minute, func(ctx context.Context) (progress, error) {
		ns := monitor.AppNamespace
		dep, ds, pod := &appsv1.Deployment{}, &appsv1.DaemonSet{}, &corev1.Pod{}
		for _, o := range []struct {
			name string
			obj  client.Object
		}{{appDeployment, dep}, {appDaemonSet, ds}, {appScratchPod, pod}} {
			if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.name}, o.obj); err != nil {
				return progress{}, err
			}
		}
		budgetReady := budgetField == ""
		if !budgetReady {
			pdb := &policyv1.PodDisruptionBudget{}
			if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: appDeployment}, pdb); err != nil {
				return progress{}, err
			}
			budgetReady = pdb.Status.CurrentHealthy == replicas
		}
		ready := dep.Status.ReadyReplicas == replicas && ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled &&
			monitor.PodReady(pod) && budgetReady
		return progress{done: ready, line: fmt.Sprintf("application: %d/%d %s ready, %s %d/%d, %s ready=%v",
			dep.Status.ReadyReplicas, replicas, appDeployment, appDaemonSet, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, appScratchPod, monitor.PodReady(pod))}, nil
	})
}
