#!/usr/bin/env bash
# Makes sure a Docker engine answers, for kind (MANAGEMENT=kind): one that
# already runs is used as it is; otherwise Debian's docker.io is installed
# and dockerd started in the background, its log under
# $UPGRADELAB_CACHE/docker/dockerd.log. Needs root (or sudo) for that.
#
# Why a runc wrapper: on machines whose capability bounding set lacks
# CAP_SYS_RESOURCE (Firecracker sandboxes such as this project's CI),
# `docker run --privileged` fails with "unable to apply caps: operation not
# permitted", since a privileged container asks for every capability. kind's
# node containers are privileged. The wrapper deletes CAP_SYS_RESOURCE from
# the container's OCI spec before it calls Debian's runc, which is exactly
# what the kernel would refuse anyway; nothing else changes. It is the
# engine's default runtime only when the bounding set lacks the capability.
#
# Prints nothing on success. A failure names the step and its log.
set -euo pipefail

CACHE=${UPGRADELAB_CACHE:-$HOME/.cache/upgradelab}
DIR="$CACHE/docker"
LOG="$DIR/dockerd.log"
mkdir -p "$DIR"

log() { echo "container-runtime: $*" >&2; }
fail() { log "step '$1' failed: $2"; exit 1; }

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
if ! docker info >/dev/null 2>&1 && ! command -v dockerd >/dev/null; then
  log "installing Debian's docker.io"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q >"$DIR/apt.log" 2>&1 || fail apt-update "see $DIR/apt.log"
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends docker.io >>"$DIR/apt.log" 2>&1 ||
    fail install "apt-get install docker.io; see $DIR/apt.log"
fi
docker info >/dev/null 2>&1 || command -v dockerd >/dev/null || fail install "no dockerd after installing docker.io; see $DIR/apt.log"

# CAP_SYS_RESOURCE is bit 24 of the bounding set.
capbnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
config="$DIR/daemon.json"
if (((0x$capbnd >> 24) & 1)); then
  echo '{"storage-driver": "overlay2"}' >"$config"
else
  wrapper="$DIR/runc-without-sys-resource"
  # One copy outside the repository: the engine keeps its path.
  install -m 0755 "$(dirname "$0")/runc-without-sys-resource" "$wrapper"
  cat >"$config" <<JSON
{"storage-driver": "overlay2",
 "runtimes": {"runc-without-sys-resource": {"path": "$wrapper"}},
 "default-runtime": "runc-without-sys-resource"}
JSON
fi

# An engine already running keeps its configuration (the wrapper above
# is rewritten in place, so one this script started gets the new one).
docker info >/dev/null 2>&1 && exit 0
log "starting dockerd (log: $LOG)"
# setsid: the engine outlives the make target that started it, as a
# service would.
$SUDO setsid dockerd --config-file "$config" >"$LOG" 2>&1 </dev/null &
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
fail start-dockerd "docker info still fails after 60 s; see $LOG"
