// Package queue hands values from producers that must never block to
// readers, in order and without a bound. The producers are a hypervisor's
// event callback (libvirt's), the lab and its BMCs changing state, and a
// workload cluster's events: a 100-host lab powering on at once loses
// nothing, and a slow reader never stalls the producer.
//
// [Unbounded] delivers pushed values on one channel to one reader; Close
// stops it and drops what was not read. [Fanout] gives every emitted value
// to each subscriber through an Unbounded queue of its own; Subscribe
// returns the channel and a cancel function, and Close ends every
// subscription. The cost of never blocking is memory: a reader that stops
// reading without cancelling keeps its queue growing.
package queue
