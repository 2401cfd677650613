//go:build tools

// Package upgradelab records the main packages that upgradelab builds from
// its own module, so that `go mod tidy` keeps their dependencies: the real
// CAPI managers the management plane runs (see scripts/build-capi-managers.sh)
// and the Ginkgo CLI that runs the e2e suite's parallel processes.
package upgradelab

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
	_ "sigs.k8s.io/cluster-api/test/extension"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
