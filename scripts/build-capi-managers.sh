#!/usr/bin/env bash
# Builds the real Cluster API managers (core, KubeadmControlPlane, kubeadm
# bootstrap) from the version of sigs.k8s.io/cluster-api pinned in go.mod,
# into a cache folder keyed by that version. Prints the folder.
# Static (CGO_ENABLED=0), as CAPI's release images are: on a kind
# management cluster each runs alone in a one-file image (e2e/mgmt/kind). A
# binary built with cgo by an earlier version of this script is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}
VERSION=$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
OUT="$CACHE/bin/capi-$VERSION"
mkdir -p "$OUT"

# name:package pairs; the names are what sim/mgmt looks for.
for pair in \
  capi-manager:sigs.k8s.io/cluster-api/core \
  kcp-manager:sigs.k8s.io/cluster-api/controlplane/kubeadm \
  cabpk-manager:sigs.k8s.io/cluster-api/bootstrap/kubeadm; do
  name=${pair%%:*} pkg=${pair#*:}
  [[ -x "$OUT/$name" ]] && go version -m "$OUT/$name" | grep -q 'CGO_ENABLED=0' && continue
  echo "build-capi-managers: building $name ($pkg@$VERSION)" >&2
  start=$SECONDS
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$VERSION" \
    -o "$OUT/$name.tmp" "$pkg"
  mv "$OUT/$name.tmp" "$OUT/$name"
  echo "build-capi-managers: built $name in $((SECONDS - start)) s" >&2
done
echo "$OUT"
