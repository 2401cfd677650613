#!/usr/bin/env bash
# Builds baremetal-operator (BMO) from its upstream release source, with
# its own go.mod (its dependencies come from the Go module proxy), into a
# cache folder keyed by version; its CRDs, RBAC and webhook manifests are
# kept beside the binary. Prints the folder (manager, crds/, config/rbac/,
# config/webhook/).
#
# METAL3_SOURCES is the folder of upstream release archives (default
# ../shared/third_party beside this checkout); BMO_VERSION the release.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}
VERSION=${BMO_VERSION:-v0.11.7}
SOURCES=${METAL3_SOURCES:-$(cd .. && pwd)/shared/third_party}
NAME=baremetal-operator-$VERSION
OUT="$CACHE/bin/bmo-$VERSION"
# One build at a time: parallel suite processes wait for the first.
mkdir -p "$CACHE/bin"
exec 9>"$OUT.lock"
flock 9
[[ -x "$OUT/manager" && -d "$OUT/crds" && -d "$OUT/config/rbac" && -f "$OUT/config/webhook/manifests.yaml" ]] && { echo "$OUT"; exit 0; }

ARCHIVE="$SOURCES/$NAME.tar.gz"
if [[ ! -f "$ARCHIVE" ]]; then
  cat >&2 <<MSG
build-bmo: $ARCHIVE not found (METAL3_SOURCES=$SOURCES).
Set METAL3_SOURCES to a folder holding $NAME.tar.gz, the release of
github.com/metal3-io/baremetal-operator at tag $VERSION, folder $NAME inside:
  git clone --depth 1 --branch $VERSION https://github.com/metal3-io/baremetal-operator $NAME
  tar czf $NAME.tar.gz $NAME
MSG
  exit 1
fi
SRC="$CACHE/src/$NAME"
rm -rf "$SRC" && mkdir -p "$CACHE/src"
tar xzf "$ARCHIVE" -C "$CACHE/src"
MODULE=$(sed -n 's/^module //p' "$SRC/go.mod" 2>/dev/null || true)
if [[ "$MODULE" != "github.com/metal3-io/baremetal-operator" || ! -f "$SRC/main.go" ]]; then
  echo "build-bmo: $ARCHIVE (METAL3_SOURCES) is not baremetal-operator $VERSION: module '$MODULE' in $SRC; want github.com/metal3-io/baremetal-operator at tag $VERSION" >&2
  exit 1
fi
mkdir -p "$OUT"
if [[ ! -x "$OUT/manager" ]]; then
  echo "build-bmo: building baremetal-operator $VERSION (METAL3_SOURCES=$SOURCES)" >&2
  (cd "$SRC" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/manager.tmp" .)
  mv "$OUT/manager.tmp" "$OUT/manager"
fi
rm -rf "$OUT/crds" "$OUT/config" && cp -r "$SRC/config/base/crds/bases" "$OUT/crds"
mkdir -p "$OUT/config/webhook" && cp -r "$SRC/config/base/rbac" "$OUT/config/rbac"
cp "$SRC/config/base/webhook/manifests.yaml" "$OUT/config/webhook/"
echo "$OUT"
