#!/usr/bin/env bash
# Builds the management plane's kube-apiserver, kube-controller-manager and
# etcd, and kubectl (what `upgradelab up` users and its test drive the
# sandbox with), from their Go modules
# into a versioned cache outside the repository. No prebuilt binary is
# downloaded: only the Go module proxy is reachable where upgradelab runs.
#
# A binary that already reports the wanted version is kept, so a warm run
# takes well under a second. Prints the assets folder (KUBEBUILDER_ASSETS).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
# KUBE_COMMANDS: the k8s.io/kubernetes commands to build besides etcd.
# scripts/build-kind-node-image.sh asks for a kind node's whole set.
KUBE_COMMANDS=${KUBE_COMMANDS:-kube-apiserver kube-controller-manager kubectl}
CACHE=${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}
ASSETS="$CACHE/assets/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
SRC="$CACHE/src"
mkdir -p "$ASSETS" "$SRC"

log() { echo "build-kube-binaries: $*" >&2; }

have_version() { # binary, expected substring[, the arguments that print the version]
  # Read the whole output first: with pipefail, `--version | grep -q` fails
  # whenever grep exits before the binary finishes writing (SIGPIPE), which
  # used to rebuild a binary that was fine.
  local v args=${3:---version}
  # shellcheck disable=SC2086 # args is a word list
  [[ -x "$1" ]] && v="$("$1" $args 2>/dev/null)" && grep -qF "$2" <<<"$v"
}

# kube_ldflags stamps KUBE_VERSION into a Kubernetes binary (its --version).
kube_ldflags() {
  local major=${KUBE_VERSION#v}; major=${major%%.*}
  local minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ld"
}

# kube_wrapper prepares the wrapper module every Kubernetes binary is
# built from: k8s.io/kubernetes at KUBE_VERSION, with the main packages
# built here imported by tools.go. It is written again when its tools.go
# lacks one of them (a cache from before that binary was built here).
kube_wrapper() {
  local dir="$SRC/kube-apiserver-$KUBE_VERSION" cmd missing=false
  for cmd in $KUBE_COMMANDS; do
    grep -q "cmd/$cmd\"" "$dir/tools.go" 2>/dev/null || missing=true
  done
  [[ $missing == false ]] && return
  mkdir -p "$dir"
  # k8s.io/kubernetes points its staging modules at ./staging; a consumer
  # must replace each with the published v0.x of the same release.
  local staging="v0${KUBE_VERSION#v1}"
  local mod
  mod=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module upgradelab.local/kube-apiserver"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    grep -E '^\s+k8s\.io/[a-z0-9-]+ => \./staging/' "$mod" |
      awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
  } >"$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for cmd in $KUBE_COMMANDS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } >"$dir/tools.go"
  (cd "$dir" && go mod tidy >/dev/null)
}

# build_kube BINARY MINUTES [VERSION-ARGS] builds
# k8s.io/kubernetes/cmd/BINARY into the assets folder unless it already
# reports KUBE_VERSION.
build_kube() {
  local name=$1 out="$ASSETS/$1" dir="$SRC/kube-apiserver-$KUBE_VERSION"
  if have_version "$out" "$KUBE_VERSION" "${3:-}"; then return; fi
  log "building $name $KUBE_VERSION (cold: about $2 minutes on 2 cores)"
  local start=$SECONDS
  kube_wrapper
  local ld; ld=$(kube_ldflags)
  (cd "$dir" && go build -trimpath -ldflags "$ld" -o "$out.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$out.tmp" "$out"
  log "built $name in $((SECONDS - start)) s"
}

build_etcd() {
  local out="$ASSETS/etcd" dir="$SRC/etcd-$ETCD_VERSION"
  if have_version "$out" "etcd Version: ${ETCD_VERSION#v}"; then return; fi
  log "building etcd $ETCD_VERSION"
  local start=$SECONDS
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<GO
module upgradelab.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GO
  cat >"$dir/main.go" <<'GO'
// Command etcd is etcd's own server main, built from its Go module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir" && go mod tidy >/dev/null && go build -trimpath -ldflags "-s -w" -o "$out.tmp" .)
  mv "$out.tmp" "$out"
  log "built etcd in $((SECONDS - start)) s"
}

build_etcd
# The plane runs kube-controller-manager's garbage collector, namespace
# and ClusterRole aggregation controllers.
for cmd in $KUBE_COMMANDS; do
  case $cmd in
  kube-apiserver) build_kube "$cmd" 4 ;;
  kubectl) build_kube "$cmd" 2 "version --client" ;;
  kubeadm) build_kube "$cmd" 2 "version -o short" ;;
  *) build_kube "$cmd" 3 ;;
  esac
done
echo "$ASSETS"
