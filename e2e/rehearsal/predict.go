package rehearsal

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/fleet"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/timeline"
)

// Wave is one run of a plan's wave: a repeat without a fault, or a run
// with one; its clusters' results as the fleet judged them.
type Wave struct {
	// Name is its folder under the rehearsal's (repeat-1, fault-flaky-bmc).
	Name  string `json:"name"`
	Fault string `json:"fault,omitempty"`
	// Dir is its folder: the fleet's artifacts.
	Dir     string          `json:"-"`
	Results []result.Result `json:"-"`
}

// Prediction is what a rehearsal predicts of a site's upgrade: per
// cluster and for the wave, in the site's time (see Split), with the
// failure points found before any run and the ones the runs met.
type Prediction struct {
	Plan string `json:"plan"`
	Site string `json:"site"`
	// TimeScale is the lab's real time per modelled time in the runs.
	TimeScale float64       `json:"timeScale"`
	Batch     int           `json:"batch"`
	Window    time.Duration `json:"window,omitempty"`
	// Repeats are the waves without a fault that ran.
	Repeats int `json:"repeats"`
	// Wave spreads the whole wave's duration over the repeats it
	// finished in; Unfinished are the repeats it did not (a cluster's
	// upgrade never ended, and its batch waits for it). Fits says whether
	// it fits the window: "yes" (p95 within), "at risk" (p50 within, p95
	// not), "no" (or it did not finish), or "" without a window.
	Wave       fleet.Spread        `json:"wave"`
	Unfinished int                 `json:"unfinished,omitempty"`
	Fits       string              `json:"fits,omitempty"`
	Clusters   []ClusterPrediction `json:"clusters"`
	// FailurePoints were found from the inventory before any run.
	FailurePoints []FailurePoint `json:"failurePoints"`
	// LeftOut are the site's clusters the wave did not hold, with why:
	// the prediction says nothing of them.
	LeftOut []Unmapped `json:"leftOut,omitempty"`
	// Met are what the runs broke or where they stopped, each with the
	// run, the rule and what happened.
	Met []Met `json:"met"`
	// Faults are the runs with a fault: how each cluster came out.
	Faults []FaultOutcome `json:"faults,omitempty"`
	Model  Model          `json:"model"`
}

// ClusterPrediction is one cluster's upgrade over the fault-free repeats.
type ClusterPrediction struct {
	Cluster  string `json:"cluster"`
	Strategy string `json:"strategy"`
	// Duration is the upgrade in the site's time; Host and Controller
	// are the p50 run's parts of it (Split).
	Duration   fleet.Spread  `json:"duration"`
	Host       time.Duration `json:"host"`
	Controller time.Duration `json:"controller"`
	// The worst over the repeats, in the site's time.
	APIDown          time.Duration `json:"apiDown"`
	APILongest       time.Duration `json:"apiLongest"`
	APIOutages       int           `json:"apiOutages"`
	EvictionsRefused int           `json:"evictionsRefused"`
	BudgetBreaches   int           `json:"budgetBreaches"`
	// Unfinished are the repeats whose upgrade never finished (stopped
	// at the bound), NotUpgraded those whose run stopped before its
	// upgrade began (in provisioning): Duration spreads the others.
	Unfinished  int `json:"unfinished,omitempty"`
	NotUpgraded int `json:"notUpgraded,omitempty"`
	// Passed is how many repeats passed every rule, of Runs.
	Passed int `json:"passed"`
	Runs   int `json:"runs"`
	// Rules are every rule's verdicts over the repeats.
	Rules []RuleVerdicts `json:"rules"`
}

// RuleVerdicts are one rule's verdicts on a cluster over the repeats,
// with the first run's note (what it measured).
type RuleVerdicts struct {
	Rule     string   `json:"rule"`
	Statuses []string `json:"statuses"`
	Note     string   `json:"note,omitempty"`
}

// Met is a rule a run broke, or a run that stopped.
type Met struct {
	Wave    string `json:"wave"`
	Cluster string `json:"cluster"`
	Rule    string `json:"rule,omitempty"`
	What    string `json:"what"`
	// Lab is, for a run that stopped, the lab's last word on a host of
	// the cluster that failed (a write refused, a boot that found
	// nothing, a link down), as evidence of why.
	Lab string `json:"lab,omitempty"`
	// Predicted are the kinds of the cluster's failure points that fail,
	// found before any run.
	Predicted []string `json:"predicted,omitempty"`
}

// FaultOutcome is one fault's run: each cluster's verdict.
type FaultOutcome struct {
	Fault    string            `json:"fault"`
	Verdicts map[string]string `json:"verdicts"`
}

// Model says what the prediction rests on.
type Model struct {
	Timings     []string `json:"timings"`
	Modelled    []string `json:"modelled"`
	NotModelled []string `json:"notModelled"`
}

// Predict makes the prediction of what a rehearsal of the plan ran.
func Predict(p *Plan, rec *Record) (*Prediction, error) {
	out := &Prediction{Plan: p.Path(), Site: rec.Site, Batch: p.Wave.Batch, Window: p.Window.Duration, FailurePoints: rec.FailurePoints, LeftOut: rec.LeftOut}
	waves, points := rec.Waves, rec.FailurePoints
	var waveTimes []time.Duration
	byCluster := map[string][]clusterRun{}
	var order []string
	for _, w := range waves {
		runs, err := readRuns(w)
		if err != nil {
			return nil, err
		}
		out.Met = append(out.Met, met(w, runs, points)...)
		if w.Fault != "" {
			out.Faults = append(out.Faults, faultOutcome(w, runs))
			continue
		}
		out.Repeats++
		for _, r := range runs {
			if _, seen := byCluster[r.cluster]; !seen {
				order = append(order, r.cluster)
			}
			byCluster[r.cluster] = append(byCluster[r.cluster], r)
			out.TimeScale = r.res.TimeScale
		}
		if d, ok := waveTime(runs, p.Wave.Batch); ok {
			waveTimes = append(waveTimes, d)
		} else {
			out.Unfinished++
		}
	}
	for _, c := range order {
		out.Clusters = append(out.Clusters, predictCluster(c, byCluster[c]))
	}
	out.Wave = fleet.SpreadOf(waveTimes)
	out.Fits = fits(out.Wave, out.Window)
	if out.Unfinished > 0 && out.Window > 0 {
		out.Fits = "no"
	}
	out.Model = model(p, out.TimeScale)
	return out, nil
}

// clusterRun is one cluster's run in one wave.
type clusterRun struct {
	cluster  string
	res      result.Result
	split    Split
	measures check.Measures
	// apiDown and apiLongest are the API's outages in the site's time:
	// each split, as the upgrade is, into host steps and the rest.
	apiDown, apiLongest time.Duration
	// labFailure is the lab's last failure event of the run's hosts.
	labFailure string
	// upgraded: the upgrade began (the cluster was provisioned and its
	// turn came); a run that stopped before is no part of the wave.
	upgraded bool
}

// readRuns reads each cluster's timeline of a wave.
func readRuns(w Wave) ([]clusterRun, error) {
	var out []clusterRun
	for _, r := range w.Results {
		name := clusterOf(r.Cluster)
		path := r.Timeline
		if _, err := os.Stat(path); err != nil { // a rehearsal folder moved since
			path = filepath.Join(w.Dir, "clusters", r.Cluster, result.TimelineFile)
		}
		entries, err := timeline.Read(path)
		if err != nil && r.Error == "" {
			return nil, fmt.Errorf("wave %s, cluster %s: %w", w.Name, name, err)
		} // a run that stopped before its timeline began has none
		split, upgraded := SplitUpgrade(entries)
		run := clusterRun{cluster: name, res: r, split: split, upgraded: upgraded, measures: check.Measure(entries), labFailure: lastLabFailure(entries)}
		if len(entries) > 0 {
			steps := hostSteps(entries, entries[len(entries)-1].Time)
			for _, o := range run.measures.Outages {
				d := Split{Wall: o.To.Sub(o.From), Host: covered(steps, o.From, o.To)}.Lab(r.TimeScale)
				run.apiDown += d
				run.apiLongest = max(run.apiLongest, d)
			}
		}
		out = append(out, run)
	}
	return out, nil
}

// clusterOf is the site's cluster a fleet cluster stands for: the
// fleet names a group's one cluster GROUP-0.
func clusterOf(fleetCluster string) string { return strings.TrimSuffix(fleetCluster, "-0") }

// waveTime is a wave's duration in the site's time: batches one after
// another, each as long as its slowest cluster, as the fleet runs them;
// false when a cluster's upgrade never finished.
func waveTime(runs []clusterRun, batch int) (time.Duration, bool) {
	if batch <= 0 {
		batch = len(runs)
	}
	runs = slices.DeleteFunc(slices.Clone(runs), func(r clusterRun) bool { return !r.upgraded }) // the fleet skips them
	var total time.Duration
	for start := 0; start < len(runs); start += batch {
		var slowest time.Duration
		for _, r := range runs[start:min(start+batch, len(runs))] {
			if !r.split.Finished {
				return 0, false
			}
			slowest = max(slowest, r.lab())
		}
		total += slowest
	}
	return total, true
}

// lab is the run's upgrade in the site's time.
func (r clusterRun) lab() time.Duration { return r.split.Lab(r.res.TimeScale) }

func predictCluster(name string, runs []clusterRun) ClusterPrediction {
	c := ClusterPrediction{Cluster: name, Strategy: runs[0].res.Strategy, Runs: len(runs)}
	var times []time.Duration
	var finished []clusterRun
	for _, r := range runs {
		switch {
		case !r.upgraded:
			c.NotUpgraded++
		case r.split.Finished:
			times = append(times, r.lab())
			finished = append(finished, r)
		default:
			c.Unfinished++
		}
		m := r.measures
		c.APIDown, c.APILongest = max(c.APIDown, r.apiDown), max(c.APILongest, r.apiLongest)
		c.APIOutages, c.EvictionsRefused, c.BudgetBreaches = max(c.APIOutages, len(m.Outages)), max(c.EvictionsRefused, m.EvictionsRefused), max(c.BudgetBreaches, m.BudgetBreaches)
		if !r.res.Failed() {
			c.Passed++
		}
	}
	c.Duration = fleet.SpreadOf(times)
	if len(finished) > 0 {
		mid := slices.SortedFunc(slices.Values(finished), func(a, b clusterRun) int { return cmp.Compare(a.lab(), b.lab()) })[(len(finished)-1)/2]
		c.Host, c.Controller = unscaled(mid.split.Host, mid.res.TimeScale), mid.split.Controller()
	}
	c.Rules = ruleVerdicts(runs)
	return c
}

// ruleVerdicts gathers every rule's verdicts over the runs.
func ruleVerdicts(runs []clusterRun) []RuleVerdicts {
	var out []RuleVerdicts
	index := map[string]int{}
	for _, r := range runs {
		for _, ch := range r.res.Checks {
			i, ok := index[ch.Rule]
			if !ok {
				i = len(out)
				index[ch.Rule] = i
				out = append(out, RuleVerdicts{Rule: ch.Rule, Note: ch.Note})
			}
			out[i].Statuses = append(out[i].Statuses, string(ch.Status))
		}
	}
	return out
}

// labFailures are the lab's events that say a host's step failed.
// (A BootDeviceFailed is not one: a host whose disk holds nothing yet
// reports it on its way to the network boot.)
var labFailures = []string{"WriteRefused", "WriteInterrupted", "FinaliseFailed", "NoBootDevice",
	"NetworkBootPowerFailed", "PowerSupplyFailed", "Fallback", "DiskUnreadable"}

// lastLabFailure is the last failure the lab reported of the timeline's
// hosts since the upgrade began ("" if none): "HOST REASON: MESSAGE".
func lastLabFailure(entries []timeline.Entry) string {
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Kind == timeline.KindStep && e.Name == check.StepUpgrade {
			return ""
		}
		if e.Kind == timeline.KindLab && (slices.Contains(labFailures, e.New["reason"]) || e.New["up"] == "false") {
			return fmt.Sprintf("%s %s: %s", e.Name, e.New["reason"], e.New["message"])
		}
	}
	return ""
}

// met are the rules a wave broke and the runs that stopped, a stop with
// the lab's evidence and the failure points that foretold it.
func met(w Wave, runs []clusterRun, points []FailurePoint) []Met {
	var out []Met
	for _, r := range runs {
		if r.res.Error != "" {
			m := Met{Wave: w.Name, Cluster: r.cluster, What: "stopped: " + r.res.Error, Lab: r.labFailure}
			for _, p := range points {
				if p.Cluster == r.cluster && p.Level == Fails && !slices.Contains(m.Predicted, p.Kind) {
					m.Predicted = append(m.Predicted, p.Kind)
				}
			}
			out = append(out, m)
		}
		for _, v := range check.Failed(r.res.Checks) {
			out = append(out, Met{Wave: w.Name, Cluster: r.cluster, Rule: v.Rule, What: v.Message})
		}
	}
	return out
}

func faultOutcome(w Wave, runs []clusterRun) FaultOutcome {
	f := FaultOutcome{Fault: w.Fault, Verdicts: map[string]string{}}
	for _, r := range runs {
		f.Verdicts[r.cluster] = r.res.Verdict()
	}
	return f
}

func fits(wave fleet.Spread, window time.Duration) string {
	switch {
	case window <= 0 || wave.N == 0:
		return ""
	case wave.P95 <= window:
		return "yes"
	case wave.P50 <= window:
		return "at risk"
	}
	return "no"
}

// PredictionFile and PredictionPage name the prediction in a
// rehearsal's folder.
const (
	PredictionFile = "prediction.json"
	PredictionPage = "prediction.html"
)

// WriteJSON writes the prediction as JSON.
func (p *Prediction) WriteJSON(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
