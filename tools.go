//go:build tools

// Package upgradelab records the main packages that upgradelab builds from
// its own module, so that `go mod tidy` keeps their dependencies: the real
// CAPI managers the management plane runs (see scripts/build-capi-managers.sh).
package upgradelab

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
	_ "sigs.k8s.io/cluster-api/test/extension"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
