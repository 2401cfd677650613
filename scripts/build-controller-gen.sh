#!/usr/bin/env bash
# Builds controller-gen into the cache (once per version) and prints its
# path. `go install pkg@version` builds it in its own module context, so our
# go.mod is untouched: controller-tools v0.21.0 is the newest that builds
# with k8s.io v0.36 (v0.22+ need v0.37), and adding it to our module would
# bump kube-openapi and friends.
set -euo pipefail
version="${CONTROLLER_GEN_VERSION:-v0.21.0}"
cache="${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}"
bin="$cache/bin/controller-gen-$version/controller-gen"
if [ ! -x "$bin" ]; then
	GOBIN="$(dirname "$bin")" GOFLAGS=-mod=mod go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$version" >&2
fi
echo "$bin"
