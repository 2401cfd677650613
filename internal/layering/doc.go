// Package layering holds the test of the module's layers, read from the
// import graph that go list reports; a change that breaks a rule fails
// make test. The rules are docs/ARCHITECTURE.md's "Layers", kept here as
// data (tiers and layers in layering_test.go):
//   - no package imports one of a higher tier: api/, then internal/, then
//     sim/ and providers/, then e2e/, then cmd/;
//   - the wire APIs (api/) import only the standard library and each
//     other;
//   - the providers under test (providers/, cmd/upgradelab-baremetal,
//     cmd/upgradelab-inplace) never import the simulator or the harness;
//   - the simulator (sim/, cmd/upgradelab-agent) never imports a provider
//     or the harness;
//   - the report (e2e/report) reads results and never imports the runner;
//   - the monitors, checks and timeline import no provider;
//   - the rules (e2e/check), the timeline and the scenario files build
//     neither the simulator nor the recorder that watches it: they share
//     the timeline's words through internal/vocab;
//   - the runner's own imports include no provider: it drives providers
//     through their configs, and e2e/reference is its one adapter to
//     upgradelab's own.
//
// A second test checks that the provider's and the extension's binaries,
// and the VM guest's init (linked statically into an initramfs), need no
// cgo outside the standard library. The list is taken with cgo on: with
// CGO_ENABLED=0 a cgo binding such as libvirt's keeps a stub file and
// fails only when the code using it compiles, so a list taken with cgo off
// would not show it. The host agent, which drives libvirt, is the check's
// control: the test fails unless it is seen to need cgo.
//
// The package has no code of its own, only this file and its tests.
package layering
