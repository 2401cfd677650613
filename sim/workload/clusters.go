// Package workload runs the workload clusters that lab hosts join: CAPI's
// own in-memory API server and etcd emulation (sigs.k8s.io/cluster-api/test
// infrastructure/inmemory), one listener per cluster on loopback, serving
// certificates signed by the CAs CAPI generated for the cluster. Real
// kube-apiservers and etcds per workload cluster cannot run here (a 2-core
// machine, many clusters, each node rebooting); the in-memory server is the
// one KCP's own tests trust, and answers the calls CAPI makes: Nodes, Pods,
// ConfigMaps, DaemonSets and Deployments over the Kubernetes API, and
// etcd's MemberList/MemberRemove/MoveLeader/Status through port-forward.
package workload

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryclient "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"

	"github.com/upgradelab/upgradelab/internal/loopback"
)

// Clusters holds every workload cluster of a run behind one TLS mux.
type Clusters struct {
	manager inmemoryruntime.Manager
	mux     *inmemoryserver.WorkloadClustersMux
	host    string

	mu        sync.Mutex
	endpoints map[string]Endpoint
}

// Endpoint is where a workload cluster's API server answers; it is what
// Cluster.spec.controlPlaneEndpoint must say.
type Endpoint struct {
	Host string
	Port int32
}

// CA is a certificate authority as CAPI stores it in the cluster's secrets
// (<cluster>-ca, <cluster>-etcd).
type CA struct {
	Cert *x509.Certificate
	Key  *rsa.PrivateKey
}

// Start runs the in-memory runtime and the mux on loopback.
func Start(ctx context.Context) (*Clusters, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{cloudv1.AddToScheme, corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	manager := unconditionalUpdates{inmemoryruntime.NewManager(scheme)}
	if err := manager.Start(ctx); err != nil {
		return nil, fmt.Errorf("workload clusters: in-memory runtime: %w", err)
	}
	debugPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// Listener ports are chosen here (Create), never from the mux's range.
	mux, err := inmemoryserver.NewWorkloadClustersMux(manager, "127.0.0.1",
		inmemoryserver.CustomPorts{MinPort: 1, MaxPort: 1, DebugPort: debugPort})
	if err != nil {
		return nil, fmt.Errorf("workload clusters: mux: %w", err)
	}
	return &Clusters{manager: manager, mux: mux, host: "127.0.0.1", endpoints: map[string]Endpoint{}}, nil
}

// Stop closes every listener. Clients' watches keep connections open, so
// it waits at most two seconds for them before closing them anyway.
func (c *Clusters) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.mux.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Create makes an empty workload cluster (default namespaces, no API server
// yet) and reserves its endpoint. Creating one that exists returns its
// endpoint.
func (c *Clusters) Create(ctx context.Context, name string) (Endpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep, ok := c.endpoints[name]; ok {
		return ep, nil
	}
	port, err := freePort()
	if err != nil {
		return Endpoint{}, err
	}
	c.manager.AddResourceGroup(name)
	if _, err := c.mux.InitWorkloadClusterListener(name, port); err != nil {
		return Endpoint{}, fmt.Errorf("workload cluster %s: %w", name, err)
	}
	if err := c.mux.RegisterResourceGroup(name, name); err != nil {
		return Endpoint{}, fmt.Errorf("workload cluster %s: %w", name, err)
	}
	cl := c.client(name)
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespacePublic, metav1.NamespaceSystem} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns}}}
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return Endpoint{}, fmt.Errorf("workload cluster %s: namespace %s: %w", name, ns, err)
		}
	}
	ep := Endpoint{Host: c.host, Port: port}
	c.endpoints[name] = ep
	return ep, nil
}

func (c *Clusters) client(name string) inmemoryclient.Client {
	return c.manager.GetResourceGroup(name).GetClient()
}

// AdminConfig is an administrator's REST config for a cluster that has an
// API server, for the harness's own reads (checks, monitors).
func (c *Clusters) AdminConfig(name string) (*rest.Config, error) {
	c.mu.Lock()
	ep, ok := c.endpoints[name]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no workload cluster %s", name)
	}
	// Initialising an existing listener returns it.
	wcl, err := c.mux.InitWorkloadClusterListener(name, ep.Port)
	if err != nil {
		return nil, err
	}
	return wcl.RESTConfig()
}

// freePort is a port the mux binds later (see package loopback).
func freePort() (int32, error) {
	ports, err := loopback.Ports(1)
	if err != nil {
		return 0, err
	}
	return int32(ports[0]), nil
}
