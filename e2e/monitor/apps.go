package monitor

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// AppNamespace holds the application a run deploys (the runner's
// apps.go), which the recorder follows.
const AppNamespace = "apps"

// PodReady says whether a pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// joinLabels is "k=v,k=v" in key order.
func joinLabels(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// PodSummary is an application pod.
func PodSummary(p *corev1.Pod) map[string]string {
	s := map[string]string{vocab.FieldNode: p.Spec.NodeName, vocab.FieldPhase: string(p.Status.Phase), vocab.FieldLabels: joinLabels(p.Labels)}
	if ref := metav1.GetControllerOf(p); ref != nil {
		s[vocab.FieldOwner] = ref.Kind + "/" + ref.Name
	}
	set(s, vocab.FieldReady, PodReady(p))
	set(s, vocab.FieldTerminating, p.DeletionTimestamp != nil)
	return s
}

// BudgetSummary is a PodDisruptionBudget's selector and status.
func BudgetSummary(b *policyv1.PodDisruptionBudget) map[string]string {
	s := map[string]string{
		vocab.FieldDesired: strconv.Itoa(int(b.Status.DesiredHealthy)), vocab.FieldHealthy: strconv.Itoa(int(b.Status.CurrentHealthy)),
		vocab.FieldAllowed: strconv.Itoa(int(b.Status.DisruptionsAllowed)),
	}
	if b.Spec.Selector != nil {
		s[vocab.FieldSelector] = joinLabels(b.Spec.Selector.MatchLabels)
	}
	return s
}

// AppSummary is the application's Deployment.
func AppSummary(d *appsv1.Deployment) map[string]string {
	return map[string]string{vocab.FieldReplicas: count(d.Spec.Replicas), vocab.FieldReadyCount: strconv.Itoa(int(d.Status.ReadyReplicas)),
		vocab.FieldUpToDateCount: strconv.Itoa(int(d.Status.UpdatedReplicas))}
}

// apps lists the application's pods, budgets and Deployment.
func (r *Recorder) pods(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	l := &corev1.PodList{}
	if err := r.workload.List(ctx, l, client.InNamespace(AppNamespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = PodSummary(&l.Items[i])
	}
	return out, nil
}

func (r *Recorder) budgets(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	l := &policyv1.PodDisruptionBudgetList{}
	if err := r.workload.List(ctx, l, client.InNamespace(AppNamespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = BudgetSummary(&l.Items[i])
	}
	return out, nil
}

func (r *Recorder) apps(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	l := &appsv1.DeploymentList{}
	if err := r.workload.List(ctx, l, client.InNamespace(AppNamespace)); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for i := range l.Items {
		out[l.Items[i].Name] = AppSummary(&l.Items[i])
	}
	return out, nil
}

// api probes the workload API once per poll, as a user's client finds
// it: a read that fails (refused, dropped, or an error the server
// answers, such as etcd's timeout without quorum) is the API unavailable,
// since the first failing read began (a read hung on a connection the VIP
// dropped fails long after the drop).
func (r *Recorder) api(ctx context.Context) (map[string]map[string]string, error) {
	if r.workload == nil {
		return nil, nil
	}
	began := time.Now()
	ns := &corev1.Namespace{}
	err := r.workload.Get(ctx, client.ObjectKey{Name: metav1.NamespaceDefault}, ns)
	if err == nil || apierrors.IsNotFound(err) {
		r.apiDownFrom = time.Time{}
		return map[string]map[string]string{"api": {vocab.FieldAPIAvailable: "true"}}, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	if r.apiDownFrom.IsZero() { // poll every Interval until it answers
		r.apiDownFrom = began
	}
	return map[string]map[string]string{"api": {vocab.FieldAPIAvailable: "false", vocab.FieldAPIError: apiFailure(err),
		vocab.FieldAPIReadFrom: r.apiDownFrom.Format(time.RFC3339Nano)}}, nil
}

// apiFailure names how a read failed, briefly (the same failure polled
// again is no change).
func apiFailure(err error) string {
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &status):
		return strconv.Itoa(int(status.Status().Code)) + " " + status.Status().Message
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return err.Error()
}

// RecordWorkload writes the lab's workload cluster events for cluster
// (namespace/name) into the timeline until ctx ends: its VIP opening and
// closing, etcd members and health, evictions, pods stopped. Each event
// recorded calls wake (when not nil), as RecordLab's do.
func RecordWorkload(ctx context.Context, clusters *workload.Clusters, cluster string, tl *timeline.Timeline, wake func()) {
	events, cancel := clusters.Subscribe()
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Cluster != cluster {
				continue
			}
			fields := map[string]string{vocab.FieldReason: e.Reason, vocab.FieldMessage: e.Message}
			for k, v := range e.Data {
				fields[k] = v
			}
			name := e.Node
			if name == "" {
				name = e.Cluster
			}
			tl.Add(timeline.Entry{Time: e.Time, Kind: vocab.KindWorkloadEvent, Name: name, New: fields})
			if wake != nil {
				wake()
			}
		}
	}
}
