package mgmt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Bare is a Kubernetes cluster with nothing of CAPI in it: an API server,
// etcd and kube-controller-manager's garbage collector, namespace and
// ClusterRole aggregation controllers, as any cluster has. It stands for
// a user's existing cluster (--management kubeconfig=PATH) where no other
// is at hand: the plane installs CAPI into it as it would into theirs.
// It is kinder than a real one in having no nodes, so the managers run
// beside it, out of cluster, as they do on any kubeconfig target that is
// not kind.
type Bare struct {
	// Kubeconfig is the cluster's admin kubeconfig, a file.
	Kubeconfig string
	env        *envtest.Environment
	stopKCM    func()
}

// StartBare starts a Bare cluster from the plane's assets, its
// kubeconfig and logs in dir.
func StartBare(ctx context.Context, dir string) (*Bare, error) {
	a, err := ResolveAssets(Assets{})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: a.KubeDir}
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("a bare cluster's API server: %w", err)
	}
	b := &Bare{Kubeconfig: filepath.Join(dir, "kubeconfig"), env: env}
	if err := os.WriteFile(b.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		b.Stop()
		return nil, err
	}
	kcm, err := startControllerManager(ctx, a, b.Kubeconfig, dir, aggregationController+","+controllerManagerControllers, time.Minute)
	if err != nil {
		b.Stop()
		return nil, fmt.Errorf("a bare cluster's kube-controller-manager: %w", err)
	}
	b.stopKCM = func() { kcm.Stop(10 * time.Second) }
	return b, nil
}

// Stop stops the cluster and deletes what it stored.
func (b *Bare) Stop() {
	if b.stopKCM != nil {
		b.stopKCM()
	}
	_ = b.env.Stop()
}
