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
# The qemu backend's real VMs (sim/vm/qemu, sim/vm/diskimage, sim/vm): QEMU, the
# libvirt daemon the harness starts itself, OVMF (UEFI), GRUB's EFI
# modules, and the tools that build a disk image without loop devices
# (mtools, dosfstools, e2fsprogs' mkfs.ext4 -d, fdisk's sfdisk) and the
# virtual CDs the BMCs insert (xorriso); genisoimage's mkisofs, which
# Ironic builds its ISOs with, builds the ISOs the boot media tests read
# (sim/iso9660, sim/lab, sim/ipa). The VM
# kernel is Debian's cloud kernel, downloaded (not installed) by the
# tests with apt-get download.
PACKAGES=(libvirt-dev pkg-config openssl python3-sushy ipmitool
  qemu-system-x86 libvirt-daemon-system ovmf grub-efi-amd64-bin mtools dosfstools e2fsprogs fdisk xorriso genisoimage)
# `install-deps.sh metal3` adds the Metal3 stack's own services: Debian's
# OpenStack Ironic (API and conductor, run as one process by e2e/ironic)
# and ironic-inspector (in-band inspection), which the real-Ironic tests
# and the Metal3 provider configs run the lab under.
if [[ " $* " == *" metal3 "* ]]; then
  PACKAGES+=(ironic-api ironic-conductor ironic-inspector)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The VM kernel comes from the package index, which a machine with every
# package installed may have emptied.
index_ok=true
apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1 || index_ok=false
[[ ${#missing[@]} -eq 0 && $index_ok == true ]] && exit 0

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
echo "install-deps: installing ${missing[*]:-nothing (updating the package index)}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
[[ ${#missing[@]} -eq 0 ]] && exit 0
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
