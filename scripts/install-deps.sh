#!/usr/bin/env bash
# Installs the Debian packages upgradelab needs, once: a warm run only checks
# that they are there. Needs root or sudo on a fresh machine.
set -euo pipefail

# libvirt-dev and pkg-config: cgo for libvirt.org/go/libvirt (the lab's
# hosts); openssl: inspecting the lab's certificates by hand;
# python3-sushy: the Redfish library Ironic uses, which the BMC's tests
# drive the BMCs with (sim/bmc/testdata/sushy_inspect.py). ipmitool: the
# IPMI client the BMCs' IPMI tests drive them with (sim/ipmi), and what
# the provider runs for ipmi:// hosts, as Ironic's ipmitool driver does.
PACKAGES=(libvirt-dev pkg-config openssl python3-sushy ipmitool)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
