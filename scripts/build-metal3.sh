#!/usr/bin/env bash
# Builds a Metal3 component from its upstream source, with its own go.mod
# (its dependencies come from the Go module proxy), into a cache folder,
# keeping its manifests beside the binary. Prints the folder.
#
#   scripts/build-metal3.sh bmo     baremetal-operator: manager, crds/, config/rbac/, config/webhook/
#   scripts/build-metal3.sh capm3   cluster-api-provider-metal3: manager, config/{crd,rbac,webhook,default}/
#   scripts/build-metal3.sh ipam    ip-address-manager: manager, config/{crd,rbac,webhook,default}/
#   scripts/build-metal3.sh NAME --where   the folder a build puts them in; builds nothing
#
# The source is, in this order:
#   BMO_SOURCE, CAPM3_SOURCE or IPAM_SOURCE: a checkout (or an unpacked
#     release) of that component, built as it is, and again whenever
#     its files, the Go toolchain or this script change;
#   METAL3_SOURCES: the folder of upstream release archives (default
#     ../shared/third_party beside this checkout), NAME-VERSION.tar.gz
#     holding folder NAME-VERSION, built once per version.
# BMO_VERSION, CAPM3_VERSION and IPAM_VERSION pick the release.
set -euo pipefail
cd "$(dirname "$0")/.."

component=${1:-}
case "$component" in
  bmo)   NAME=baremetal-operator;          VERSION=${BMO_VERSION:-v0.11.7};   CHECKOUT=${BMO_SOURCE:-};   VAR=BMO_SOURCE ;;
  capm3) NAME=cluster-api-provider-metal3; VERSION=${CAPM3_VERSION:-v1.13.2}; CHECKOUT=${CAPM3_SOURCE:-}; VAR=CAPM3_SOURCE ;;
  ipam)  NAME=ip-address-manager;          VERSION=${IPAM_VERSION:-v1.13.2};  CHECKOUT=${IPAM_SOURCE:-};  VAR=IPAM_SOURCE ;;
  *) echo "usage: $0 bmo|capm3|ipam" >&2; exit 2 ;;
esac
MODULE=github.com/metal3-io/$NAME
CACHE=${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}
SOURCES=${METAL3_SOURCES:-$(cd .. && pwd)/shared/third_party}

# checkModule stops unless folder $1 is the component's source.
checkModule() {
  local got
  got=$(sed -n 's/^module //p' "$1/go.mod" 2>/dev/null || true)
  if [[ "$got" != "$MODULE" || ! -f "$1/main.go" ]]; then
    echo "build-metal3: $2 is not $NAME: module '$got' in $1; want $MODULE, its main.go at the top" >&2
    exit 1
  fi
}

# keepManifests copies what the harness installs from source folder $1 to $2.
keepManifests() {
  rm -rf "$2/crds" "$2/config" && mkdir -p "$2/config/webhook"
  if [[ $component == bmo ]]; then
    cp -r "$1/config/base/crds/bases" "$2/crds"
    cp -r "$1/config/base/rbac" "$2/config/rbac"
    cp "$1/config/base/webhook/manifests.yaml" "$2/config/webhook/"
    return
  fi
  cp -r "$1/config/rbac" "$2/config/rbac"
  mkdir -p "$2/config/crd" && cp -r "$1/config/crd/bases" "$1/config/crd/kustomization.yaml" "$2/config/crd/"
  cp "$1/config/webhook/manifests.yaml" "$2/config/webhook/"
  # config/default names the namespace and prefix its ServiceAccount gets.
  local def="$1/config/default"
  [[ -f "$def/capm3/kustomization.yaml" ]] && def="$def/capm3"
  cp -r "$def" "$2/config/default"
}

build() { # source folder, output folder
  echo "build-metal3: building $NAME from $1" >&2
  mkdir -p "$2"
  (cd "$1" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$2/manager.tmp" .)
  mv "$2/manager.tmp" "$2/manager"
}

stamp() { # what a build of the folder is made from: every file but .git's, the toolchain, this script
  { (cd "$1" && find . -name .git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum)
    go version
    sha256sum <"${BASH_SOURCE[0]}"
  } | sha256sum | cut -d' ' -f1
}

mkdir -p "$CACHE/bin" "$CACHE/src"
if [[ -n "$CHECKOUT" ]]; then
  [[ -d "$CHECKOUT" ]] || { echo "build-metal3: $VAR=$CHECKOUT is not a folder (a checkout of $MODULE)" >&2; exit 1; }
  CHECKOUT=$(cd "$CHECKOUT" && pwd)
  checkModule "$CHECKOUT" "$VAR=$CHECKOUT"
  OUT="$CACHE/bin/$component-checkout-$(printf %s "$CHECKOUT" | sha256sum | cut -c1-12)"
  [[ ${2:-} == --where ]] && { echo "$OUT"; exit 0; }
  exec 9>"$OUT.lock"
  flock 9
  # Linked again only when the checkout changed: a run builds before it
  # starts, and its clock must not pay for a link of the same sources.
  STAMP=$(stamp "$CHECKOUT")
  if [[ ! -x "$OUT/manager" || "$(cat "$OUT/stamp" 2>/dev/null)" != "$STAMP" ]]; then
    build "$CHECKOUT" "$OUT"
    keepManifests "$CHECKOUT" "$OUT"
    echo "$STAMP" >"$OUT/stamp"
  fi
  echo "$CHECKOUT" >"$OUT/source"
  echo "$OUT"
  exit 0
fi

ARCHIVE_NAME=$NAME-$VERSION
OUT="$CACHE/bin/$component-$VERSION"
[[ ${2:-} == --where ]] && { echo "$OUT"; exit 0; }
# One build at a time: parallel suite processes wait for the first.
exec 9>"$OUT.lock"
flock 9
[[ -x "$OUT/manager" && -f "$OUT/config/webhook/manifests.yaml" && -f "$OUT/source" ]] && { echo "$OUT"; exit 0; }

ARCHIVE="$SOURCES/$ARCHIVE_NAME.tar.gz"
if [[ ! -f "$ARCHIVE" ]]; then
  cat >&2 <<MSG
build-metal3: $ARCHIVE not found (METAL3_SOURCES=$SOURCES).
Set METAL3_SOURCES to a folder holding $ARCHIVE_NAME.tar.gz, the release of
$MODULE at tag $VERSION, folder $ARCHIVE_NAME inside:
  git clone --depth 1 --branch $VERSION https://$MODULE $ARCHIVE_NAME
  tar czf $ARCHIVE_NAME.tar.gz $ARCHIVE_NAME
or set $VAR to a checkout of $MODULE.
MSG
  exit 1
fi
SRC="$CACHE/src/$ARCHIVE_NAME"
rm -rf "$SRC"
tar xzf "$ARCHIVE" -C "$CACHE/src"
checkModule "$SRC" "$ARCHIVE (METAL3_SOURCES), tag $VERSION,"
[[ -x "$OUT/manager" ]] || build "$SRC" "$OUT"
keepManifests "$SRC" "$OUT"
echo "$ARCHIVE" >"$OUT/source"
echo "$OUT"
