// Package plan turns scenario files and provider configs into the runs a
// suite makes. The Ginkgo suite (make e2e) and `upgradelab run` plan with
// it alike, so a run has one name, one folder and one set of labels
// wherever it runs.
//
// [Load] reads a scenario file and checks it against the lab it names
// ([Fits]: the releases' images in the lab's catalog at their versions,
// the NIC firmware in its NVM catalog, hosts enough for the upgrade);
// [WithCluster] gives a scenario another cluster shape the lab has hosts
// for (a fleet's cluster groups). [Scenarios] loads the scenario files the
// globs match, each with Load, biggest lab first and then by name,
// so the longest runs start first and the last to finish is a short one.
// [OnBackend] moves every lab to one backend (qemu: the hosts are real
// VMs). [Runs] makes the [Run]s, provider by provider in the order given
// (so a later provider's module-built manager builds while the first
// provider's runs go): one per scenario the provider can run
// (provider.Config.Runs: its strategy, the lab, what the faults act on),
// per host OS variant, per form and per repeat. [Select] keeps the runs a
// Ginkgo label expression matches, as GINKGO_LABELS and `upgradelab run
// --labels` take it.
//
// [HostOSVariants] are the labs a scenario runs on for a provider: one per
// entry of the scenario's hostOS, the lab's hosts set to A/B, OSTree or
// mixed by lab.Definition.WithHostOS (the entry the lab file already is
// keeps the run's plain name), or the lab file alone when the scenario
// names none or the provider does not use the lab (its machines have no
// disks). On the qemu backend it is one run on A/B hosts: a VM's disk is
// A/B.
//
// A run's [Run.Labels] are "scenario", the provider, the scenario's name,
// strategy and form, and for a lab provider the host OS mode (ab, ostree,
// mixed) and "qemu" on VMs. [Run.Name] names it in progress lines and
// [Run.Dir] its folder under the artifacts folder; both carry the host OS
// variant, the backend and the repeat when there is more than one.
package plan
