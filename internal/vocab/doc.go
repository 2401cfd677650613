// Package vocab is the timeline's vocabulary: the kinds of entry, the
// fields of their summaries and the reasons of the workload clusters'
// events. The simulator (sim/workload) emits those events, the recorder
// (e2e/monitor) writes the entries and the rules (e2e/check) read them;
// each imports the words from here, so the rules never import the
// simulator nor the recorder that watches it.
package vocab
