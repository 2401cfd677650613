// Package statefile keeps state in JSON files that survive a harness
// restart: [Write] replaces the whole file through a temporary file and a
// rename, so a reader, or a lab brought up again, sees the old content or
// the new, never a torn file, even when the harness is killed mid-write.
// It does not fsync: it guards against a dying process, not a machine
// losing power. [Read] loads what Write stored.
//
// The lab (sim/lab) keeps lab.json and each host's host.json this way, and
// sim/disk's Save and Load use it.
package statefile
