package mgmt

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/mgmt/kind"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// On kind, every manager runs as a Deployment in its own namespace, with
// the ServiceAccount and RBAC its config/default deploys it with (rbac.go
// makes them, as for the embedded plane, and here the Pod really runs as
// that ServiceAccount, with its token). What `clusterctl init` would do
// from a provider's components YAML the harness does from the same
// config folders, without clusterctl and cert-manager (no cert-manager
// image can be pulled here, and clusterctl insists on installing it):
//
//   - image: the manager's static binary as the only file of a one-layer
//     image (upgradelab.local/NAME:HASH, its content's hash), loaded into
//     the node as `kind load image-archive` does;
//   - webhooks: a Service per manager (NAME-webhook, port 443 to the
//     manager's webhook port), and the webhook configurations and CRD
//     conversions pointing at it, as config/webhook and the CRD patches
//     do;
//   - certificates, cert-manager's part: the plane's CA signs one serving
//     certificate for every manager's Service name
//     (NAME-webhook.NAMESPACE.svc), stored as the Secret each Deployment
//     mounts at controller-runtime's certificate folder, and the CA is
//     the caBundle of every webhook and conversion (cainjector's job);
//   - files a manager's flags name on this machine (a provider's CA or
//     client certificate) are copied into a Secret and mounted at the
//     same path, so the flags stay as they are.
//
// The Pods run in the node's network (hostNetwork), where e2e/mgmt/kind
// routes the lab's loopback addresses to the host; their ports are the
// ones the plane picked for them, distinct as on the host.

// podCertDir is where controller-runtime looks for the webhook serving
// certificate by default; the Deployments mount it there.
const podCertDir = "/tmp/k8s-webhook-server/serving-certs"

// managerLabel selects a manager's Pods.
const managerLabel = "upgradelab.dev/manager"

// podArgs are a manager's flags in a Pod: those of the host process
// (managerSpec.args) but in-cluster credentials, the certificate folder
// the Pod mounts, and a health address the kubelet can probe.
func (m managerSpec) podArgs(ports managerPorts) []string {
	var args []string
	for _, a := range m.args(podCertDir, ports) {
		switch {
		case strings.HasPrefix(a, "--kubeconfig="):
			continue
		case strings.HasPrefix(a, "--health-addr="):
			a = "--health-addr=:" + strconv.Itoa(ports.health)
		}
		args = append(args, a)
	}
	return args
}

// webhookServiceName is a manager's webhook Service.
func webhookServiceName(m managerSpec) string { return m.name + "-webhook" }

// fileMounts finds the flags that name a file or folder on this machine
// and copies those into a Secret (key fN) mounted at the same path.
func fileMounts(args []string) (data map[string][]byte, mounts []corev1.VolumeMount, items []corev1.KeyToPath, err error) {
	data = map[string][]byte{}
	add := func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		key := "f" + strconv.Itoa(len(data))
		data[key] = b
		items = append(items, corev1.KeyToPath{Key: key, Path: key})
		mounts = append(mounts, corev1.VolumeMount{Name: "files", MountPath: path, SubPath: key, ReadOnly: true})
		return nil
	}
	for _, a := range args {
		_, value, ok := strings.Cut(a, "=")
		if !ok || !filepath.IsAbs(value) {
			continue
		}
		info, err := os.Stat(value)
		if err != nil {
			continue // a path the manager creates, or not a path
		}
		if !info.IsDir() {
			if err := add(value); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		entries, err := os.ReadDir(value)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				if err := add(filepath.Join(value, e.Name())); err != nil {
					return nil, nil, nil, err
				}
			}
		}
	}
	return data, mounts, items, nil
}

// podObjects are a manager's Secrets, Service and Deployment.
func podObjects(m managerSpec, namespace, serviceAccount, image string, ports managerPorts, certs map[string][]byte) ([]client.Object, error) {
	args := m.podArgs(ports)
	files, mounts, items, err := fileMounts(args)
	if err != nil {
		return nil, fmt.Errorf("manager %s: files its flags name: %w", m.name, err)
	}
	labels := map[string]string{managerLabel: m.name}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
	}
	var env []corev1.EnvVar
	for _, kv := range m.env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	certSecret := &corev1.Secret{ObjectMeta: meta(m.name + "-webhook-service-cert"), Type: corev1.SecretTypeTLS, Data: certs}
	fileSecret := &corev1.Secret{ObjectMeta: meta(m.name + "-files"), Data: files}
	service := &corev1.Service{ObjectMeta: meta(webhookServiceName(m)), Spec: corev1.ServiceSpec{
		Selector: labels,
		Ports:    []corev1.ServicePort{{Name: "webhook", Port: 443, TargetPort: intstr.FromInt(ports.webhook)}},
	}}
	pod := corev1.PodSpec{
		ServiceAccountName: serviceAccount,
		HostNetwork:        true,
		DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
		Tolerations:        []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{{
			Name: "manager", Image: image, ImagePullPolicy: corev1.PullNever, Args: args, Env: env,
			Ports: []corev1.ContainerPort{{Name: "webhook", ContainerPort: int32(ports.webhook)}, {Name: "healthz", ContainerPort: int32(ports.health)}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt(ports.health)}},
				PeriodSeconds: 1},
			VolumeMounts: append([]corev1.VolumeMount{{Name: "cert", MountPath: podCertDir, ReadOnly: true}}, mounts...),
		}},
		Volumes: []corev1.Volume{
			{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: certSecret.Name}}},
			{Name: "files", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: fileSecret.Name, Items: items}}},
		},
		TerminationGracePeriodSeconds: ptr.To[int64](10),
	}
	deploy := &appsv1.Deployment{ObjectMeta: meta(m.name + "-controller-manager"), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		// Host ports: the old Pod must be gone before the new one binds.
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
	}}
	return []client.Object{certSecret, fileSecret, service, deploy}, nil
}

// certSecretData reads the plane's serving certificate for the Secrets.
func certSecretData(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// podManager is one manager running in the cluster.
type podManager struct {
	spec       managerSpec
	namespace  string
	deployment string
}

// deployManagers builds and loads every manager's image, installs its
// objects and waits until each Deployment's Pod is ready.
func (p *Plane) deployManagers(ctx context.Context, managers []managerSpec, certDir string, ports map[string]managerPorts, timeout time.Duration) error {
	certs, err := certSecretData(certDir)
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	for _, m := range managers {
		id := m.id
		image, path, err := kind.BinaryImage(m.binary, m.name, filepath.Join(CacheDir(), "images"))
		if err != nil {
			return err
		}
		if err := p.kind.LoadImage(image, path); err != nil {
			return fmt.Errorf("manager %s: %w", m.name, err)
		}
		objs, err := podObjects(m, id.namespace, id.serviceAccount, image, ports[m.name], certs)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := createOrReplace(ctx, p.Client, obj); err != nil {
				return fmt.Errorf("manager %s: installing %T %s: %w", m.name, obj, obj.GetName(), err)
			}
		}
		p.installed = append(p.installed, objs...)
		p.pods = append(p.pods, &podManager{spec: m, namespace: id.namespace, deployment: objs[len(objs)-1].GetName()})
	}
	clientset, err := kubernetes.NewForConfig(p.RESTConfig)
	if err != nil {
		return err
	}
	p.clientset = clientset
	logCtx, stopLogs := context.WithCancel(context.Background())
	p.stopLogs = stopLogs
	for _, pm := range p.pods {
		go p.followLogs(logCtx, pm)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, pm := range p.pods {
		if err := p.waitPodReady(ctx, pm, ""); err != nil {
			return err
		}
		if err := p.waitServiceReachable(ctx, pm); err != nil {
			return err
		}
	}
	return nil
}

// waitServiceReachable waits until the manager's webhook Service takes
// connections in the node, where the API server dials it: a ready Pod is
// not enough, its endpoint must reach kube-proxy's rules too (a run that
// did not wait had the API server's first webhook calls refused).
func (p *Plane) waitServiceReachable(ctx context.Context, pm *podManager) error {
	svc := &corev1.Service{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: pm.namespace, Name: webhookServiceName(pm.spec)}, svc); err != nil {
		return fmt.Errorf("manager %s: webhook Service: %w", pm.spec.name, err)
	}
	var last error
	for {
		// bash's /dev/tcp: a TCP connection from the node's network.
		if _, last = p.kind.Run("bash", "-c", "exec 3<>/dev/tcp/"+svc.Spec.ClusterIP+"/443"); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manager %s: Service %s/%s (%s:443) takes no connection from the node: %w (last: %w)",
				pm.spec.name, pm.namespace, svc.Name, svc.Spec.ClusterIP, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPodReady waits until a Pod of the manager other than old is Ready.
func (p *Plane) waitPodReady(ctx context.Context, pm *podManager, old string) error {
	var last string
	for {
		pods := &corev1.PodList{}
		if err := p.Client.List(ctx, pods, client.InNamespace(pm.namespace), client.MatchingLabels{managerLabel: pm.spec.name}); err == nil {
			for _, pod := range pods.Items {
				if pod.Name == old || pod.DeletionTimestamp != nil {
					continue
				}
				last = podSummary(pod)
				for _, c := range pod.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manager %s: no ready Pod of Deployment %s/%s: %w (last seen: %s; log: %s)",
				pm.spec.name, pm.namespace, pm.deployment, ctx.Err(), cmp.Or(last, "no Pod"), filepath.Join(p.LogDir, pm.spec.name+".log"))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// podSummary says where a Pod is: its phase and each container's state.
func podSummary(pod corev1.Pod) string {
	parts := []string{pod.Name + " " + string(pod.Status.Phase)}
	for _, c := range pod.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			parts = append(parts, c.Name+" waiting: "+c.State.Waiting.Reason+" "+c.State.Waiting.Message)
		case c.State.Terminated != nil:
			parts = append(parts, c.Name+" terminated: "+c.State.Terminated.Reason+" exit "+strconv.Itoa(int(c.State.Terminated.ExitCode)))
		case c.State.Running != nil:
			parts = append(parts, c.Name+" running, restarts "+strconv.Itoa(int(c.RestartCount)))
		}
	}
	return strings.Join(parts, "; ")
}

// followLogs appends the manager's Pods' logs to LogDir/NAME.log, where
// the plane reads a host manager's (Forbidden, the timeline), following
// each new Pod in turn until ctx ends.
func (p *Plane) followLogs(ctx context.Context, pm *podManager) {
	f, err := os.OpenFile(filepath.Join(p.LogDir, pm.spec.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	followed := map[string]bool{}
	for ctx.Err() == nil {
		pods := &corev1.PodList{}
		_ = p.Client.List(ctx, pods, client.InNamespace(pm.namespace), client.MatchingLabels{managerLabel: pm.spec.name})
		sort.Slice(pods.Items, func(i, j int) bool {
			return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp)
		})
		for _, pod := range pods.Items {
			running := len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].State.Running != nil
			if followed[pod.Name] || !running {
				continue
			}
			followed[pod.Name] = true
			stream, err := p.clientset.CoreV1().Pods(pm.namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
			if err != nil {
				followed[pod.Name] = false
				continue
			}
			_, _ = io.Copy(f, stream)
			_ = stream.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// restartPod deletes a manager's Pod at once (no grace: a crash, an OOM
// kill) and waits until the Deployment's next Pod is ready.
func (p *Plane) restartPod(ctx context.Context, name string) error {
	for _, pm := range p.pods {
		if pm.spec.name != name {
			continue
		}
		pods := &corev1.PodList{}
		if err := p.Client.List(ctx, pods, client.InNamespace(pm.namespace), client.MatchingLabels{managerLabel: name}); err != nil {
			return err
		}
		var old string
		for _, pod := range pods.Items {
			old = pod.Name
			if err := p.Client.Delete(ctx, &pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		fmt.Fprintf(p.progress, "mgmt: %s Pod %s deleted without grace\n", name, old)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := p.waitPodReady(ctx, pm, old); err != nil {
			return err
		}
		return p.waitServiceReachable(ctx, pm)
	}
	return fmt.Errorf("mgmt: no manager %q", name)
}

// serviceNames are the DNS names of every manager's webhook Service, for
// the serving certificate.
func serviceNames(managers []managerSpec) []string {
	var out []string
	for _, m := range managers {
		svc := webhookServiceName(m) + "." + m.id.namespace
		out = append(out, svc+".svc", svc+".svc.cluster.local")
	}
	return out
}
