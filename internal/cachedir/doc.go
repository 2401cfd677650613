// Package cachedir names the folder where upgradelab keeps what it builds
// or fetches once, outside any checkout: the kube-apiserver and etcd
// binaries and CAPI's managers (built there by scripts/build-*.sh, read by
// e2e/mgmt), manager images for a kind plane, the VM kernel package, and
// the run/ registry of child processes (plane processes, libvirt daemons)
// that a killed harness may have left for the next one to end.
//
// [Dir] is UPGRADELAB_CACHE when set (the Makefile exports it), otherwise
// ~/.cache/upgradelab, or a folder in the temp directory when there is no
// home. It is a package of its own, under internal/, because the simulator
// (sim/lab), which must not import the harness, and the harness
// (e2e/mgmt) both need it, and must agree with the scripts.
package cachedir
