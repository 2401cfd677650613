// Package jsonhttp is the JSON plumbing of the host agent API's two
// servers, the lab's simulated agent (sim/agent) and the VM guest
// (sim/vm/guest). [Reply] writes a value as JSON with a status; [Decode]
// reads a request body of at most 1 MiB, refusing unknown fields, and
// wraps every failure in [ErrBadRequest] so a handler answers 400.
//
// It exists so the two servers answer and refuse alike: a provider
// talking to the agent API cannot tell the modelled host from the real
// VM by how a malformed or unexpected request is treated.
package jsonhttp
