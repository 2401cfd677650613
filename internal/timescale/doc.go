// Package timescale turns modelled durations (a 2 GiB image written at
// 200 MB/s, a 30 s POST, a 90 s NVM flash) into real waits. One [Scale]
// per run stretches or shrinks every modelled step alike, so a scenario
// takes seconds without skipping a step.
//
// A Scale is real time per modelled time: 1 is real time, 0.01 runs a
// modelled minute in 0.6 s, 0 does not wait at all. [Scale.Sleep] waits
// the real time of a modelled duration or until its context ends, which
// is how a power cut stops a write or a flash mid-way. [Parse] reads a
// scale from a flag or a file field; [Seconds] turns the fixtures' seconds
// into a duration.
//
// The lab, the BMCs, the host agents and the workload clusters take the
// run's Scale from the harness (upgradelab's --time-scale, the e2e
// runner's options).
package timescale
