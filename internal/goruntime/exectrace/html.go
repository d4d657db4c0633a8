package exectrace

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strings"
)

// WriteHTML writes one self-contained page (no script, no external
// resource): the summary, a timeline overview and histograms as inline
// SVG, the tables with their stacks, and links to the profiles.
func WriteHTML(w io.Writer, s *Summary, profiles []string) error {
	var names []string
	for _, p := range profiles {
		names = append(names, filepath.Base(p))
	}
	data := struct {
		S                     *Summary
		Profiles              []string
		Timeline              template.HTML
		Sched, Pauses, Sys    template.HTML
		PausePeriod, GCPeriod string
	}{S: s, Profiles: names, Timeline: timelineSVG(s.Timeline),
		Sched: histSVG(s.Sched.Histogram, "#4477aa"), Pauses: histSVG(s.Pauses.Histogram, "#cc3311"),
		Sys:         histSVG(s.Syscalls.Histogram, "#228833"),
		PausePeriod: periodString(s.Pauses.Period), GCPeriod: periodString(s.GC.Period)}
	return pageTemplate.Execute(w, data)
}

var funcs = template.FuncMap{
	"ms":         fmtMs,
	"period":     periodString,
	"first":      func(n int, v []string) []string { return v[:min(n, len(v))] },
	"pct":        func(v float64) string { return fmt.Sprintf("%.1f%%", v) },
	"groupNames": groupNames,
}

var pageTemplate = template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>wallprof trace: {{.S.Name}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1100px}
h1{font-size:1.3em} h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0} td,th{padding:2px 8px;text-align:left;vertical-align:top;border-bottom:1px solid #eee}
td.n{text-align:right;font-variant-numeric:tabular-nums} pre{margin:0;font-size:12px;color:#555}
.warn{background:#fee;padding:.5em;border:1px solid #c33} svg text{font-size:11px;fill:#333}
details summary{cursor:pointer;color:#357}
</style></head><body>
<h1>Go execution trace: {{.S.Name}}</h1>
<p>Go 1.{{slice .S.GoVersion 2}} trace format, {{.S.Events}} events, {{ms .S.DurationMs}}, GOMAXPROCS {{.S.Procs}}.
{{if .Profiles}}Profiles (open with <code>go tool pprof</code> or <code>wallprof flame</code>):
{{range .Profiles}}<a href="{{.}}">{{.}}</a> {{end}}{{end}}</p>
{{if .S.Truncated}}<p class="warn" id="truncated">Truncated: {{.S.Truncated}}.</p>{{end}}

<h2>Timeline</h2>
<div id="timeline">{{.Timeline}}</div>

<h2>Stop-the-world pauses</h2>
<p id="pauses">{{.S.Pauses.Count}} pauses, total {{ms .S.Pauses.TotalMs}}: p50 {{ms .S.Pauses.P50Ms}}, p90 {{ms .S.Pauses.P90Ms}}, p99 {{ms .S.Pauses.P99Ms}}, max {{ms .S.Pauses.MaxMs}}. All pauses: {{.PausePeriod}}.</p>
{{.Pauses}}
<table><tr><th>reason</th><th>from</th><th>count</th><th>p50</th><th>p99</th><th>max</th><th>period</th></tr>
{{range .S.Pauses.Kinds}}<tr><td>{{.Reason}}</td><td><details><summary>{{.Site}}</summary><pre>{{range .Stack}}{{.}}
{{end}}</pre></details></td><td class="n">{{.Count}}</td><td class="n">{{ms .P50Ms}}</td><td class="n">{{ms .P99Ms}}</td><td class="n">{{ms .MaxMs}}</td><td>{{period .Period}}</td></tr>
{{end}}</table>

<h2>GC</h2>
<p>{{.S.GC.Cycles}} cycles, {{ms .S.GC.MarkMs}} in the mark phase; {{.GCPeriod}}.<br>
GC workers: {{pct .S.GC.WorkerCPUPct}} of the CPU (running time of runtime.gcBgMarkWorker goroutines, {{ms .S.GC.WorkerRunningMs}}, over GOMAXPROCS × duration).<br>
Mark assists: {{ms .S.GC.AssistMs}}.</p>
{{if .S.GC.Assists}}<table><tr><th>goroutine group</th><th>mark assist</th></tr>
{{range .S.GC.Assists}}<tr><td>{{.Group}}</td><td class="n">{{ms .Ms}}</td></tr>{{end}}</table>{{end}}

<h2>Scheduling latency (runnable → running)</h2>
<p>{{.S.Sched.Count}} times, total {{ms .S.Sched.TotalMs}}: p50 {{ms .S.Sched.P50Ms}}, p90 {{ms .S.Sched.P90Ms}}, p99 {{ms .S.Sched.P99Ms}}, max {{ms .S.Sched.MaxMs}}.</p>
<div id="sched">{{.Sched}}</div>
<table><tr><th>goroutine group</th><th>count</th><th>total</th><th>p50</th><th>p99</th><th>max</th></tr>
{{range .S.Sched.Groups}}<tr><td>{{.Group}}</td><td class="n">{{.Count}}</td><td class="n">{{ms .TotalMs}}</td><td class="n">{{ms .P50Ms}}</td><td class="n">{{ms .P99Ms}}</td><td class="n">{{ms .MaxMs}}</td></tr>
{{end}}</table>
<h3>Worst</h3>{{template "occ" .S.Sched.Worst}}

<h2>Blocking by reason</h2>
<table id="blocking"><tr><th>reason</th><th>total</th><th>groups</th><th>top stacks</th></tr>
{{range .S.Blocking}}<tr><td>{{.Reason}}</td><td class="n">{{ms .TotalMs}}</td><td>{{range first 3 (groupNames .Groups)}}{{.}}<br>{{end}}</td>
<td>{{range $i, $s := .Stacks}}{{if lt $i 3}}<details><summary>{{ms $s.Ms}} in {{$s.Count}} ({{$s.Reason}})</summary><pre>{{range $s.Stack}}{{.}}
{{end}}</pre></details>{{end}}{{end}}</td></tr>
{{end}}</table>

<h2>Syscalls</h2>
<p>{{.S.Syscalls.Count}} syscalls, total {{ms .S.Syscalls.TotalMs}}: p50 {{ms .S.Syscalls.P50Ms}}, p99 {{ms .S.Syscalls.P99Ms}}, max {{ms .S.Syscalls.MaxMs}}; {{.S.Syscalls.LostProc}} held their thread long enough to lose its P.</p>
{{.Sys}}
{{template "occ" .S.Syscalls.Worst}}

<h2>Goroutines</h2>
<p>{{.S.Goroutines.Created}} created ({{.S.Goroutines.CreatedPerS}}/s), {{.S.Goroutines.Exited}} exited ({{.S.Goroutines.ExitedPerS}}/s), at most {{.S.Goroutines.MaxLive}} live.</p>
<table><tr><th>group (start function)</th><th>created at</th><th>goroutines</th><th>running</th></tr>
{{range .S.Goroutines.Groups}}<tr><td>{{.Group}}</td><td>{{.Created}}</td><td class="n">{{.Goroutines}}</td><td class="n">{{ms .RunningMs}}</td></tr>
{{end}}</table>

{{if or .S.Regions .S.Tasks}}<h2>User regions and tasks</h2>
<table><tr><th>kind</th><th>type</th><th>count</th><th>total</th><th>p50</th><th>p99</th><th>max</th></tr>
{{range .S.Regions}}<tr><td>region</td><td>{{.Type}}</td><td class="n">{{.Count}}</td><td class="n">{{ms .TotalMs}}</td><td class="n">{{ms .P50Ms}}</td><td class="n">{{ms .P99Ms}}</td><td class="n">{{ms .MaxMs}}</td></tr>{{end}}
{{range .S.Tasks}}<tr><td>task</td><td>{{.Type}}</td><td class="n">{{.Count}}</td><td class="n">{{ms .TotalMs}}</td><td class="n">{{ms .P50Ms}}</td><td class="n">{{ms .P99Ms}}</td><td class="n">{{ms .MaxMs}}</td></tr>{{end}}
</table>{{end}}
<p><small>Written by wallprof trace ({{.S.Format}}).</small></p>
</body></html>
{{define "occ"}}<table><tr><th>at</th><th>duration</th><th>goroutine</th><th>stack</th></tr>
{{range .}}<tr><td class="n">{{ms .AtMs}}</td><td class="n">{{ms .Ms}}</td><td>{{.Goroutine}} {{.Group}}</td><td><details><summary>{{range first 1 .Stack}}{{.}}{{end}}</summary><pre>{{range .Stack}}{{.}}
{{end}}</pre></details></td></tr>
{{end}}</table>{{end}}
`))

func groupNames(gs []GroupTime) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Group+" "+fmtMs(g.Ms))
	}
	return out
}

// timelineSVG draws GC mark time and stop-the-world time per bin (as a
// share of the bin) and the goroutine counts (live, runnable).
func timelineSVG(t Timeline) template.HTML {
	const w, h, left = 1000.0, 260.0, 60.0
	n := len(t.Live)
	if n == 0 {
		return ""
	}
	bw := (w - left) / float64(n)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g">`, w, h, w, h)
	// Strips: GC mark (0-40), STW (50-90), goroutines (110-240).
	strip := func(y0 float64, label, colour string, vals []float64, scale float64) {
		fmt.Fprintf(&b, `<text x="0" y="%g">%s</text>`, y0+25, label)
		for i, v := range vals {
			if v <= 0 {
				continue
			}
			hh := math.Min(40, 40*v/scale)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`, left+float64(i)*bw, y0+40-hh, math.Max(bw, 1), hh, colour)
		}
	}
	strip(0, "GC mark", "#ee7733", t.GCMs, t.BinMs)
	var maxSTW float64
	for _, v := range t.STWMs {
		maxSTW = math.Max(maxSTW, v)
	}
	strip(50, "STW", "#cc3311", t.STWMs, math.Max(maxSTW, 1e-9))
	var most int64 = 1
	for _, v := range t.Live {
		most = max(most, v)
	}
	line := func(vals []int64, colour string) {
		var pts []string
		for i, v := range vals {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", left+(float64(i)+.5)*bw, 240-130*float64(v)/float64(most)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`, colour, strings.Join(pts, " "))
	}
	fmt.Fprintf(&b, `<text x="0" y="125">goroutines</text><text x="0" y="140">max %d</text>`, most)
	line(t.Live, "#4477aa")
	line(t.Runnable, "#aa3377")
	fmt.Fprintf(&b, `<text x="%g" y="255">0</text><text x="%g" y="255" text-anchor="end">%s (bins of %s); blue: live, purple: runnable; STW bars scaled to the longest (%s in a bin)</text></svg>`,
		left, w, fmtMs(t.BinMs*float64(n)), fmtMs(t.BinMs), fmtMs(maxSTW))
	return template.HTML(b.String())
}

// histSVG draws a histogram's bars, one per power of two.
func histSVG(bs []Bucket, colour string) template.HTML {
	if len(bs) == 0 {
		return ""
	}
	const h = 140.0
	bw := math.Min(50, 900/float64(len(bs)))
	w := bw*float64(len(bs)) + 20
	var most int64 = 1
	for _, x := range bs {
		most = max(most, x.Count)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g">`, w, h+30)
	for i, x := range bs {
		hh := (h - 15) * math.Log1p(float64(x.Count)) / math.Log1p(float64(most))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>≤ %s: %d</title></rect>`,
			float64(i)*bw, h-hh, bw-2, hh, colour, fmtMs(x.LeMs), x.Count)
		if x.Count > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`, float64(i)*bw+bw/2, h-hh-2, x.Count)
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`, float64(i)*bw+bw/2, h+14, fmtMs(x.LeMs))
		}
	}
	fmt.Fprintf(&b, `<text x="0" y="%g">count (log scale) by upper bound</text></svg>`, h+28)
	return template.HTML(b.String())
}
