// Package timeline is the history of one scenario run: every change the
// monitors saw (an object's flat summary before and after), every runner
// step and every lab event, written as JSON lines (timeline.jsonl) as they
// come. The checks (e2e/check) replay it, the report draws it, and
// `upgradelab check` judges a stored one again.
//
// An [Entry] is one change of one object, Kind/Name: Old is null when the
// object appeared and New is null when it went away, while an empty
// summary is {}, never null, so appearing, going and changing to nothing
// stay apart. Kinds are the monitored ones (Machine, Node, ...) plus
// [KindStep], a runner step named by what it marks (env, upgrade, revert,
// done, fault:NAME, mgmt:kube-apiserver-crashed), and [KindLab], a lab
// event of the host Name.
//
// A [Timeline] takes entries from concurrent writers under one lock and
// writes each at once, so a run that stops midway leaves all it saw. The
// file is in arrival order, and an entry may carry an earlier time than
// the one before it (a lab event keeps its own time, a kube-apiserver
// crash the time it happened); [Timeline.Entries] and the replay sort by
// time. [Timeline.OnEntry] lets a fault wait for its moment; [Read] loads
// a file; [New] keeps a timeline in memory for tests of the checks.
package timeline
