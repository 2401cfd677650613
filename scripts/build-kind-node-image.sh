#!/usr/bin/env bash
# Builds a kind node image with no registry: `kind build node-image` pulls
# kindest/base and the control-plane images, which cannot be reached where
# upgradelab runs. The image is assembled from
#   - a Debian 12 root filesystem made by debootstrap from Debian's archive
#     (systemd, containerd 1.6, runc, iptables, the CNI plugins),
#   - kind's own node files (entrypoint, systemd units, containerd config)
#     read from the kind module in the Go module cache at the version
#     go.mod pins,
#   - Kubernetes KIND_KUBE_VERSION's binaries and etcd built from their Go
#     modules (scripts/build-kube-binaries.sh, static),
#   - the control-plane images kubeadm asks for, each one static binary
#     (kube-proxy on the Debian root, for iptables), imported into the
#     node's containerd as kind does.
# Kubernetes 1.34: 1.35 refuses cgroup v1 without a kubelet setting and
# 1.36 needs containerd 2, which Debian 12 does not have.
#
# CoreDNS is built from its module at the version kubeadm deploys.
# Differences from kindest/node, on purpose: no kindnetd (the harness's
# kind config disables kind's CNI and the image carries a bridge CNI
# configuration instead; one node needs no more), no local-path storage
# provisioner (nothing the harness runs asks for a volume). The pause image is a small Go program (pause.go below) that does
# what registry.k8s.io/pause does: sleep, exit on SIGINT/SIGTERM.
#
# The image is tagged by what it is built from, so a second run finds it in
# the engine and takes a second. Prints the image name. A step that fails
# names itself and its log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KUBE_VERSION=${KIND_KUBE_VERSION:-v1.34.3}
CACHE=${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}
WORK="$CACHE/kind"
mkdir -p "$WORK"

log() { echo "build-kind-node-image: $*" >&2; }
# step NAME LOGFILE COMMAND...: runs one step with its output in LOGFILE.
step() {
  local name=$1 logfile=$2
  shift 2
  if ! "$@" >"$logfile" 2>&1; then
    log "step '$name' failed; log: $logfile"
    tail -n 15 "$logfile" >&2
    exit 1
  fi
}

step container-runtime "$WORK/container-runtime.log" "$ROOT/scripts/container-runtime.sh"

KIND_VERSION=$(cd "$ROOT" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
KIND_DIR=$(cd "$ROOT" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
KUBE_DIR=$(cd "$ROOT" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
constant() { sed -n "s/^\s*$1 = \"\(.*\)\"/\1/p" "$KUBE_DIR/cmd/kubeadm/app/constants/constants.go"; }
ETCD_TAG=$(constant DefaultEtcdVersion) # 3.6.5-0
PAUSE_TAG=$(constant PauseVersion)
COREDNS_TAG=$(constant CoreDNSVersion)

PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,nftables,iproute2,conntrack,ethtool,socat,util-linux,mount,kmod,ca-certificates,procps,libseccomp2,ebtables,bash,pigz,jq,e2fsprogs
# The capability bounding set decides two settings of the node (below).
HASH=$(cat "$0" "$ROOT/scripts/runc-without-sys-resource" <(echo "$KIND_VERSION $KUBE_VERSION $PACKAGES $(awk '/^CapBnd:/ {print $2}' /proc/self/status)") | sha256sum | cut -c1-12)
IMAGE="upgradelab.local/kind-node:$KUBE_VERSION-$HASH"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE"
  exit 0
fi
log "building $IMAGE (cold: about 20 minutes on 2 cores; logs in $WORK)"

# 1. Kubernetes and etcd, static: the control-plane images hold nothing else.
ASSETS=$(KUBE_VERSION=$KUBE_VERSION ETCD_VERSION="v${ETCD_TAG%-*}" CGO_ENABLED=0 \
  KUBE_COMMANDS="kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy" \
  "$ROOT/scripts/build-kube-binaries.sh" 2>"$WORK/kube-binaries.log") ||
  { log "step 'kube-binaries' failed; log: $WORK/kube-binaries.log"; tail -n 15 "$WORK/kube-binaries.log" >&2; exit 1; }

build_pause() {
  local dir="$CACHE/src/pause"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<'GO'
module upgradelab.local/pause

go 1.26
GO
  cat >"$dir/pause.go" <<'GO'
// Command pause holds a pod's namespaces, as registry.k8s.io/pause does: it
// sleeps until SIGINT or SIGTERM. Built by upgradelab's
// scripts/build-kind-node-image.sh, where no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
GO
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$WORK/pause" .)
}
step pause "$WORK/pause.log" build_pause

build_coredns() {
  local dir="$CACHE/src/coredns-$COREDNS_TAG"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<GO
module upgradelab.local/coredns

go 1.26

require github.com/coredns/coredns $COREDNS_TAG
GO
  cat >"$dir/main.go" <<'GO'
// Command coredns is CoreDNS's own main with its default plugins, built
// from its Go module by upgradelab's scripts/build-kind-node-image.sh.
package main

import (
	_ "github.com/coredns/coredns/core/plugin"
	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
GO
  (cd "$dir" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$WORK/coredns-$COREDNS_TAG" .)
}
if [[ ! -x $WORK/coredns-$COREDNS_TAG ]]; then
  log "building CoreDNS $COREDNS_TAG (cold: about 4 minutes)"
  step coredns "$WORK/coredns.log" build_coredns
fi

# 2. Debian's root, cached by its package list.
ROOTFS="$WORK/debian-bookworm-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
debootstrap_rootfs() {
  local dir="$WORK/rootfs.tmp"
  rm -rf "$dir"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$dir" http://deb.debian.org/debian
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -cf "$ROOTFS.tmp" .
  mv "$ROOTFS.tmp" "$ROOTFS"
  rm -rf "$dir"
}
if [[ ! -f $ROOTFS ]]; then
  command -v debootstrap >/dev/null || step install-debootstrap "$WORK/apt.log" \
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends debootstrap
  log "debootstrap of Debian 12 (about 2 minutes)"
  step debootstrap "$WORK/debootstrap.log" debootstrap_rootfs
fi

# 3. The control-plane images, one docker import each, saved together.
IMAGES_TAR="$WORK/images-$KUBE_VERSION-$HASH.tar"
# image NAME:TAG DIR ENTRYPOINT: a one-layer image of DIR.
image() {
  tar -C "$2" -c . | docker import --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENTRYPOINT [\"$3\"]" - "$1" >/dev/null
}
build_images() {
  local dir="$WORK/images.tmp" names=() name bin
  rm -rf "$dir"
  for bin in kube-apiserver kube-controller-manager kube-scheduler etcd pause coredns; do
    mkdir -p "$dir/$bin/usr/local/bin" "$dir/$bin/tmp" "$dir/$bin/etc"
    chmod 1777 "$dir/$bin/tmp"
    echo "root:x:0:0:root:/root:/sbin/nologin" >"$dir/$bin/etc/passwd"
  done
  for bin in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    cp "$ASSETS/$bin" "$dir/$bin/usr/local/bin/"
  done
  cp "$WORK/pause" "$dir/pause/pause"
  cp "$WORK/coredns-$COREDNS_TAG" "$dir/coredns/coredns"
  for bin in kube-apiserver kube-controller-manager kube-scheduler; do
    name="registry.k8s.io/$bin:$KUBE_VERSION"
    image "$name" "$dir/$bin" "/usr/local/bin/$bin"
    names+=("$name")
  done
  image "registry.k8s.io/etcd:$ETCD_TAG" "$dir/etcd" /usr/local/bin/etcd
  image "registry.k8s.io/pause:$PAUSE_TAG" "$dir/pause" /pause
  image "registry.k8s.io/coredns/coredns:$COREDNS_TAG" "$dir/coredns" /coredns
  names+=("registry.k8s.io/etcd:$ETCD_TAG" "registry.k8s.io/pause:$PAUSE_TAG" "registry.k8s.io/coredns/coredns:$COREDNS_TAG")
  # kube-proxy runs iptables: Debian's root under it.
  mkdir -p "$dir/kube-proxy"
  tar -C "$dir/kube-proxy" -xf "$ROOTFS"
  cp "$ASSETS/kube-proxy" "$dir/kube-proxy/usr/local/bin/"
  image "registry.k8s.io/kube-proxy:$KUBE_VERSION" "$dir/kube-proxy" /usr/local/bin/kube-proxy
  names+=("registry.k8s.io/kube-proxy:$KUBE_VERSION")
  docker save -o "$IMAGES_TAR.tmp" "${names[@]}"
  mv "$IMAGES_TAR.tmp" "$IMAGES_TAR"
  docker rmi "${names[@]}"
  rm -rf "$dir"
}
[[ -f $IMAGES_TAR ]] || step control-plane-images "$WORK/images.log" build_images

# 4. The node's file system: Debian's root, kind's files, as kind's base
# image Dockerfile lays them out.
BASE="upgradelab.local/kind-base:$HASH"
build_base() {
  local dir="$WORK/node.tmp" f="$KIND_DIR/images/base/files"
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -C "$dir" -xf "$ROOTFS"
  install -m 0755 "$f"/usr/local/bin/* "$dir/usr/local/bin/"
  mkdir -p "$dir/kind/bin" "$dir/etc/containerd" "$dir/etc/systemd/system/kubelet.service.d" "$dir/LICENSES"
  install -m 0644 "$f"/kind/README.txt "$dir/kind/"
  install -m 0755 "$f"/kind/bin/* "$dir/kind/bin/"
  install -m 0644 "$f"/LICENSES/* "$dir/LICENSES/"
  install -m 0644 "$f"/etc/crictl.yaml "$dir/etc/"
  install -m 0644 "$f"/etc/containerd/* "$dir/etc/containerd/"
  # As kind's node image build does: the sandbox image is the pause image
  # this Kubernetes version's kubeadm names.
  sed -i "s|sandbox_image = .*|sandbox_image = \"registry.k8s.io/pause:$PAUSE_TAG\"|" "$dir/etc/containerd/config.toml"
  # Lowering a process's oom_score_adj takes CAP_SYS_RESOURCE too: the
  # kubelet asks -998 for the control plane's Pods and runc fails ("failed
  # to update /proc/self/oom_score_adj: Permission denied"). containerd
  # then keeps each at no less than its own, as it does for rootless kind.
  capbnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  if ! (((0x$capbnd >> 24) & 1)); then
    sed -i "s|restrict_oom_score_adj = false|restrict_oom_score_adj = true|" "$dir/etc/containerd/config.toml"
  fi
  install -m 0644 "$f"/etc/default/* "$dir/etc/default/"
  install -m 0644 "$f"/etc/sysctl.d/* "$dir/etc/sysctl.d/"
  install -m 0644 "$f"/etc/systemd/system/*.service "$f"/etc/systemd/system/*.slice "$dir/etc/systemd/system/"
  install -m 0644 "$f"/etc/systemd/system/kubelet.service.d/* "$dir/etc/systemd/system/kubelet.service.d/"
  # kind's units and containerd config name /usr/local paths.
  ln -sf /usr/bin/containerd "$dir/usr/local/bin/containerd"
  ln -sf /usr/bin/ctr "$dir/usr/local/bin/ctr"
  ln -sf /usr/bin/containerd-shim-runc-v2 "$dir/usr/local/bin/containerd-shim-runc-v2"
  # Pods' privileged containers meet the same missing capability as the
  # node (scripts/container-runtime.sh): a wrapper ahead of Debian's runc
  # on PATH drops CAP_SYS_RESOURCE when the bounding set lacks it.
  install -m 0755 "$ROOT/scripts/runc-without-sys-resource" "$dir/usr/local/sbin/runc"
  mkdir -p "$dir/opt/cni/bin" "$dir/etc/cni/net.d"
  for p in "$dir"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/$(basename "$p")" "$dir/opt/cni/bin/"; done
  cat >"$dir/etc/cni/net.d/10-upgradelab-bridge.conflist" <<'JSON'
{
  "cniVersion": "0.4.0",
  "name": "upgradelab",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  for b in kubeadm kubelet kubectl; do install -m 0755 "$ASSETS/$b" "$dir/usr/bin/"; done
  echo "$KUBE_VERSION" >"$dir/kind/version"
  mkdir -p "$dir/etc/kubernetes/manifests"
  # As kind's base image: no unit but its own starts, journald skips kmsg.
  find "$dir/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$dir"/lib/systemd/system/multi-user.target.wants/* "$dir"/etc/systemd/system/*.wants/* \
    "$dir"/lib/systemd/system/local-fs.target.wants/* "$dir"/lib/systemd/system/sockets.target.wants/*udev* \
    "$dir"/lib/systemd/system/sockets.target.wants/*initctl* "$dir"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$dir/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$dir/sbin/init"
  chroot "$dir" systemctl enable kubelet.service containerd.service undo-mount-hacks.service
  chroot "$dir" systemctl mask systemd-binfmt.service
  tar -C "$dir" -c . | docker import - "$BASE"
  rm -rf "$dir"
}
docker image inspect "$BASE" >/dev/null 2>&1 || step node-filesystem "$WORK/node.log" build_base

# 5. The images into the node's containerd (pinned, not unpacked, as kind
# does), and kind's base runtime spec; then the container is the image.
build_node() {
  local c="upgradelab-kind-build-$HASH"
  docker rm -f "$c" >/dev/null 2>&1 || true
  docker run -d --privileged --name "$c" --entrypoint sleep "$BASE" infinity
  trap 'docker rm -f '"$c"' >/dev/null 2>&1 || true' RETURN
  docker cp "$IMAGES_TAR" "$c:/kind/images.tar"
  docker exec "$c" sh -euc '
    mkdir -p /run/containerd
    containerd >/tmp/containerd.log 2>&1 &
    pid=$!
    for i in $(seq 30); do ctr version >/dev/null 2>&1 && break; sleep 1; done
    ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /kind/images.tar
    ctr --namespace=k8s.io images ls -q
    ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" |
      jq "del(.process.rlimits)" >/etc/containerd/cri-base.json
    kill $pid; wait $pid || true
    rm -f /kind/images.tar /tmp/containerd.log'
  docker commit --change 'ENV container=docker' \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' "$c" "$IMAGE.tmp"
  # commit cannot set the stop signal (systemd shuts down on SIGRTMIN+3);
  # the classic builder can, from a local image, offline.
  echo 'FROM '"$IMAGE.tmp"'
STOPSIGNAL SIGRTMIN+3' | DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" -
  docker rmi "$IMAGE.tmp"
}
step node-image "$WORK/node-image.log" build_node
# Bases of earlier builds of this script go too.
# (By tag: the node image is the base's child, so its ID cannot go.) Node
# images of earlier builds go unless a cluster still runs on one.
docker images --format '{{.Repository}}:{{.Tag}}' upgradelab.local/kind-base | xargs -r docker rmi >/dev/null 2>&1 || true
docker images --format '{{.Repository}}:{{.Tag}}' upgradelab.local/kind-node | grep -vxF "$IMAGE" |
  xargs -r docker rmi >/dev/null 2>&1 || true
log "built $IMAGE"
echo "$IMAGE"
