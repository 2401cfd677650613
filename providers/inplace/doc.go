// Package inplace is a Cluster API Runtime Extension that updates machines
// of the reference bare-metal provider in place: the new OS image is
// staged on the host (its inactive A/B slot or a new OSTree deployment:
// the host's agent decides, and the extension speaks only the update
// contract of stage, activate, commit), the host boots it once, and only a
// passing health check commits it; otherwise the bootloader falls back to
// the old image. [Handlers] serve CAPI's in-place hooks (CanUpdateMachine,
// CanUpdateMachineSet, UpdateMachine; feature gate InPlaceUpdates);
// cmd/upgradelab-inplace serves them, and package singlenode drives them
// for one-machine control planes.
//
// # Deciding
//
// DoCanUpdateMachine (asked by KCP) and DoCanUpdateMachineSet (asked by the
// MachineDeployment controller, on templates) share one decision, cover:
// it patches the current objects toward the desired ones only in what
// UpdateMachine applies. That is the BareMetalMachine's (or template's)
// image, which must
// carry the desired Kubernetes version (read from the image's manifest);
// its NIC firmware, only when every host concerned (the Machine's, or
// every Machine's of the current MachineSet), as its agent reports it, has
// an order of flash and image that keeps its links up; the version; the
// kubeadm feature gates KCP sets per version; and the KubeadmConfig's (or
// KubeadmConfigTemplate's) files when each is written as it is (added or
// changed inline; a file dropped, taken from a Secret, encoded, appended
// or with an owner or mode is not). Anything else stays different (a new
// host selector, another bootstrap change), and a refusal patches nothing
// and says why in the message: either way CAPI rolls the Machine out. An
// infrastructure kind not the provider's gets an empty, successful answer,
// since a Failure would make KCP retry forever; a Failure means only that
// the question could not be answered at the moment (a manifest or host unreadable),
// and CAPI asks again. [MatchesAfterPatches] judges an answer as KCP v1.14
// does; the tests and the single-node controller use it.
//
// # Updating
//
// DoUpdateMachine runs one step per call ([Updater]), decided from what
// the host reports: its agent, found through the Machine's Node and the
// Node's upgradelab.dev/agent-url annotation, reached with the workload
// cluster's kubeconfig ([Workloads]). On the old image: cordon and drain
// through the Eviction API, so PodDisruptionBudgets hold (CAPI does not
// drain for an in-place update; mirror, DaemonSet and finished pods stay;
// the node counts as drained once its pods are gone, not when their
// evictions were granted; a drain a budget still blocks after DrainTimeout
// fails the update, naming the pods and budgets, with nothing changed on
// the host); stage the image in the background; activate the root the
// agent answered with one try; reboot gracefully (BMC GracefulRestart, so
// an OSTree host finalises its deployment; the agent's reboot for a host
// with no BMC). An old OS still running RebootRetry after the reboot it
// asked for never got the request and gets a ForceRestart; one whose
// agent reports it shutting down is left ShutdownTimeout, so a slow clean
// shutdown is not cut (an OSTree host finalises last). On the new image: the health check, which commits
// it, within HealthGrace of boot; the NIC flash when it comes after the
// image; uncordon; done once the Node is Ready at the new kubelet version.
//
// A write cut short (no reply from the agent, or the host restarted under
// it) is started again, up to three times; an image lost before it booted
// (a power cut while an OSTree host finalised) is staged again. On a
// control-plane host the update finishes only once the agent reports the
// feature gates the KubeadmConfig claims (the host's kubeadm upgrade node
// applied the cluster's kubeadm-config, which KCP updates first); when it
// reports anything else the extension runs kubeadm upgrade node once
// itself (as after a revert to an image the host ran before) and fails if
// the gates still differ. Files the KubeadmConfig names that the host does
// not report with their content are written through the agent, so a
// files-only change needs no drain and no reboot. Every update has an
// overall Deadline.
//
// # NIC firmware
//
// When spec.nicFirmware names an NVM package and a port of the running OS
// shows another NVM, the extension stages the package with Redfish
// SimpleUpdate OnReset on each such port and resets the host; the BMC
// flashes during POST and resets once more. planNIC orders the flash so
// the NIC stays up: the NVM first when the new image's driver would stop
// on (or warn about) the old NVM, after the image when the running driver
// would, image first on a tie (a failing image then falls back with the
// NVM untouched). A new driver that does not run the new NVM at all, or
// no order that works, is refused before anything is touched. A flash
// cut short (a port on recovery firmware, under another boot than the one
// the flash began under) is staged again, up to three times. The i40e knowledge (driverLink) is the extension's own, so a
// disagreement with the lab shows as a failed update; a test checks it
// against the lab's rule file.
//
// # Failure and its way out
//
// A failed health check reboots the host so its bootloader falls back, and
// answers Failure with the reason; once the host runs a committed image
// again the node is uncordoned, so the pods the drain moved may come
// back. CAPI's Machine says only that the hook failed (Updating,
// InPlaceUpdateFailed); the reason is the BareMetalMachine's InPlaceUpdated
// condition (False InPlaceUpdateFailed, the message; True once an update
// completes), and [FailedAnnotation] keeps it across a restart of the
// extension. CAPI defines no way out of a failed UpdateMachine but
// remediation: once the Machine's owner (its KCP's or MachineDeployment's
// BareMetalMachineTemplate) no longer asks for the failed image and the
// host runs a committed image, a KCP's Machine is pointed at what the KCP
// asks now, written in KCP's place (package askcp), and the update goes
// on to it (InPlaceUpdateAbandoned, saying what failed and what the host
// runs); the failed update's annotations go. Done means the host runs
// what the Machine says. A MachineDeployment's Machine cannot be pointed
// back (CAPI computes a MachineSet's desired objects only inside its
// controller, and moves only Machines that are not updating), nor a
// KCP's Machine that KCP computes no desired objects for (no cloned-from
// annotations): it stays failed, saying what its owner asks now, until
// it is deleted and its owner replaces it.
//
// The reboot, the NIC flash, the start of the update and of the drain are
// annotations on the BareMetalMachine too ([RebootAnnotation] and the
// rest), stamped with the extension's clock (the reboot and the flash
// also with the host's boot ID), so a restarted extension neither reboots twice nor retries a failed image,
// and a host restart is told by its boot ID, never by comparing clocks.
// The status is patched with an optimistic lock, so neither the provider
// nor the extension loses the other's condition.
package inplace
