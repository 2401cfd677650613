package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/internal/vocab"
)

// NodeInfo is what a booted host's kubelet reports about itself.
type NodeInfo struct {
	Name         string
	ProviderID   string
	ControlPlane bool
	Labels       map[string]string
	// Annotations are added (node agents publish their endpoints there).
	Annotations map[string]string
	// Versions come from the booted image.
	KubeletVersion, ContainerRuntime, KernelVersion, OSImage string
	Ready                                                    bool
	// NotReadyReason explains Ready=false (e.g. the NIC link is down).
	NotReadyReason string
}

// SetNode creates or updates a Node as its kubelet would after a boot;
// from then on the node's kubelet runs its pods (apps.go).
func (c *Clusters) SetNode(ctx context.Context, cluster string, n NodeInfo) error {
	c.setKubelet(cluster, n.Name, true)
	cl := c.client(cluster)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	err := cl.Get(ctx, client.ObjectKeyFromObject(node), node)
	create := apierrors.IsNotFound(err)
	if err != nil && !create {
		return fmt.Errorf("workload cluster %s: node %s: %w", cluster, n.Name, err)
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range n.Labels {
		node.Labels[k] = v
	}
	if len(n.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range n.Annotations {
		node.Annotations[k] = v
	}
	node.Labels["kubernetes.io/hostname"] = n.Name
	node.Labels["kubernetes.io/os"] = "linux"
	node.Spec.ProviderID = n.ProviderID
	if n.ControlPlane {
		node.Labels["node-role.kubernetes.io/control-plane"] = ""
		node.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: n.KubeletVersion, ContainerRuntimeVersion: n.ContainerRuntime,
		KernelVersion: n.KernelVersion, OSImage: n.OSImage, OperatingSystem: "linux", Architecture: "amd64",
	}
	node.Status.Conditions = nodeConditions(n)
	if create {
		err = cl.Create(ctx, node)
	} else {
		err = cl.Update(ctx, node)
	}
	if err != nil {
		return fmt.Errorf("workload cluster %s: node %s: %w", cluster, n.Name, err)
	}
	return nil
}

func nodeConditions(n NodeInfo) []corev1.NodeCondition {
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastTransitionTime: now, LastHeartbeatTime: now}
	if !n.Ready {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "KubeletNotReady", n.NotReadyReason
	}
	return []corev1.NodeCondition{
		ready,
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastTransitionTime: now},
	}
}

// SetNodeNotReady marks a Node NotReady with reason and keeps everything
// else its kubelet last reported, as the node lifecycle controller does
// when a kubelet stops posting status.
func (c *Clusters) SetNodeNotReady(ctx context.Context, cluster, name, reason string) error {
	cl := c.client(cluster)
	node := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return fmt.Errorf("workload cluster %s: node %s: %w", cluster, name, err)
	}
	now := metav1.Now()
	for i := range node.Status.Conditions {
		if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", reason, now
		}
	}
	if err := cl.Update(ctx, node); err != nil {
		return fmt.Errorf("workload cluster %s: node %s: %w", cluster, name, err)
	}
	return nil
}

// staticPod is one kubeadm static pod of a control-plane node, as its
// mirror pod shows in the API (drains leave mirror pods alone).
func staticPod(component, node, version string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem, Name: component + "-" + node,
			Labels:      map[string]string{"component": component, "tier": "control-plane"},
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "mirror-" + component},
		},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":" + version}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// Release is what kubeadm installs on a node: the Kubernetes version of
// its control plane's static pods (the kubeadm-config's), the etcd it
// runs on a control-plane node, and the CoreDNS it deploys when it inits
// a cluster.
type Release struct {
	Kubernetes, Etcd, CoreDNS string
}

// JoinControlPlane makes node a control-plane member, or moves it to
// another release as `kubeadm upgrade node` does: its static pods at
// rel's versions with args (the extraArgs kubeadm wrote into their
// manifests), an API server instance serving with the cluster CA, and an
// etcd member (serving with the etcd CA) that the emulation lists to
// KCP. An existing etcd member keeps its identity and gets the new image.
//
// A component whose release refuses its args (the removals table,
// releases.go) exits at start and its kubelet restarts it for ever, as
// the real binary does: its mirror pod shows CrashLoopBackOff with the
// binary's error as its last termination message, which is what KCP
// reads, and a kube-apiserver that crash-loops takes no traffic on the
// VIP. Kinder than a real node: the crash loop is steady from the start
// (no first few restarts seen Running), and the mirror pod is written
// even when no other API server could take the kubelet's write.
func (c *Clusters) JoinControlPlane(ctx context.Context, cluster, node string, rel Release, args StaticPodArgs, clusterCA, etcdCA CA) error {
	etcd := staticPod("etcd", node, rel.Etcd)
	if err := c.prepareControlPlane(cluster, etcd.Name, clusterCA, etcdCA); err != nil {
		return err
	}
	apiRefused := removals.refusal(rel.Kubernetes, KubeAPIServer, args[KubeAPIServer])
	// A node that was a member already: the kubelet starts its static
	// pods from their manifests on disk, needing no API: its etcd member
	// starts and catches up, its API server takes traffic. The writes
	// below (mirror pods) need its vote when it is the only one.
	if c.hasMember(cluster, node) {
		c.setMember(cluster, node, MemberRunning, "its host booted")
		if err := c.runAPIServer(cluster, node, apiRefused); err != nil {
			return err
		}
	}
	cl := c.client(cluster)
	for _, component := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler} {
		pod := staticPod(component, node, rel.Kubernetes)
		if why := removals.refusal(rel.Kubernetes, component, args[component]); why != "" {
			crashLooping(pod, why)
			c.emit(Event{Cluster: cluster, Node: node, Reason: vocab.EventStaticPodCrashLoop,
				Message: fmt.Sprintf("%s on %s (%s) exits at start and crash-loops: %s", component, node, rel.Kubernetes, why)})
		}
		if err := createOrUpdate(ctx, cl, pod); err != nil {
			return fmt.Errorf("workload cluster %s: %s: %w", cluster, component, err)
		}
	}
	existing := &corev1.Pod{}
	switch err := cl.Get(ctx, client.ObjectKeyFromObject(etcd), existing); {
	case apierrors.IsNotFound(err):
		clusterID, hasLeader, err := etcdClusterInfo(ctx, cl)
		if err != nil {
			return err
		}
		etcd.Annotations[cloudv1.EtcdClusterIDAnnotationName] = clusterID
		etcd.Annotations[cloudv1.EtcdMemberIDAnnotationName] = strconv.FormatUint(uint64(rand.Uint32())|1, 10)
		if !hasLeader {
			etcd.Annotations[cloudv1.EtcdLeaderFromAnnotationName] = time.Now().Format(time.RFC3339)
		}
		// Member add: it needs the quorum the cluster has now. A join of
		// the same node that won the race (two boots' kubelets) made it.
		if err := cl.Create(ctx, etcd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("workload cluster %s: etcd member %s: %w", cluster, node, err)
		}
	case err != nil:
		return err
	case len(existing.Spec.Containers) > 0 && existing.Spec.Containers[0].Image != etcd.Spec.Containers[0].Image:
		existing.Spec.Containers[0].Image = etcd.Spec.Containers[0].Image
		if err := cl.Update(ctx, existing); err != nil {
			return fmt.Errorf("workload cluster %s: etcd member %s to %s: %w", cluster, node, rel.Etcd, err)
		}
	}
	c.setMember(cluster, node, MemberRunning, "its host booted")
	return c.runAPIServer(cluster, node, apiRefused)
}

// crashLooping makes pod's status what the kubelet reports of a
// container that exits at start (why: its last words): Running, not
// Ready, waiting in CrashLoopBackOff after an exit with code 1. kubeadm's
// manifests set terminationMessagePolicy FallbackToLogsOnError, so the
// error is the termination message.
func crashLooping(pod *corev1.Pod, why string) {
	name := pod.Spec.Containers[0].Name
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
		Message: "containers with unready status: [" + name + "]"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: name, Image: pod.Spec.Containers[0].Image, RestartCount: 5,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: "back-off 2m40s restarting failed container=" + name + " pod=" + pod.Name + "_" + pod.Namespace}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: why}},
	}}
}

// prepareControlPlane makes the serving certificates a control-plane
// node brings (the CAs from its bootstrap data).
func (c *Clusters) prepareControlPlane(name, etcdPod string, clusterCA, etcdCA CA) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok {
		return fmt.Errorf("no workload cluster %s", name)
	}
	if err := c.setClusterCA(w, clusterCA); err != nil {
		return err
	}
	return c.addEtcdServing(w, etcdPod, etcdCA)
}

func (c *Clusters) hasMember(name, node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok {
		return false
	}
	_, member := w.members[node]
	return member
}

// runAPIServer is node's kube-apiserver started by its kubelet: it
// takes requests (and the VIP, vip.go), or, refused (its exit message)
// or without a running etcd member of its own, it takes none.
func (c *Clusters) runAPIServer(name, node, refused string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.clusters[name]
	if !ok {
		return fmt.Errorf("no workload cluster %s", name)
	}
	switch {
	case refused != "":
		c.apiServerStopped(w, node, "crash-loops ("+refused+")", false)
		return nil
	case w.members[node] != MemberRunning:
		c.apiServerStopped(w, node, "has no etcd member of its own", false)
		return nil
	}
	return c.apiServerStarted(w, node)
}

// etcdClusterInfo reads the etcd cluster id and whether a leader exists
// from the etcd pods already there.
func etcdClusterInfo(ctx context.Context, cl inmemoryclient.Client) (clusterID string, hasLeader bool, err error) {
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"component": "etcd"}); err != nil {
		return "", false, err
	}
	for _, p := range pods.Items {
		if _, removed := p.Annotations[cloudv1.EtcdMemberRemoved]; removed {
			continue
		}
		clusterID = p.Annotations[cloudv1.EtcdClusterIDAnnotationName]
		if _, ok := p.Annotations[cloudv1.EtcdLeaderFromAnnotationName]; ok {
			hasLeader = true
		}
	}
	if clusterID == "" {
		clusterID = strconv.FormatUint(uint64(rand.Uint32())|1, 10)
	}
	return clusterID, hasLeader, nil
}

func createOrUpdate(ctx context.Context, cl inmemoryclient.Client, obj client.Object) error {
	existing := obj.DeepCopyObject().(client.Object)
	err := cl.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if apierrors.IsNotFound(err) {
		return cl.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	obj.SetAnnotations(existing.GetAnnotations())
	return cl.Update(ctx, obj)
}

// NodeReady reads a Node's Ready condition as the API server holds it.
func (c *Clusters) NodeReady(ctx context.Context, cluster, name string) (bool, string, error) {
	node := &corev1.Node{}
	if err := c.client(cluster).Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return false, "", err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, cond.Message, nil
		}
	}
	return false, "no Ready condition", nil
}

func (c *Clusters) setKubelet(name, node string, running bool) {
	c.mu.Lock()
	w, ok := c.clusters[name]
	if !ok {
		c.mu.Unlock()
		return
	}
	started := running && !w.apps.kubelets[node]
	if w.apps.kubelets[node] != running {
		w.apps.kubeletChanges++
	}
	w.apps.kubelets[node] = running
	if started {
		// Its containers start again: a pod it ran is Ready again only
		// after the start time (apps.go).
		w.apps.kubeletStarted[node] = time.Now()
	}
	c.mu.Unlock()
	if started {
		c.emit(Event{Cluster: name, Node: node, Reason: vocab.EventNodeStarted, Message: "the kubelet of " + node + " started"})
	}
}
