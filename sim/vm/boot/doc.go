// Package boot makes what a qemu-backend host boots from a slot:
// Debian's cloud kernel, taken from its package without installing it, and
// an initramfs whose /init is the guest (cmd/upgradelab-guest) with the
// few kernel modules a virtio machine needs. With an image's manifest they
// make one slot payload (sim/vm's Builder.Payload, sim/vm/diskimage's
// MakePayload).
//
// [FetchKernel] resolves the metapackage [KernelMeta]
// (linux-image-cloud-amd64, Debian's smallest kernel, made for virtual
// machines) to its linux-image package with apt-cache depends, downloads
// it with apt-get download and unpacks it with dpkg-deb -x into a cache
// folder (the lab's is UPGRADELAB_CACHE/vm/kernel), once. Labs that start
// at once on a cold cache each unpack into a folder of their own and the
// first to finish renames its copy into place, so none reads a
// half-unpacked kernel.
//
// [Initramfs] writes a gzip'd newc cpio archive (cpio.go, written in Go,
// so no cpio tool or root is needed) holding the guest as /init, the
// modules and their load order ([InitrdModules]), and the image's manifest
// ([InitrdManifest]), so the guest knows what it runs without reading its
// slot. [GuestModules] are virtio_pci, virtio_blk and virtio_net;
// [GuestModulesOf] adds what they depend on, read from each module's
// .modinfo depends= as depmod does, since the unpacked package has no
// modules.dep (depmod runs at installation). A dependency built into the
// kernel needs no loading.
package boot
