// Package image holds the OS image bundles the lab installs: their catalog
// (fixtures/images/catalog.yaml), the deterministic payload each one
// stands for, the HTTP server that serves payloads on loopback, and the
// fetch that refuses bytes whose checksum is not the one expected.
//
// A [Bundle] says what an image ships (its role: os, deploy or recovery;
// the Kubernetes, containerd, etcd and CoreDNS versions its kubeadm
// installs; kernel, OS name, i40e driver), its modelled size, and the
// sha256 of its payload. The modelled size (SizeMiB) sets write times. The
// payload ([Payload]) is always [PayloadBytes] (64 KiB): a header carrying
// the bundle's manifest (api/image/v1), then filler derived from the name
// alone. So the same bundle always gives the same bytes and the catalog
// can carry their checksum; a 100-host lab needs no disk space; and
// nothing large is ever in git. Whatever boots or stages an image learns
// what it is from its manifest in these bytes.
//
// [Server] serves GET /images/NAME (Range requests work),
// /images/NAME.sha256, and /firmware/NAME, the JSON descriptor of an NVM
// image from the lab's NVM catalog (sim/nic): the part of an update
// package a tool reads before flashing, since the lab's BMCs flash by
// name. [Fetch] downloads an image and returns it only when it hashes to
// the sha256 asked for; on a mismatch it returns nothing, so nothing gets
// written. sim/lab fetches through it before every stage, on both
// backends.
//
// [ParseCatalog] validates each bundle (name, role, version formats, the
// driver's API versions, size, checksum) with errors that name the file,
// the entry and the field.
package image
