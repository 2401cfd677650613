// Package layering holds the test of the module's layers: which packages
// may import which, read from the import graph `go list` reports. The
// rules are docs/ARCHITECTURE.md's "Layers"; a change that breaks one
// fails `make test`.
package layering
