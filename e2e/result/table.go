package result

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
)

// Key names a run across suites: provider, scenario, form, host OS and
// backend (what stays the same from one night's run to the next).
func (r Result) Key() string {
	k := r.Provider + " " + r.Scenario + "/" + string(r.Form)
	// "mixed (cp-0 ab, ...)" is the mode and each host's kind.
	if mode, _, _ := strings.Cut(r.HostOS, " "); mode != "" && mode != "ab" {
		k += "/" + mode
	}
	if r.Backend != "" {
		k += "/" + r.Backend
	}
	if r.Cluster != "" {
		k += " " + r.Cluster
	}
	return k
}

// Verdict is the run's one word: PASS, FAIL (a rule broken) or STOPPED
// (the run ended early).
func (r Result) Verdict() string {
	switch {
	case r.Error != "":
		return "STOPPED"
	case len(check.Failed(r.Checks)) > 0:
		return "FAIL"
	}
	return "PASS"
}

// byStatus lists the rules of a run with status.
func (r Result) byStatus(status check.Status) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == status {
			out = append(out, c.Rule)
		}
	}
	return out
}

// WriteTable prints the verdict table: one line per run (verdict, run,
// wall time, upgrade time, rules passed), then what each failed run
// broke and which rules could not have failed (not exercised).
func WriteTable(w io.Writer, results []Result) {
	sorted := slices.Clone(results)
	slices.SortStableFunc(sorted, func(a, b Result) int { return cmp.Compare(a.Key(), b.Key()) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERDICT\tRUN\tWALL\tUPGRADE\tPASSED\tNOT EXERCISED\tN/A")
	failed := 0
	for _, r := range sorted {
		if r.Failed() {
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.Verdict(), r.Key(), r.Duration.Round(time.Second), r.Upgrade.Round(100*time.Millisecond),
			len(r.byStatus(check.Pass))+len(r.byStatus(check.ExpectedFail)), len(r.byStatus(check.NotExercised)), len(r.byStatus(check.NotApplicable)))
	}
	tw.Flush()
	for _, r := range sorted {
		if r.Error != "" {
			fmt.Fprintf(w, "\n%s stopped: %s\n", r.Key(), r.Error)
		}
		for _, v := range check.Failed(r.Checks) {
			fmt.Fprintf(w, "%s broke %s\n", r.Key(), v)
		}
	}
	fmt.Fprintf(w, "\n%d run(s), %d failed\n", len(sorted), failed)
}

// Change is one difference between two suites' results.
type Change struct {
	Run string
	// Regression: the change is worse (a rule that started failing, a run
	// that stopped or is gone, a slowdown past the threshold).
	Regression bool
	What       string
}

// DiffOptions say what counts as a regression.
type DiffOptions struct {
	// Slower is the fraction an upgrade may take longer before it is a
	// regression (0.25: 25 %); MinSlower the least absolute difference
	// that counts (the noise of a short run).
	Slower    float64
	MinSlower time.Duration
	// Verdicts compares two suites that must agree rule by rule, as the
	// same scenarios at two time scales: any rule whose verdict differs,
	// either way, is a regression, and times are not compared.
	Verdicts bool
}

// Diff compares two suites' results run by run (by Key): rules that
// started or stopped failing, runs new or gone, and upgrade times
// beyond the threshold. Runs repeated in a suite compare by their worst
// (a failure) and their slowest.
func Diff(old, new []Result, o DiffOptions) []Change {
	oldBy, newBy := byKey(old), byKey(new)
	var out []Change
	for _, k := range unionKeys(oldBy, newBy) {
		o1, inOld := oldBy[k]
		n1, inNew := newBy[k]
		switch {
		case !inNew:
			out = append(out, Change{Run: k, Regression: true, What: "no longer run"})
			continue
		case !inOld:
			// Suites that must agree run the same runs.
			out = append(out, Change{Run: k, Regression: o.Verdicts, What: "new run: " + n1.Verdict()})
			continue
		}
		if o.Verdicts && o1.Error != "" && n1.Error == "" {
			out = append(out, Change{Run: k, Regression: true, What: "stopped early on the first side only: " + o1.Error})
		}
		if o1.Error == "" && n1.Error != "" {
			out = append(out, Change{Run: k, Regression: true, What: "stopped early: " + n1.Error})
		}
		if o.Verdicts {
			out = append(out, verdictChanges(k, o1, n1)...)
			continue
		}
		oldStatus := map[string]check.Status{}
		for _, c := range o1.Checks {
			oldStatus[c.Rule] = c.Status
		}
		for _, c := range n1.Checks {
			before, seen := oldStatus[c.Rule]
			switch {
			case c.Status == check.Fail && before != check.Fail:
				what := fmt.Sprintf("%s started failing (was %s)", c.Rule, cmp.Or(string(before), "not judged"))
				if len(c.Violations) > 0 {
					what += ": " + c.Violations[0].Message
				}
				out = append(out, Change{Run: k, Regression: true, What: what})
			case c.Status == check.NotRun:
				// The stop itself is the change (stopped early, above):
				// a rule the run never reached is neither fixed nor broken.
			case c.Status != check.Fail && before == check.Fail:
				out = append(out, Change{Run: k, What: fmt.Sprintf("%s fixed (now %s)", c.Rule, c.Status)})
			case seen && before == check.Pass && (c.Status == check.NotExercised || c.Status == check.NotApplicable):
				out = append(out, Change{Run: k, Regression: true, What: fmt.Sprintf("%s no longer exercised (now %s): it can no longer fail", c.Rule, c.Status)})
			}
		}
		if d := n1.Upgrade - o1.Upgrade; o1.Upgrade > 0 && n1.Upgrade > 0 && d >= o.MinSlower && float64(d) > o.Slower*float64(o1.Upgrade) {
			out = append(out, Change{Run: k, Regression: true, What: fmt.Sprintf("upgrade took %s, was %s (+%.0f%%)",
				n1.Upgrade.Round(100*time.Millisecond), o1.Upgrade.Round(100*time.Millisecond), 100*float64(d)/float64(o1.Upgrade))})
		}
	}
	return out
}

// verdictChanges are the rules of a run whose verdict differs between
// old and new, each a regression: the message of the failing side says
// what it saw.
func verdictChanges(run string, old, new Result) []Change {
	status := func(r Result) map[string]check.Result {
		m := map[string]check.Result{}
		for _, c := range r.Checks {
			m[c.Rule] = c
		}
		return m
	}
	before, after := status(old), status(new)
	var out []Change
	for _, rule := range unionKeys(before, after) {
		b, a := before[rule], after[rule]
		if b.Status == a.Status {
			continue
		}
		what := fmt.Sprintf("%s is %s, was %s", rule, cmp.Or(string(a.Status), "not judged"), cmp.Or(string(b.Status), "not judged"))
		for _, c := range []check.Result{a, b} {
			if len(c.Violations) > 0 {
				what += ": " + c.Violations[0].Message
				break
			}
		}
		out = append(out, Change{Run: run, Regression: true, What: what})
	}
	return out
}

// unionKeys are the keys of a and b together, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// byKey keeps, per key, the worst of repeated runs: a failed one over a
// passed one, the slowest upgrade.
func byKey(rs []Result) map[string]Result {
	out := map[string]Result{}
	for _, r := range rs {
		prev, ok := out[r.Key()]
		switch {
		case !ok, r.Failed() && !prev.Failed(), r.Failed() == prev.Failed() && r.Upgrade > prev.Upgrade:
			out[r.Key()] = r
		}
	}
	return out
}

// WriteDiff prints changes, regressions first.
func WriteDiff(w io.Writer, changes []Change) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "no change")
		return
	}
	regressions := 0
	for _, regression := range []bool{true, false} {
		for _, c := range changes {
			if c.Regression != regression {
				continue
			}
			mark := "  "
			if regression {
				mark = "! "
				regressions++
			}
			fmt.Fprintf(w, "%s%s: %s\n", mark, c.Run, c.What)
		}
	}
	fmt.Fprintf(w, "%d change(s), %d regression(s)\n", len(changes), regressions)
}

// Regressions counts the regressions among changes.
func Regressions(changes []Change) int {
	n := 0
	for _, c := range changes {
		if c.Regression {
			n++
		}
	}
	return n
}
