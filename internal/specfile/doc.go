// Package specfile decodes the YAML files people write (lab files, image
// and NVM catalogs, NIC rules, scenarios, provider configs, fleets, and
// sim/abcases' table) strictly: an unknown or misspelt field is an error
// that names the file, the line and the field, never silently ignored.
//
// [Decode] reads one document with yaml.v3's KnownFields and rewrites its
// errors, so "yaml: unmarshal errors: line 5: field colour not found in
// type nic.Rule" reads "FILE: line 5: unknown field "colour""; an empty
// document is an error too. What each value must be is the caller's own
// validation, which collects what it finds as [Problems] ("field:
// problem"); specfile guarantees only that every field written was read.
package specfile
