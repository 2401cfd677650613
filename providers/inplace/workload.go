package inplace

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Workloads gives a client of each workload cluster, from the kubeconfig
// secret CAPI writes (<cluster>-kubeconfig), kept per cluster.
type Workloads struct {
	Management client.Client
	Scheme     *runtime.Scheme

	mu      sync.Mutex
	clients map[string]client.Client
}

// Client reaches namespace/cluster's API server.
func (w *Workloads) Client(ctx context.Context, namespace, cluster string) (client.Client, error) {
	key := namespace + "/" + cluster
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.clients[key]; ok {
		return c, nil
	}
	secret := &corev1.Secret{}
	if err := w.Management.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + "-kubeconfig"}, secret); err != nil {
		return nil, fmt.Errorf("kubeconfig of cluster %s: %w", key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of cluster %s: %w", key, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: w.Scheme})
	if err != nil {
		return nil, err
	}
	if w.clients == nil {
		w.clients = map[string]client.Client{}
	}
	w.clients[key] = c
	return c, nil
}
