// Package jsonhttp is the JSON plumbing of the host agent API's two
// servers, the lab's simulated agent (sim/agent) and the VM guest
// (sim/vm/guest), and of the JSON clients and servers beside them (the
// lab's Ironic agent, sim/ipa, and the harness's Ironic client). [Reply]
// writes a value as JSON with a status; [Decode] reads a request body of
// at most 1 MiB, refusing unknown fields, and wraps every failure in
// [ErrBadRequest] so a handler answers 400; [NewRequest] makes a request
// with a JSON body.
//
// It exists so the two servers answer and refuse alike: a provider
// talking to the agent API cannot tell the modelled host from the real
// VM by how a malformed or unexpected request is treated.
package jsonhttp
