// Package webhooks validates the provider's kinds before they are stored:
// what the CRD schema cannot say, each error an API server Invalid error
// naming the kind, the object and the field. [Setup] registers the
// validators with the manager's webhook server; the kubebuilder markers in
// markers.go are what controller-gen turns into
// config/webhook/manifests.yaml.
//
//   - BareMetalMachine and BareMetalMachineTemplate: the image URL (and
//     the NIC firmware package's, whose path must name the package) is
//     http or https with a host; the host selector parses.
//   - BareMetalMachine updates: providerID is set once; the host selector
//     never changes (the machine would have to move). The image may
//     change: CAPI patches it during an in-place update.
//   - BareMetalCluster updates: the control-plane endpoint is immutable
//     once set, since CAPI and every kubeconfig point at it.
//   - BareMetalMachineTemplate updates: any change of the spec is refused,
//     as CAPI's contract asks (a rollout is a new template), except the
//     topology controller's dry-run (util/topology.IsDryRunRequest), which
//     applies its desired template to learn whether it differs and which
//     the contract allows.
//
// BareMetalClusterTemplate has no webhook.
package webhooks
