// Command upgradelab-agent runs the host OS agent (sim/agent) as its own
// process: the same code the lab runs in process, reaching its host's
// hardware model and workload cluster through the lab's hardware channel
// (agent.Remote, over mutual TLS with the lab CA) and serving the agent's
// API.
//
// Flags: -hardware (the channel's URL), -ca (trusted for the channel and
// required of API clients), -cert and -key (its client certificate for
// the channel), -api-cert and -api-key (the API's serving certificate),
// -listen (default 127.0.0.1:0) and -time-scale. It waits for the channel
// as an init waits for its devices, then runs until interrupted.
//
// Its test builds it and serves the channel with agent.NewHardwareServer
// over the lab's host model; nothing else in the repository starts it.
// It is not a real VM's init: that is cmd/upgradelab-guest. This binary
// links libvirt through sim/lab, so it cannot be linked statically into
// an initramfs; internal/layering checks that it needs cgo, as the control
// for the providers' CGO_ENABLED=0 check.
package main
