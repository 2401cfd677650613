package report

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/e2e/check"
	"github.com/upgradelab/upgradelab/e2e/result"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// Layout is how a suite laid its runs out: how many processes ran runs
// at once and which process ran each run when. A serial suite is one
// process.
type Layout struct {
	Processes int         `json:"processes"`
	Runs      []Placement `json:"runs"`
}

// Placement is where and when one run ran.
type Placement struct {
	// Run is the run's anchor: provider-scenario-form (RunAnchor).
	Run     string    `json:"run"`
	Process int       `json:"process"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}

// RunAnchor names a run in the report and in a Layout: its folder's
// name (provider-scenario-form, with a repeat's number when a suite runs
// each scenario more than once), or provider-scenario-form.
func RunAnchor(r result.Result) string {
	if r.Timeline != "" {
		return filepath.Base(filepath.Dir(r.Timeline))
	}
	return r.Provider + "-" + r.Scenario + "-" + string(r.Form)
}

// Write writes report.html into dir.
func Write(dir string, results []result.Result, layout Layout) error {
	page := pageData{Generated: time.Now().UTC().Format(time.RFC3339), Layout: layoutPicture(layout), Groups: ruleGroups()}
	page.Summary, page.Failures = summarize(results, layout)
	for _, res := range sortedForTable(results) {
		page.Runs = append(page.Runs, runRow(res))
	}
	page.Comparisons = sideBySide(results)
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return pageTemplate.Execute(f, page)
}

// sortedForTable puts the runs of one scenario and form together, one
// row per host OS and provider, so a provider's results read beside the
// reference's.
func sortedForTable(results []result.Result) []result.Result {
	sorted := append([]result.Result(nil), results...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if a.Form != b.Form {
			return a.Form < b.Form
		}
		// A provider without the lab (no host OS) sits with the A/B runs.
		if ka, kb := cmp.Or(a.HostOS, "ab"), cmp.Or(b.HostOS, "ab"); ka != kb {
			return ka < kb
		}
		return a.Provider < b.Provider
	})
	return sorted
}

// ruleGroups are the table's column groups: check.Rules by group, in
// the order of check.Groups.
func ruleGroups() []groupData {
	var out []groupData
	for _, g := range check.Groups {
		gd := groupData{Name: string(g)}
		for _, r := range check.Rules {
			if r.Group == g {
				gd.Rules = append(gd.Rules, ruleHead{Name: r.Name, Why: r.Why})
			}
		}
		out = append(out, gd)
	}
	return out
}

// summarize is the page's first line and what failed: each run that
// stopped, with why, and each rule a run broke, with its first
// violation.
func summarize(results []result.Result, layout Layout) (string, []failure) {
	var passed, failed, stopped, broken int
	var failures []failure
	for _, res := range sortedForTable(results) {
		name := runTitle(res) + " on " + res.Provider
		switch res.Verdict() {
		case "PASS":
			passed++
		case "STOPPED":
			stopped++
			failures = append(failures, failure{Run: name, Anchor: RunAnchor(res), What: "stopped: " + res.Error})
		default:
			failed++
		}
		for _, c := range res.Checks {
			if c.Status == check.Fail && len(c.Violations) > 0 {
				broken++
				failures = append(failures, failure{Run: name, Anchor: RunAnchor(res), What: c.Violations[0].String()})
			}
		}
	}
	line := fmt.Sprintf("%d run(s): %d passed, %d failed, %d stopped; %d rule(s) broken", len(results), passed, failed, stopped, broken)
	if wall := suiteWall(results, layout); wall > 0 {
		line += "; wall time " + wall.Round(time.Second).String()
	}
	return line, failures
}

// suiteWall is from the first run's start to the last one's end.
func suiteWall(results []result.Result, layout Layout) time.Duration {
	var first, last time.Time
	widen := func(start, end time.Time) {
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if end.After(last) {
			last = end
		}
	}
	for _, p := range layout.Runs {
		widen(p.Start, p.End)
	}
	if len(layout.Runs) == 0 {
		for _, r := range results {
			widen(r.Started, r.Started.Add(r.Duration))
		}
	}
	return last.Sub(first)
}

// shortName is a run's name in the table: its scenario, with its repeat
// when the suite ran it more than once; form, host OS and provider have
// columns of their own.
func shortName(res result.Result) string {
	anchor := RunAnchor(res)
	if i := strings.LastIndex(anchor, "-"); i > 0 && strings.HasPrefix(anchor[i+1:], "r") && strings.Trim(anchor[i+2:], "0123456789") == "" && len(anchor) > i+2 {
		return res.Scenario + " #" + anchor[i+2:]
	}
	return res.Scenario
}

// hostOSColumn is the host OS cell: the mode (ab, ostree, mixed) and the
// backend when the hosts were real VMs; the whole description is the
// cell's title.
func hostOSColumn(res result.Result) string {
	mode, _, _ := strings.Cut(res.HostOS, " ")
	if res.Backend != "" {
		mode += "/" + res.Backend
	}
	return mode
}

// runTitle names a run whole: scenario, form, and on the lab its hosts'
// OS and backend.
func runTitle(res result.Result) string {
	title := shortName(res) + " (" + string(res.Form) + ")"
	if res.HostOS != "" {
		title += " on " + res.HostOS + " hosts"
		if res.Backend != "" {
			title += ", " + res.Backend + " VMs"
		}
	}
	return title
}

func runRow(res result.Result) runData {
	run := runData{Result: res, Name: shortName(res), HostOSColumn: hostOSColumn(res), Duration: res.Duration.Round(time.Second).String(),
		Anchor: RunAnchor(res)}
	run.Title = runTitle(res)
	byRule := map[string]check.Result{}
	for _, c := range res.Checks {
		byRule[c.Rule] = c
		if c.Note != "" && c.Status != check.NotRun {
			run.Notes = append(run.Notes, c.Rule+": "+c.Note)
		}
	}
	for _, g := range check.Groups {
		for _, r := range check.Rules {
			if r.Group != g {
				continue
			}
			c, ok := byRule[r.Name]
			if !ok {
				c = check.Result{Rule: r.Name, Status: check.NotRun, Note: "not judged in this run"}
			}
			run.Cells = append(run.Cells, cellFor(c))
		}
	}
	run.Violations = check.Failed(res.Checks)
	if entries, err := timeline.Read(res.Timeline); err == nil {
		run.Picture = picture(entries)
	}
	return run
}

// cellStyle is each status's mark and CSS class in the table.
var cellStyle = map[check.Status]struct{ Mark, Class string }{
	check.Pass:          {"✓", "pass"},
	check.Fail:          {"✗", "fail"},
	check.ExpectedFail:  {"(✗)", "xfail"},
	check.NotExercised:  {"○", "unex"},
	check.NotApplicable: {"·", "na"},
	check.NotRun:        {"–", "notrun"},
}

// cellFor is one rule's cell: its mark, and as its title the status and
// the first violation or the rule's note.
func cellFor(c check.Result) cellData {
	style, ok := cellStyle[c.Status]
	if !ok {
		style.Mark, style.Class = "?", "na"
	}
	title := c.Rule + ": " + string(c.Status)
	if len(c.Violations) > 0 {
		title += ": " + c.Violations[0].String()
	} else if c.Note != "" {
		title += ": " + c.Note
	}
	return cellData{Mark: style.Mark, Class: style.Class, Title: title}
}

type pageData struct {
	Generated string
	// Summary is the first line: runs passed, failed and stopped, rules
	// broken, wall time; Failures says what failed.
	Summary  string
	Failures []failure
	Groups   []groupData
	Runs     []runData
	// Comparisons put one scenario's runs by different providers side
	// by side.
	Comparisons []comparison
	Layout      *layoutData
}

// failure is one run that stopped, or one rule it broke.
type failure struct{ Run, Anchor, What string }

// groupData is one group of the table's rule columns.
type groupData struct {
	Name  string
	Rules []ruleHead
}

// layoutData is the suite's layout: a row per process, a bar per run.
type layoutData struct {
	Processes     int
	Wall          string
	Width, Height int
	Rows          []rowData
	Ticks         []tick
}

// layoutPicture draws which process ran which run when.
func layoutPicture(l Layout) *layoutData {
	if len(l.Runs) == 0 {
		return nil
	}
	start, end := l.Runs[0].Start, l.Runs[0].End
	for _, r := range l.Runs {
		if r.Start.Before(start) {
			start = r.Start
		}
		if r.End.After(end) {
			end = r.End
		}
	}
	span := end.Sub(start).Seconds()
	if span <= 0 {
		return nil
	}
	x := func(t time.Time) float64 { return labelWidth + t.Sub(start).Seconds()/span*plotWidth }
	d := &layoutData{Processes: max(l.Processes, 1), Wall: end.Sub(start).Round(time.Second).String(), Width: labelWidth + plotWidth + 10}
	rows := map[int]*rowData{}
	for _, r := range l.Runs {
		row := rows[r.Process]
		if row == nil {
			row = &rowData{Label: fmt.Sprintf("process %d", r.Process)}
			rows[r.Process] = row
		}
		row.Bars = append(row.Bars, bar{X: x(r.Start), W: max(x(r.End)-x(r.Start), 1), Color: color(r.Run),
			Title: fmt.Sprintf("%s: from %s for %s", r.Run, r.Start.Sub(start).Round(time.Second), r.End.Sub(r.Start).Round(time.Second))})
	}
	procs := make([]int, 0, len(rows))
	for p := range rows {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	for i, p := range procs {
		row := *rows[p]
		row.Y = 20 + i*rowHeight
		d.Rows = append(d.Rows, row)
	}
	d.Height = 30 + len(procs)*rowHeight
	for i := 0; i <= 5; i++ {
		d.Ticks = append(d.Ticks, tick{X: labelWidth + float64(i)*plotWidth/5, Label: fmt.Sprintf("%.0fs", span*float64(i)/5)})
	}
	return d
}

type ruleHead struct{ Name, Why string }

type runData struct {
	result.Result
	// Name is the short name in the table; Title says it whole.
	Name, Title, HostOSColumn, Duration, Anchor string
	Cells                                       []cellData
	Violations                                  []check.Violation
	// Notes are what the rules saw (the API's outages, evictions).
	Notes   []string
	Picture *pictureData
}

// cellData is a rule's mark in the table (Text: its verdict in words, in
// a side-by-side table).
type cellData struct{ Mark, Class, Title, Text string }

// pictureData is one SVG: a row per Machine and host, a bar per state.
type pictureData struct {
	Width, Height int
	Rows          []rowData
	UpgradeX      float64
	Ticks         []tick
}

type rowData struct {
	Label string
	Y     int
	Bars  []bar
}

type bar struct {
	X, W  float64
	Color string
	Title string
}

type tick struct {
	X     float64
	Label string
}

const (
	labelWidth = 220
	plotWidth  = 900
	rowHeight  = 16
)

// picture draws Machines (by phase), BareMetalHosts (by provisioning
// state, each followed by its Ironic node's when Ironic keeps it), the
// workload API (up or down) and the application's
// Deployment (ready replicas) between the run's first and last entry.
func picture(entries []timeline.Entry) *pictureData {
	if len(entries) == 0 {
		return nil
	}
	start, end := entries[0].Time, entries[len(entries)-1].Time
	span := end.Sub(start).Seconds()
	if span <= 0 {
		return nil
	}
	x := func(t time.Time) float64 { return labelWidth + t.Sub(start).Seconds()/span*plotWidth }
	type change struct {
		at    time.Time
		value string
	}
	series := map[string][]change{}
	p := &pictureData{Width: labelWidth + plotWidth + 10}
	for _, e := range entries {
		if e.Kind == timeline.KindStep {
			if e.Name == check.StepUpgrade {
				p.UpgradeX = x(e.Time)
			}
			continue
		}
		key, v, ok := seriesValue(e)
		if !ok {
			continue
		}
		if s := series[key]; len(s) > 0 && s[len(s)-1].value == v {
			continue
		}
		series[key] = append(series[key], change{e.Time, v})
	}
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		row := rowData{Label: k, Y: 20 + i*rowHeight}
		s := series[k]
		for j, c := range s {
			if c.value == "" {
				continue
			}
			until := end
			if j+1 < len(s) {
				until = s[j+1].at
			}
			row.Bars = append(row.Bars, bar{X: x(c.at), W: max(x(until)-x(c.at), 1), Color: color(c.value),
				Title: fmt.Sprintf("%s: %s from %s for %s", k, c.value, c.at.Sub(start).Round(100*time.Millisecond), until.Sub(c.at).Round(100*time.Millisecond))})
		}
		p.Rows = append(p.Rows, row)
	}
	p.Height = 30 + len(keys)*rowHeight
	for i := 0; i <= 5; i++ {
		p.Ticks = append(p.Ticks, tick{X: labelWidth + float64(i)*plotWidth/5, Label: fmt.Sprintf("%.0fs", span*float64(i)/5)})
	}
	return p
}

// seriesValue is the picture's row of an entry (its key) and the value
// the row shows from then on; ok is false for entries the picture does
// not draw.
func seriesValue(e timeline.Entry) (key, v string, ok bool) {
	var field string
	switch e.Kind {
	case vocab.KindMachine:
		field = vocab.FieldPhase
	case vocab.KindHost, vocab.KindIronicNode:
		field = vocab.FieldState
	case vocab.KindWorkloadAPI:
		field = vocab.FieldAPIAvailable
	case vocab.KindApp:
		field = vocab.FieldReadyCount
	default:
		return "", "", false
	}
	key = e.Kind + "/" + e.Name
	if e.Kind == vocab.KindIronicNode { // its host's row, then its node's
		key = vocab.KindHost + "/" + e.Name + " · Ironic"
	}
	if e.New == nil {
		return key, "", true
	}
	v = e.New[field]
	switch e.Kind {
	case vocab.KindMachine:
		if e.New[vocab.FieldUpdating] != "" {
			v = "Updating"
		}
	case vocab.KindWorkloadAPI:
		v = map[string]string{"true": "API up", "false": "API down: " + e.New[vocab.FieldAPIError]}[v]
	case vocab.KindApp:
		v = appValue(e.New)
	}
	return key, v, true
}

// appValue is the application's state as the picture colours it.
func appValue(d map[string]string) string {
	ready, want := d[vocab.FieldReadyCount], d[vocab.FieldReplicas]
	switch {
	case ready == want:
		return "ready " + ready + "/" + want
	case ready == "0":
		return "none ready of " + want
	default:
		return "degraded " + ready + "/" + want
	}
}

var fixed = map[string]string{
	"Running": "#4caf50", "provisioned": "#4caf50", "Provisioning": "#2196f3", "provisioning": "#2196f3",
	"Provisioned": "#03a9f4", "Updating": "#ff9800", "Deleting": "#f44336", "deprovisioning": "#f44336",
	"available": "#9e9e9e", "Pending": "#bdbdbd", "registering": "#ce93d8", "inspecting": "#ba68c8",
	// Ironic's provision states.
	"active": "#4caf50", "deploying": "#2196f3", "wait call-back": "#64b5f6", "cleaning": "#e57373", "clean wait": "#ef9a9a",
	"manageable": "#bdbdbd", "enroll": "#ce93d8", "verifying": "#ce93d8", "deploy failed": "#b71c1c", "clean failed": "#b71c1c",
}

func color(v string) string {
	if c, ok := fixed[v]; ok {
		return c
	}
	for prefix, c := range map[string]string{"API up": "#4caf50", "API down": "#f44336", "ready ": "#4caf50", "degraded ": "#ff9800", "none ready": "#f44336"} {
		if strings.HasPrefix(v, prefix) {
			return c
		}
	}
	h := fnv.New32a()
	h.Write([]byte(v))
	return fmt.Sprintf("hsl(%d,45%%,60%%)", h.Sum32()%360)
}

var pageTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>upgradelab e2e report</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 4px;font-size:12px}
td.m{text-align:center;min-width:1.2em}
th.rule{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:normal}
th.group{text-transform:uppercase;font-size:11px;letter-spacing:.05em}
.pass{background:#c8e6c9}.fail{background:#ffcdd2;font-weight:bold}.na{color:#999}.unex{background:#fff3c4;color:#6d5c00}.xfail{background:#ffe0b2}.notrun{background:#eceff1;color:#607d8b}
.summary{font-size:16px;font-weight:bold}.bad{color:#b71c1c}
.v{font-family:monospace;font-size:12px}
</style></head><body>
<h1>upgradelab e2e report</h1>
<p class="summary{{if .Failures}} bad{{end}}">{{.Summary}}</p>
{{if .Failures}}<ul>{{range .Failures}}<li><a href="#{{.Anchor}}">{{.Run}}</a>: <span class="v">{{.What}}</span></li>{{end}}</ul>{{end}}
<p>Each cell is one rule (docs/CONFORMANCE.md; hover a rule's name for what it protects, a cell for the verdict and the first violation) in one run:
<span class="pass">✓ pass</span>, <span class="fail">✗ fail</span>, <span class="xfail">(✗) expected fail</span> (a fault variant broke it, as it was to),
<span class="unex">○ not exercised</span> (it held, but what it judges never happened in the run, so it could not have failed: not a pass),
<span class="notrun">– not run</span> (the run stopped before the rule was judged), <span class="na">· n/a</span> (the rule means nothing for that run). Generated {{.Generated}}.</p>
<table><tr><th rowspan="2">run</th><th rowspan="2">form</th><th rowspan="2">host OS</th><th rowspan="2">provider</th><th rowspan="2">time</th>{{range .Groups}}<th class="group" colspan="{{len .Rules}}">{{.Name}}</th>{{end}}</tr>
<tr>{{range .Groups}}{{range .Rules}}<th class="rule" title="{{.Why}}">{{.Name}}</th>{{end}}{{end}}</tr>
{{range .Runs}}<tr><td title="{{.Title}}"><a href="#{{.Anchor}}">{{.Name}}</a>{{if .Error}} <b>stopped</b>{{end}}</td><td>{{.Form}}</td><td title="{{.HostOS}}">{{.HostOSColumn}}</td><td>{{.Provider}}</td><td>{{.Duration}}</td>
{{range .Cells}}<td class="m {{.Class}}" title="{{.Title}}">{{.Mark}}</td>{{end}}</tr>
{{end}}</table>
{{with .Comparisons}}<h2 id="side-by-side">Side by side</h2>
<p>Each scenario that more than one provider ran: its timing, what the workload's users saw and what became of the hosts.</p>
{{range .}}<h3>{{.Title}}</h3>
<table><tr><th>provider</th><th>verdict</th><th>provision</th><th>upgrade</th>{{range .Rules}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td><a href="#{{.Anchor}}">{{.Provider}}</a></td><td>{{.Verdict}}</td><td>{{.Provision}}</td><td>{{.Upgrade}}</td>{{range .Cells}}<td class="{{.Class}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>
<p>{{if .Differs}}Verdicts differ on: {{.Differs}}.{{else}}Every rule has the same verdict.{{end}}</p>
{{end}}{{end}}
{{with .Layout}}<h2 id="layout">Layout</h2>
<p>{{.Processes}} process(es) ran the runs, each run on its own plane and lab; {{.Wall}} from the first start to the last end. Hover a bar for its run.</p>
{{$h := .Height}}<svg width="{{.Width}}" height="{{.Height}}" xmlns="http://www.w3.org/2000/svg" font-size="11">
{{range .Ticks}}<line x1="{{.X}}" x2="{{.X}}" y1="12" y2="{{$h}}" stroke="#eee"/><text x="{{.X}}" y="10">{{.Label}}</text>{{end}}
{{range .Rows}}<text x="0" y="{{.Y}}" dy="11">{{.Label}}</text>{{$y := .Y}}{{range .Bars}}<rect x="{{.X}}" y="{{$y}}" width="{{.W}}" height="13" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{end}}{{end}}
</svg>{{end}}
{{range .Runs}}
<h2 id="{{.Anchor}}">{{.Title}} on {{.Provider}}</h2>
<p>{{.Strategy}}, {{.Duration}}; {{with .Management}}management cluster {{.}}; {{end}}CAPI's reconcile rate limit {{if .CAPIRateLimiting}}on{{else}}off{{end}}; timeline: <code>{{.Timeline}}</code></p>
{{if .Error}}<p class="fail">Stopped early: {{.Error}}</p>{{end}}
{{range .APIServerCrashes}}<p><b>Management</b> {{.}}</p>{{end}}
{{if .Violations}}<ul>{{range .Violations}}<li class="v">{{.String}}</li>{{end}}</ul>{{end}}
{{if .Profile.Phases}}<pre class="v">{{.Profile.String}}</pre>{{end}}
{{if .Notes}}<ul>{{range .Notes}}<li class="v">{{.}}</li>{{end}}</ul>{{end}}
{{with .Picture}}{{$h := .Height}}<svg width="{{.Width}}" height="{{.Height}}" xmlns="http://www.w3.org/2000/svg" font-size="11">
{{range .Ticks}}<line x1="{{.X}}" x2="{{.X}}" y1="12" y2="{{$h}}" stroke="#eee"/><text x="{{.X}}" y="10">{{.Label}}</text>{{end}}
{{range .Rows}}<text x="0" y="{{.Y}}" dy="11">{{.Label}}</text>{{$y := .Y}}{{range .Bars}}<rect x="{{.X}}" y="{{$y}}" width="{{.W}}" height="13" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{end}}{{end}}
{{if .UpgradeX}}<line x1="{{.UpgradeX}}" x2="{{.UpgradeX}}" y1="12" y2="{{.Height}}" stroke="black" stroke-dasharray="4"/>{{end}}
</svg>{{end}}
{{end}}
</body></html>
`))
