// Package v1 is the format of what the lab's image server serves,
// version 1: an OS image's [Manifest], which heads its payload, and a NIC
// firmware package's descriptor, an [NVMImage].
//
// A payload starts with [Magic] and the manifest's JSON on one line
// ([Header], [ReadManifest]). What boots is read from the bytes booted,
// so it is what was written; an updater reads the manifest with a ranged
// GET of at most [PayloadBytes] before it stages anything. The manifest
// names the image's [Role] (an OS, a deploy ramdisk, a recovery OS) and
// the versions a node reports and kubeadm installs: Kubernetes,
// containerd, etcd, CoreDNS, kernel, OS, and the i40e NIC driver with the
// admin-queue API it expects ([Driver], [APIVersion]).
//
// The simulator writes, serves and boots these (sim/image serves
// descriptors at /firmware/NAME; sim/bmc takes one in a multipart
// firmware update), and api/hostagent/v1 reports the running image's
// manifest. Providers read them: the in-place extension checks an image's
// driver against the NIC firmware it would need. It imports only the
// standard library, so a provider built from its own module can require
// it without taking the simulator along.
package v1
