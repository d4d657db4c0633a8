package runreport

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/escapes"
	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
	"github.com/wallprof/wallprof/internal/load"
)

// Page is what the HTML report needs besides the Report.
type Page struct {
	// Flame is a complete HTML flame graph page of the wall-clock
	// profile, shown in a frame; empty when nothing was recorded.
	Flame []byte
}

// WriteHTML writes the report as one self-contained page: no script or
// style is fetched from anywhere.
func WriteHTML(w io.Writer, r *Report, pg Page) error {
	var gcText bytes.Buffer
	if r.GC != nil && r.GC.Summary.Collections > 0 {
		if err := gctrace.WriteText(&gcText, r.GC.Summary); err != nil {
			return err
		}
	}
	var loadText bytes.Buffer
	if r.Load != nil {
		if err := load.WriteText(&loadText, r.Load); err != nil {
			return err
		}
	}
	v := view{R: r, Flame: string(pg.Flame), GCText: gcText.String(), LoadText: loadText.String()}
	if r.GC != nil {
		v.HeapChart = template.HTML(heapChart(r.GC, r.LoadStart, r.LoadEnd))
		v.CPUChart = template.HTML(gcCPUChart(r.GC, r.LoadStart, r.LoadEnd))
	}
	if r.Heap != nil {
		v.HeapArea = template.HTML(heapAreaChart(r.Heap, r.LoadStart, r.LoadEnd))
		for j, s := range r.Heap.Sites {
			var peak int64
			for i := range r.Heap.At {
				peak = max(peak, r.Heap.Bytes[i][j])
			}
			v.Legend = append(v.Legend, legendItem{Colour: template.CSS(palette[j%len(palette)]), Name: s, Peak: fmtBytes(peak)})
		}
	}
	kinds := make([]string, 0, len(r.Artefacts))
	for k := range r.Artefacts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		v.Files = append(v.Files, artefact{Kind: k, Path: r.Artefacts[k]})
	}
	return pageTemplate.Execute(w, v)
}

type view struct {
	R                             *Report
	Flame, GCText, LoadText       string
	HeapChart, CPUChart, HeapArea template.HTML
	Legend                        []legendItem
	Files                         []artefact
}

type legendItem struct {
	Colour template.CSS
	Name   string
	Peak   string
}

type artefact struct{ Kind, Path string }

var funcs = template.FuncMap{
	"dur": func(d time.Duration) string {
		switch {
		case d >= time.Second:
			return fmt.Sprintf("%.2fs", d.Seconds())
		case d >= time.Millisecond:
			return fmt.Sprintf("%.2fms", float64(d)/1e6)
		}
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	},
	"secs":   func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) },
	"nsdur":  func(ns int64) time.Duration { return time.Duration(ns) },
	"bytes":  fmtBytes,
	"bytesf": func(v float64) string { return fmtBytes(int64(math.Round(v))) },
	"f0":     func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f1":     func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"ms1000": func(ms float64) float64 { return ms / 1000 },
	"f2":     func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"pct":    func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	"perGC": func(g *GC) string {
		if g.Summary.Collections == 0 {
			return "no collection"
		}
		return fmt.Sprintf("%.1f", g.Summary.RequestsPerGC)
	},
	"join": strings.Join,
	"base": path.Base,
	"site": func(s escapes.Site) string {
		if s.Line > 0 {
			return fmt.Sprintf("%s:%d", s.File, s.Line)
		}
		return s.File
	},
	"codes": func(m map[string]int64) string {
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var b strings.Builder
		for i, k := range ks {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s × %d", k, m[k])
		}
		return b.String()
	},
	"finite": func(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) },
}

var pageTemplate = template.Must(template.New("page").Funcs(funcs).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wallprof run: {{join .R.Command " "}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header{background:#1f2937;color:#f9fafb;padding:14px 24px}
header h1{margin:0;font-size:19px}
header p{margin:4px 0 0;color:#d1d5db;font-size:13px}
header code{color:#fde68a}
nav{padding:6px 24px;background:#e5e7eb;font-size:13px}
nav a{margin-right:14px;color:#1f2937}
main{padding:4px 24px 40px;max-width:1120px}
section{margin-top:22px}
h2{font-size:17px;border-bottom:1px solid #d1d5db;padding-bottom:3px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:19px}
.card span{color:#4b5563;font-size:12px}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#fff;border:1px solid #e5e7eb;padding:8px;overflow:auto;font-size:12px}
.chart{max-width:100%;height:auto;background:#fff;border:1px solid #e5e7eb;display:block;margin:6px 0}
.chart .grid line{stroke:#eee}.chart .grid line.xt{stroke:#999}
.chart text{font-size:11px;fill:#4b5563}.chart .yl{text-anchor:end}.chart .xl{text-anchor:middle}.chart .axis{text-anchor:middle;font-size:12px}
.chart .window{fill:#fef3c7}
.chart .heap{fill:none;stroke:#0072B2;stroke-width:1.5}.chart .goal{fill:none;stroke:#D55E00;stroke-dasharray:4 3}
.chart .gcdot{fill:#0072B2}.chart .cpubar{fill:#E69F00;opacity:.8}.chart .cumulative{fill:none;stroke:#1f2937;stroke-width:1.5}
.key{font-size:12px;color:#4b5563}.key i{display:inline-block;width:18px;height:3px;vertical-align:middle;margin:0 4px 0 10px}
.legend span{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:middle}
iframe{width:100%;height:640px;border:1px solid #e5e7eb;background:#fff}
.note{color:#92400e}
.reason{color:#374151}
</style></head>
<body>
<header><h1>wallprof run</h1>
<p><code>{{join .R.Command " "}}</code> · started {{.R.Started.Format "2006-01-02 15:04:05 MST"}} · ready after {{secs .R.Ready}} · load from {{secs .R.LoadStart}} to {{secs .R.LoadEnd}} (offsets from the server's start)</p></header>
<nav><a href="#load">Load</a><a href="#gc">Garbage collector</a><a href="#alloc">Allocations</a><a href="#flame">Wall-clock profile</a><a href="#heap">Heap over time</a><a href="#files">Files</a></nav>
<main>
{{range .R.Notes}}<p class="note">⚠ {{.}}</p>{{end}}

<section id="load"><h2>Load</h2>
{{with .R.Load}}
<div class="cards">
<div class="card"><b>{{f0 .Throughput}}/s</b><span>throughput (successes)</span></div>
<div class="card"><b>{{.Requests}}</b><span>requests{{if .Rate}} at {{f0 .Rate}}/s asked{{end}}{{if and (not .Rate) .Concurrency}}, {{.Concurrency}} workers{{end}}</span></div>
<div class="card"><b>{{pct .SuccessRatio}}</b><span>succeeded</span></div>
<div class="card"><b>{{dur .Latency.P50}}</b><span>p50 latency</span></div>
<div class="card"><b>{{dur .Latency.P99}}</b><span>p99 latency</span></div>
</div>
<table id="latency"><tr><th>min</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
<tr><td class="n">{{dur .Latency.Min}}</td><td class="n">{{dur .Latency.Mean}}</td><td class="n">{{dur .Latency.P50}}</td><td class="n">{{dur .Latency.P90}}</td><td class="n">{{dur .Latency.P99}}</td><td class="n">{{dur .Latency.P999}}</td><td class="n">{{dur .Latency.Max}}</td></tr></table>
<p>Targets: {{join .Targets ", "}}. Status codes: {{codes .StatusCodes}}.{{if .Interrupted}} <span class="note">The load was interrupted.</span>{{end}}</p>
{{if .Errors}}<table><tr><th>error</th><th>count</th><th>example</th></tr>{{range .Errors}}<tr><td>{{.Kind}}</td><td class="n">{{.Count}}</td><td>{{.Example}}</td></tr>{{end}}</table>{{end}}
{{else}}<p>No load was applied.</p>{{end}}
</section>

<section id="gc"><h2>Garbage collector</h2>
{{with .R.GC}}
<div class="cards">
<div class="card"><b id="gc-collections">{{.Summary.Collections}}</b><span>collections during the load ({{.InLog}} in the log)</span></div>
<div class="card"><b id="gc-requests-per-gc">{{perGC .}}</b><span>requests per collection</span></div>
<div class="card"><b>{{f2 .PerKRequests}}</b><span>collections per 1000 requests</span></div>
{{if .Summary.Collections}}<div class="card"><b>{{f1 .Summary.CPUPercent}}%</b><span>GC CPU (clock fields) · runtime says {{.Summary.RuntimePercent}}%</span></div>
<div class="card"><b>{{dur .Summary.STW}}</b><span>stop-the-world in total, max {{dur .Summary.MaxSTW}}</span></div>
<div class="card"><b>{{dur .Summary.Pace}}</b><span>between collections</span></div>{{end}}
</div>
<h3>Heap</h3>
<p class="key"><i style="background:#0072B2"></i>heap: grows until a collection starts, drops to what marking found live <i style="background:#D55E00"></i>goal (dashed) <i style="background:#fef3c7;height:10px"></i>load window</p>
{{$.HeapChart}}
<h3>GC CPU</h3>
<p class="key"><i style="background:#E69F00;height:10px"></i>collector's CPU share between two collections <i style="background:#1f2937"></i>the runtime's cumulative figure</p>
{{$.CPUChart}}
{{if $.GCText}}<details><summary>Summary of the collections during the load (as <code>wallprof gctrace</code> prints it)</summary><pre>{{$.GCText}}</pre></details>{{end}}
{{else}}<p>No gctrace line was captured (is the server a Go program? It ran with <code>GODEBUG=gctrace=1</code>).</p>{{end}}
</section>

<section id="alloc"><h2>Allocations</h2>
{{with .R.Alloc}}
<div class="cards">
<div class="card"><b id="bytes-per-request">{{bytesf .BytesPerRequest}}</b><span>allocated per request</span></div>
<div class="card"><b id="objects-per-request">{{f0 .ObjectsPerRequest}}</b><span>objects per request</span></div>
<div class="card"><b>{{bytes .Bytes}}</b><span>allocated during the load, {{.Objects}} objects</span></div>
</div>
<p>From the difference of the server's allocation profiles at the start and the end of the load (the runtime samples an allocation every 512 KiB on average and scales the counts).{{if .ProfilerBytes}} The {{bytes .ProfilerBytes}} that the server allocated to serve the profiles wallprof fetched (<code>net/http/pprof</code>) are left out.{{end}}</p>
{{if .Sites}}<table id="sites"><tr><th>#</th><th>line</th><th>function</th><th>bytes</th><th>share</th><th>objects</th><th>why it allocates</th></tr>
{{range .Sites}}<tr><td class="n">{{.Rank}}</td><td><code>{{site .}}</code></td><td><code>{{.Func}}</code></td><td class="n">{{bytes .Bytes}}</td><td class="n">{{f1 .Percent}}%</td><td class="n">{{.Objects}}</td><td class="reason">{{range .Reasons}}{{.}}<br>{{else}}{{if not $.R.Alloc.Explained}}give --src for the compiler's reason{{end}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{else}}<p>Give <code>--pprof http://HOST:PORT/debug/pprof</code> for allocations per request, the top allocation sites and the heap over time.</p>{{end}}
</section>

{{with .R.Trace}}<section id="trace"><h2>Execution trace</h2>
<p>What the runtime's execution trace of the first {{f1 (ms1000 .DurationMs)}} s of the load says.{{if .Page}} All of it: <a href="{{.Page}}">{{.Page}}</a>, or <code>wallprof trace</code> on the trace file.{{end}}{{if .Truncated}} <span class="note">The trace was cut: {{.Truncated}}.</span>{{end}}</p>
<div class="cards">
<div class="card"><b id="trace-pauses">{{.Pauses.Count}}</b><span>stop-the-world pauses, p99 {{f2 .Pauses.P99Ms}} ms, max {{f2 .Pauses.MaxMs}} ms{{if .PeriodMs}}, every {{f1 .PeriodMs}} ms{{end}}</span></div>
<div class="card"><b>{{.GCCycles}}</b><span>GC cycles, workers {{f1 .GCCPUPct}}% of the CPUs, mark assists {{f1 .AssistMs}} ms</span></div>
<div class="card"><b id="trace-sched">{{f2 .Sched.P99Ms}} ms</b><span>p99 scheduling latency (runnable to running), p50 {{f2 .Sched.P50Ms}} ms, max {{f2 .Sched.MaxMs}} ms</span></div>
</div>
{{if .Blocking}}<table id="trace-blocking"><tr><th>goroutines blocked on</th><th>time</th></tr>{{range .Blocking}}<tr><td>{{.Reason}}</td><td class="n">{{f1 .TotalMs}} ms</td></tr>{{end}}</table>{{end}}
</section>
{{end}}
<section id="flame"><h2>Wall-clock profile</h2>
{{with .R.Goroutines}}
<p>Goroutine time during the load, by creation site: each goroutine's own time, so ten goroutines waiting for a second are ten seconds of one group.{{if .Coverage}} The goroutine table was read {{.Snapshots}} times, covering {{dur (nsdur .CoveredNs)}} of the {{dur (nsdur .RecordingNs)}} recording ({{f1 .Coverage}}%).{{end}}</p>
{{range .Warnings}}<p class="note" id="goroutines-warning">⚠ {{.}}</p>{{end}}
<table id="goroutines"><tr><th>group</th><th>goroutines</th><th>time</th><th>share</th><th>running</th><th>runnable</th><th>waiting</th><th>waiting by reason</th></tr>
{{range .Groups}}<tr><td><code>{{.Group}}</code>{{if .Func}}<br><code>{{.Func}}</code>{{end}}</td><td class="n">{{.Goroutines}}</td><td class="n">{{dur (nsdur .TimeNs)}}</td><td class="n">{{f1 .Share}}%</td><td class="n">{{f1 .Running}}%</td><td class="n">{{f1 .Runnable}}%</td><td class="n">{{f1 .Waiting}}%</td><td>{{range $i, $r := .Reasons}}{{if $i}}, {{end}}{{$r.Reason}} {{f1 $r.Percent}}%{{end}}</td></tr>
{{end}}</table>
{{end}}
{{if .Flame}}<p>{{if .R.Goroutines}}The goroutines' time during the load: running (on-CPU colour), runnable and waiting (blocked colour). The thread view is in the same file: <code>go tool pprof -sample_index=wall -http=: {{.R.Profile}}</code>.{{else}}Every thread's time during the load: on a CPU, waiting for one, and blocked. Open it in pprof with <code>go tool pprof -http=: {{.R.Profile}}</code>, or <code>wallprof report {{.R.Profile}}</code>.{{end}}</p>
<iframe title="flame graph" srcdoc="{{.Flame}}"></iframe>
{{else}}<p>No wall-clock profile was recorded.</p>{{end}}
</section>

<section id="heap"><h2>Heap over time</h2>
{{with .R.Heap}}{{if $.HeapArea}}
<p>Bytes in use by allocation site (the first frame in package main or a module outside the standard library, else outside the runtime; the profile endpoint's own allocations left out), from a heap profile fetched every interval; as of the last collection before each fetch.{{if .Failed}} <span class="note">{{.Failed}} fetches failed.</span>{{end}}</p>
{{$.HeapArea}}
<div class="legend">{{range $.Legend}}<div><span style="background:{{.Colour}}"></span><code>{{.Name}}</code> up to {{.Peak}}</div>{{end}}</div>
{{else}}<p>Too few heap profiles were fetched to draw a chart.</p>{{end}}
{{else}}<p>Give <code>--pprof</code> to sample the heap in use every <code>--heap-interval</code>.</p>{{end}}
</section>

<section id="files"><h2>Files</h2>
<p>Everything this report was made from, next to it:</p>
<table>{{range .Files}}<tr><td>{{.Kind}}</td><td><a href="{{.Path}}"><code>{{.Path}}</code></a></td></tr>{{end}}</table>
</section>
</main></body></html>
`
