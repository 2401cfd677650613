// Package testdir gives a test or benchmark the folder it runs a plane, a
// lab or a whole scenario in. [For] is the test's temporary folder,
// removed with the test; with KEEP_DIR set it is a new folder under
// KEEP_DIR that outlives the test, so a failure's manager logs, lab
// events, disks and timeline can be read afterwards (the test logs where).
// [Named] does the same under a name of the caller's, for a benchmark that
// runs several scenarios at once.
package testdir
