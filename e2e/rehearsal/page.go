package rehearsal

import (
	"fmt"
	"html/template"
	"os"
	"strings"
	"time"
)

// model states what a prediction rests on: where each timing comes
// from, what the lab models and what it does not.
func model(p *Plan, scale float64) Model {
	site, used := p.Timing, p.Timing.WithDefaults()
	source := func(siteValue, value float64, what, unit string) string {
		if siteValue > 0 {
			return fmt.Sprintf("%s: %g %s, the site's own (the plan's timing)", what, value, unit)
		}
		return fmt.Sprintf("%s: %g %s, the lab's default for a rack server, not the site's", what, value, unit)
	}
	return Model{
		Timings: []string{
			fmt.Sprintf("the lab ran at time scale %g: a host's modelled step took %g of its length in real time, and its length is counted here", scale, scale),
			"the managers' time (CAPI's requeues and drains, the provider's and Ironic's calls) is counted as it ran, on this machine: CAPI waits in real time whatever the scale, and a loaded machine makes it longer",
			source(site.PostSeconds, used.PostSeconds, "firmware POST", "s"),
			source(site.BootSeconds, used.BootSeconds, "OS boot", "s"),
			source(site.ShutdownSeconds, used.ShutdownSeconds, "graceful shutdown", "s"),
			source(site.DiskWriteMBps, used.DiskWriteMBps, "image write", "MB/s"),
			source(site.FinaliseSeconds, used.FinaliseSeconds, "OSTree finalise at shutdown", "s"),
			"NVM flash: each NVM image's flashSeconds in the lab's catalog (fixtures/nic/nvm-images.yaml), not the site's",
			"kubeadm init and join, and a kubelet's wait before it tries again: the lab's agent's timings",
			"counted at the length they took, and so shorter than the site's: the other waits the lab models at the time scale (a node's grace period before NotReady, the VIP's lease, etcd's election, pods starting and stopping in a drain)",
		},
		Modelled: []string{
			"the hosts' BMCs (Redfish over HTTPS and IPMI over RMCP+), power, POST, boot order and boot counting",
			"A/B and OSTree disks: image writes, their room, fallback to the last good root",
			"i40e ports: the driver of each image against each port's NVM, by the lab's i40e rules",
			"CAPI's own managers (core, KCP, kubeadm bootstrap) as CAPI ships them, with their webhooks",
			"each workload cluster's API, its nodes, its application's Deployment and budget, drains and evictions",
		},
		NotModelled: []string{
			"the site's own partitions: an export does not hold them; the lab lays out each root disk itself",
			"the site's network: VLANs, bonds, switches, DHCP and image servers are the lab's",
			"applications beyond the largest budgeted one of each cluster, and their start-up time",
			"the site's provider: the lab runs upgradelab's provider and in-place extension, not Metal3's",
			"hardware faults other than the plan's faults",
		},
	}
}

// WritePage writes the prediction as one HTML page.
func (p *Prediction) WritePage(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pageTemplate.Execute(f, p); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Text is the prediction for a terminal.
func (p *Prediction) Text() string {
	var b strings.Builder
	var parts []string
	if p.Wave.N > 0 {
		parts = append(parts, fmt.Sprintf("p50 %s, p95 %s in the site's time", round(p.Wave.P50), round(p.Wave.P95)))
	}
	if p.Unfinished > 0 {
		parts = append(parts, fmt.Sprintf("did not finish in %d repeat(s): a cluster's upgrade never ended and its batch waits for it", p.Unfinished))
	}
	if p.Window > 0 {
		parts = append(parts, fmt.Sprintf("window %s: fits %s", round(p.Window), p.Fits))
	}
	fmt.Fprintf(&b, "wave (%d repeat(s), batch %s): %s", p.Repeats, batchText(p.Batch), strings.Join(parts, "; "))
	b.WriteString("\n")
	for _, c := range p.Clusters {
		took := fmt.Sprintf("p50 %-9s p95 %-9s (hosts %s, controllers %s)", round(c.Duration.P50), round(c.Duration.P95), round(c.Host), round(c.Controller))
		if c.Unfinished > 0 {
			took = fmt.Sprintf("did not finish in %d of %d repeat(s)", c.Unfinished, c.Runs)
		}
		if c.NotUpgraded > 0 {
			took += fmt.Sprintf("; never provisioned in %d of %d repeat(s)", c.NotUpgraded, c.Runs)
		}
		fmt.Fprintf(&b, "  %-24s %-9s %s  API down %s, evictions refused %d, budget breaches %d, passed %d/%d\n",
			c.Cluster, c.Strategy, took, round(c.APIDown), c.EvictionsRefused, c.BudgetBreaches, c.Passed, c.Runs)
	}
	for _, u := range p.LeftOut {
		fmt.Fprintf(&b, "  not rehearsed: %s\n", u)
	}
	fmt.Fprintf(&b, "failure points found before any run: %d; met in the runs: %d\n", len(p.FailurePoints), len(p.Met))
	for _, m := range p.Met {
		fmt.Fprintf(&b, "  %s %s: %s\n", m.Wave, strings.TrimSpace(m.Cluster+" "+m.Rule), m.What)
		if m.Lab != "" {
			fmt.Fprintf(&b, "    the lab: %s\n", m.Lab)
		}
		if len(m.Predicted) > 0 {
			fmt.Fprintf(&b, "    foretold before any run: %s\n", strings.Join(m.Predicted, ", "))
		}
	}
	for _, f := range p.Faults {
		fmt.Fprintf(&b, "fault %s: %v\n", f.Fault, f.Verdicts)
	}
	return b.String()
}

func batchText(n int) string {
	if n <= 0 {
		return "all at once"
	}
	return fmt.Sprint(n)
}

func round(d time.Duration) string { return d.Round(time.Second).String() }

var pageTemplate = template.Must(template.New("prediction").Funcs(template.FuncMap{"round": round, "batch": batchText}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rehearsal of {{.Site}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.fails{color:#a00;font-weight:bold}.hurts{color:#a60}.yes{color:#070}.no{color:#a00}
details{margin:.3em 0}small{color:#666}
</style></head><body>
<h1>Rehearsal of {{.Site}}</h1>
<p>Plan <code>{{.Plan}}</code>: {{.Repeats}} repeat(s) without a fault, batch {{batch .Batch}}, time scale {{.TimeScale}}.</p>
<h2>The wave</h2>
<p>{{if .Wave.N}}p50 <b>{{round .Wave.P50}}</b>, p95 <b>{{round .Wave.P95}}</b>, longest {{round .Wave.Max}}, in the site's time.{{end}}
{{if .Unfinished}}<b class="no">It did not finish in {{.Unfinished}} repeat(s)</b>: a cluster's upgrade never ended, and its batch waits for it.{{end}}
{{if .Window}}Window {{round .Window}}: fits <b class="{{.Fits}}">{{.Fits}}</b>.{{end}}</p>
<h2>Clusters</h2>
<table><tr><th>cluster</th><th>strategy</th><th>upgrade p50</th><th>p95</th><th>hosts / controllers (p50 run)</th><th>API down (longest)</th><th>evictions refused</th><th>budget breaches</th><th>passed</th></tr>
{{range .Clusters}}<tr><td>{{.Cluster}}</td><td>{{.Strategy}}</td>{{if or .Unfinished .NotUpgraded}}<td colspan="3" class="no">{{if .Unfinished}}did not finish in {{.Unfinished}} of {{.Runs}} {{end}}{{if .NotUpgraded}}never provisioned in {{.NotUpgraded}} of {{.Runs}}{{end}}</td>{{else}}<td>{{round .Duration.P50}}</td><td>{{round .Duration.P95}}</td><td>{{round .Host}} / {{round .Controller}}</td>{{end}}
<td>{{round .APIDown}} in {{.APIOutages}} ({{round .APILongest}})</td><td>{{.EvictionsRefused}}</td><td>{{.BudgetBreaches}}</td><td>{{.Passed}}/{{.Runs}}</td></tr>
{{end}}</table>
{{if .LeftOut}}<p>Not rehearsed, so not predicted:</p><ul>{{range .LeftOut}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Failure points found before any run</h2>
<table><tr><th>cluster</th><th>level</th><th>kind</th><th>cause</th></tr>
{{range .FailurePoints}}<tr><td>{{.Cluster}}</td><td class="{{.Level}}">{{.Level}}</td><td>{{.Kind}}</td><td>{{.Cause}}</td></tr>
{{end}}</table>
<h2>Met in the runs</h2>
{{if .Met}}<table><tr><th>run</th><th>cluster</th><th>rule</th><th>what happened</th></tr>
{{range .Met}}<tr><td>{{.Wave}}</td><td>{{.Cluster}}</td><td>{{.Rule}}</td><td>{{.What}}{{if .Lab}}<br><small>the lab: {{.Lab}}</small>{{end}}{{if .Predicted}}<br><small>foretold before any run: {{range .Predicted}}{{.}} {{end}}</small>{{end}}</td></tr>
{{end}}</table>{{else}}<p>Nothing: every rule held in every run.</p>{{end}}
{{if .Faults}}<h2>Under faults</h2>
<table><tr><th>fault</th><th>clusters</th></tr>
{{range .Faults}}<tr><td>{{.Fault}}</td><td>{{range $c, $v := .Verdicts}}{{$c}}: {{$v}}<br>{{end}}</td></tr>
{{end}}</table>{{end}}
<h2>Everything the rules judged</h2>
{{range .Clusters}}<details><summary>{{.Cluster}}</summary><table><tr><th>rule</th><th>verdicts</th><th>note (first run)</th></tr>
{{range .Rules}}<tr><td>{{.Rule}}</td><td>{{range .Statuses}}{{.}} {{end}}</td><td><small>{{.Note}}</small></td></tr>
{{end}}</table></details>
{{end}}
<h2>What this rests on</h2>
<h3>Timings</h3><ul>{{range .Model.Timings}}<li>{{.}}</li>{{end}}</ul>
<h3>Modelled</h3><ul>{{range .Model.Modelled}}<li>{{.}}</li>{{end}}</ul>
<h3>Not modelled</h3><ul>{{range .Model.NotModelled}}<li>{{.}}</li>{{end}}</ul>
</body></html>
`))
