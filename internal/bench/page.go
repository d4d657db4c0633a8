package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
)

// Page is the content of the self-contained HTML page WritePage writes
// (--html): a comparison and its explained regressions, and trend charts.
type Page struct {
	Title  string
	Report *Report // its runs, deltas and explanations; Histories are not drawn
	// Histories are drawn as trend charts, one per series, in this order.
	Histories []History
	// Flames are, index for index with Report.Explanations, a complete
	// HTML document each (the differential flame graph of the base and new
	// CPU profiles), shown in a sandbox-free iframe's srcdoc; "" for none.
	Flames []string
}

// WritePage writes p as one HTML page that loads nothing: its styles are
// inline, charts are inline SVG, and each flame graph is a document of its
// own in an iframe's srcdoc, so that the ids and scripts of several flame
// graphs do not meet.
func WritePage(w io.Writer, p Page) error {
	d := pageData{Title: p.Title}
	if r := p.Report; r != nil {
		d.Runs = r.Runs
		for _, dl := range r.Deltas {
			d.Rows = append(d.Rows, compareRow(dl))
		}
		for i, ex := range r.Explanations {
			e := pageExplanation{Name: ex.Pkg + "." + ex.Name, Profiles: ex.Profiles,
				CPU: growthRows(ex.CPU, "sec/op"), Alloc: growthRows(ex.Alloc, "B/op"),
				OffCPU: growthRows(ex.OffCPU, "sec/op"), OffCPUSkipped: ex.OffCPUSkipped}
			if i < len(p.Flames) {
				e.Flame = p.Flames[i]
			}
			d.Explanations = append(d.Explanations, e)
		}
	}
	for _, h := range p.Histories {
		d.Charts = append(d.Charts, trendChart(h))
	}
	if err := pageTemplate.Execute(w, d); err != nil {
		return fmt.Errorf("write the HTML page: %w", err)
	}
	return nil
}

type pageData struct {
	Title        string
	Runs         []RunInfo
	Rows         []pageRow
	Explanations []pageExplanation
	Charts       []chart
}

type pageRow struct {
	Name, Unit, Base, BaseCI, New, NewCI, Change, P, Verdict string
	Regression                                               bool
}

func compareRow(d Delta) pageRow {
	return pageRow{Name: d.Pkg + "." + d.Name, Unit: d.Unit,
		Base: FormatValue(d.Base.Center, d.Unit), BaseCI: ci(d.Base),
		New: FormatValue(d.New.Center, d.Unit), NewCI: ci(d.New),
		Change: d.FormatChange(), P: fmt.Sprintf("%.3f n=%d+%d", d.P, d.Base.N, d.New.N),
		Verdict: verdict(d), Regression: d.Regression}
}

// verdict names what a delta means: the terminal's REGRESSION, and the
// significant changes it leaves unmarked.
func verdict(d Delta) string {
	worse := d.New.Center > d.Base.Center
	if HigherIsBetter(d.Unit) {
		worse = !worse
	}
	switch {
	case d.Regression:
		return "regression"
	case !d.Significant || d.Change == 0:
		return "no significant change"
	case worse:
		return "worse, within the threshold"
	}
	return "better"
}

type pageExplanation struct {
	Name          string
	CPU, Alloc    []growthRow
	OffCPU        []growthRow // from wallprof recordings of both versions
	OffCPUSkipped string      // why there are none, when not recorded
	Profiles      []string
	Flame         string
}

type growthRow struct{ Delta, Base, New, Function string }

func growthRows(gs []Growth, unit string) []growthRow {
	var out []growthRow
	for _, g := range gs {
		d, b, n := formatGrowth(g, unit)
		out = append(out, growthRow{d, b, n, g.Function})
	}
	return out
}

// Chart geometry, in pixels.
const (
	chartW      = 760
	chartH      = 280
	chartLeft   = 72
	chartRight  = 16
	chartTop    = 28
	chartBottom = 78
	maxXLabels  = 30
)

// chart is a trend chart of one History: the median per commit with its
// 95% interval as a whisker, and the change points as vertical lines.
type chart struct {
	Title            string
	Unit             string
	W, H             int
	Left, Right      float64 // the plot's bounds
	Top, Bottom      float64
	Line             string // polyline of the medians
	Points           []chartPoint
	YTicks           []chartTick
	XLabels          []chartLabel
	ChangePoints     []chartMark
	NoInterval       bool // some commit has too few samples for an interval
	ChangePointCount int
}

type chartPoint struct {
	X, Y, Lo, Hi string
	Whisker      bool
	Title        string
}

type chartTick struct{ Y, Label string }

type chartLabel struct{ X, Y, Label string }

type chartMark struct {
	X, LabelX, Anchor, Commit, Label string
}

func px(v float64) string { return fmt.Sprintf("%.1f", v) }

func trendChart(h History) chart {
	c := chart{Title: h.Pkg + "." + h.Name, Unit: h.Unit, W: chartW, H: chartH,
		Left: chartLeft, Right: chartW - chartRight, Top: chartTop, Bottom: chartH - chartBottom}
	n := len(h.Points)
	lo, hi := yRange(h.Points)
	y := func(v float64) float64 { return c.Bottom - (v-lo)/(hi-lo)*(c.Bottom-c.Top) }
	step := 0.0
	if n > 1 {
		step = (c.Right - c.Left - 20) / float64(n-1)
	}
	x := func(i int) float64 {
		if n == 1 {
			return (c.Left + c.Right) / 2
		}
		return c.Left + 10 + float64(i)*step
	}
	every := (n + maxXLabels - 1) / maxXLabels
	var line []byte
	for i, p := range h.Points {
		s := p.Summary
		cp := chartPoint{X: px(x(i)), Y: px(y(s.Center)), Title: pointTitle(p, h.Unit)}
		if finite(s.Lo) && finite(s.Hi) {
			cp.Whisker, cp.Lo, cp.Hi = true, px(y(s.Lo)), px(y(s.Hi))
		} else {
			c.NoInterval = true
		}
		c.Points = append(c.Points, cp)
		line = fmt.Appendf(line, "%s,%s ", cp.X, cp.Y)
		if i%every == 0 || i == n-1 && (n-1)%every >= every/2 {
			c.XLabels = append(c.XLabels, chartLabel{X: px(x(i)), Y: px(c.Bottom + 14), Label: commitLabel(p)})
		}
	}
	c.Line = string(line)
	for k := range 5 {
		v := lo + (hi-lo)*float64(k)/4
		c.YTicks = append(c.YTicks, chartTick{Y: px(y(v)), Label: FormatValue(v, h.Unit)})
	}
	c.ChangePoints = changeMarks(h, func(i int) float64 { return x(i) - step/2 }, c.W)
	c.ChangePointCount = len(c.ChangePoints)
	return c
}

func finite(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) }

// yRange is the span of the medians and finite interval bounds, with a
// margin, never empty.
func yRange(pts []Point) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		for _, v := range []float64{p.Summary.Center, p.Summary.Lo, p.Summary.Hi} {
			if finite(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if lo > hi {
		return 0, 1
	}
	pad := (hi - lo) * 0.08
	if pad == 0 {
		pad = math.Abs(hi) * 0.1
	}
	if pad == 0 { // all zero: no allocation
		pad = 1
	}
	if lo >= 0 { // values of benchmarks are not negative: keep the axis so
		return math.Max(lo-pad, 0), hi + pad
	}
	return lo - pad, hi + pad
}

// changeMarks places a line just before each change point's commit,
// labelled with the median of the medians of the segments before and after
// it (a segment ends at the next change point).
func changeMarks(h History, at func(int) float64, width int) []chartMark {
	var idx []int
	for i, p := range h.Points {
		if p.ChangePoint {
			idx = append(idx, i)
		}
	}
	var out []chartMark
	for k, i := range idx {
		from, to := 0, len(h.Points)
		if k > 0 {
			from = idx[k-1]
		}
		if k+1 < len(idx) {
			to = idx[k+1]
		}
		before, after := segmentMedian(h.Points[from:i]), segmentMedian(h.Points[i:to])
		x := at(i)
		m := chartMark{X: px(x), LabelX: px(x + 4), Anchor: "start", Commit: Short(h.Points[i].Commit),
			Label: FormatValue(before, h.Unit) + " → " + FormatValue(after, h.Unit)}
		if x > float64(width)*0.6 {
			m.LabelX, m.Anchor = px(x-4), "end"
		}
		out = append(out, m)
	}
	return out
}

func segmentMedian(pts []Point) float64 {
	v := make([]float64, len(pts))
	for i, p := range pts {
		v[i] = p.Summary.Center
	}
	slices.Sort(v)
	if len(v) == 0 {
		return math.NaN()
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// commitLabel is a commit's short hash, "+" when the tree had changes.
func commitLabel(p Point) string {
	l := p.Commit
	if len(l) > 7 {
		l = l[:7]
	}
	if l == "" {
		l = "(unknown)"
	}
	if p.Dirty {
		l += "+"
	}
	return l
}

func pointTitle(p Point, unit string) string {
	s := p.Summary
	t := fmt.Sprintf("%s%s\n%s %s ± %s, n=%d", Short(p.Commit), dirtyNote(p.Dirty), FormatValue(s.Center, unit), unit, ci(s), s.N)
	if p.ChangePoint {
		t += "\nchange point"
	}
	return t
}

// pageCSP lets the page load nothing; inline scripts run only in the flame
// graphs' srcdoc documents, which inherit it.
const pageCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"growth": func(title string, rows []growthRow) any {
		return struct {
			Title string
			Rows  []growthRow
		}{title, rows}
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="` + pageCSP + `">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; } code, td.num, td.fn { font-family: ui-monospace, Menlo, Consolas, monospace; }
table { border-collapse: collapse; margin: .5em 0; } th, td { padding: .2em .6em; text-align: left; border-bottom: 1px solid #eee; }
td.num { text-align: right; white-space: nowrap; }
tr.regression { background: #fde2e1; } tr.regression td.verdict { color: #b00020; font-weight: bold; }
iframe.flame { width: 100%; height: 560px; border: 1px solid #ccc; }
svg.trend { background: #fafafa; border: 1px solid #e4e4e4; margin: .4em 0 1em; }
svg.trend text { font: 11px system-ui, sans-serif; fill: #444; }
svg.trend .grid { stroke: #e6e6e6; } svg.trend .axis { stroke: #888; }
svg.trend .median { fill: none; stroke: #2b5fad; stroke-width: 1.5; }
svg.trend .ci { stroke: #7d9fd6; stroke-width: 1.2; } svg.trend circle { fill: #2b5fad; }
svg.trend .cp line { stroke: #c62828; stroke-width: 1.5; stroke-dasharray: 5 3; } svg.trend .cp text { fill: #c62828; font-weight: bold; }
.note { color: #666; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{with .Runs}}<p>Runs: {{range $i, $r := .}}{{if $i}}; {{end}}<code>{{printf "%.12s" $r.Commit}}</code>{{if $r.Dirty}} (with uncommitted changes){{end}} ({{$r.Label}}, run {{$r.ID}}, {{$r.Results}} results){{end}}.</p>{{end}}
{{with .Rows}}<h2>Comparison</h2>
<table class="compare">
<tr><th>benchmark</th><th>unit</th><th>base</th><th>±</th><th>new</th><th>±</th><th>change</th><th>p</th><th>verdict</th></tr>
{{range .}}<tr{{if .Regression}} class="regression"{{end}}><td>{{.Name}}</td><td>{{.Unit}}</td><td class="num">{{.Base}}</td><td class="num">{{.BaseCI}}</td><td class="num">{{.New}}</td><td class="num">{{.NewCI}}</td><td class="num">{{.Change}}</td><td class="num">{{.P}}</td><td class="verdict">{{.Verdict}}</td></tr>
{{end}}</table>
{{end}}{{with .Explanations}}<h2>Regressions explained</h2>
{{range .}}<section class="explanation">
<h3>{{.Name}}: functions whose cost per operation grew most</h3>
{{template "growth" (growth "CPU time" .CPU)}}{{template "growth" (growth "allocated bytes" .Alloc)}}{{if .OffCPUSkipped}}<h4>off-CPU time</h4>
<p class="note">Not recorded: {{.OffCPUSkipped}}.</p>{{else}}{{template "growth" (growth "off-CPU time (the goroutine not running)" .OffCPU)}}{{end}}
<p class="note">Profiles: {{range .Profiles}}<code>{{.}}</code> {{end}}</p>
{{if .Flame}}<p class="note">Differential flame graph of the CPU profiles: the shape of the new version, red where it spends more than the base, blue where less. Both ran the same number of operations.</p>
<iframe class="flame" title="differential flame graph of {{.Name}}" srcdoc="{{.Flame}}"></iframe>
{{end}}</section>
{{end}}{{end}}<h2>Trends</h2>
<p class="note">The median of each commit's samples (oldest first) with its 95% confidence interval; red dashed lines are change points (E-Divisive means), labelled with the medians before → after.</p>
{{range .Charts}}{{template "chart" .}}{{else}}<p>No stored history.</p>{{end}}
</body>
</html>
{{define "growth"}}<h4>{{.Title}}</h4>
{{if .Rows}}<table class="growth"><tr><th>growth</th><th>base</th><th>new</th><th>function</th></tr>
{{range .Rows}}<tr><td class="num">{{.Delta}}</td><td class="num">{{.Base}}</td><td class="num">{{.New}}</td><td class="fn">{{.Function}}</td></tr>
{{end}}</table>{{else}}<p class="note">No function grew.</p>{{end}}
{{end}}
{{define "chart"}}<figure>
<figcaption><code>{{.Title}}</code> {{.Unit}}{{if .ChangePointCount}}: {{.ChangePointCount}} change point(s){{end}}{{if .NoInterval}} <span class="note">(no interval where a commit has fewer than 6 samples)</span>{{end}}</figcaption>
<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Title}} {{.Unit}} per commit">
{{range .YTicks}}<line class="grid" x1="{{$.Left}}" x2="{{$.Right}}" y1="{{.Y}}" y2="{{.Y}}"/><text class="ytick" x="{{$.Left}}" dx="-6" y="{{.Y}}" dy="4" text-anchor="end">{{.Label}}</text>
{{end}}<line class="axis" x1="{{.Left}}" x2="{{.Left}}" y1="{{.Top}}" y2="{{.Bottom}}"/><line class="axis" x1="{{.Left}}" x2="{{.Right}}" y1="{{.Bottom}}" y2="{{.Bottom}}"/>
<text x="{{.Left}}" y="16">{{.Unit}}</text>
{{range .XLabels}}<text class="xtick" x="{{.X}}" y="{{.Y}}" text-anchor="end" transform="rotate(-40 {{.X}} {{.Y}})">{{.Label}}</text>
{{end}}{{range .ChangePoints}}<g class="cp" data-commit="{{.Commit}}"><title>change point at {{.Commit}}: median {{.Label}}</title><line x1="{{.X}}" x2="{{.X}}" y1="{{$.Top}}" y2="{{$.Bottom}}"/><text x="{{.LabelX}}" y="{{$.Top}}" dy="-6" text-anchor="{{.Anchor}}">{{.Label}}</text></g>
{{end}}<polyline class="median" points="{{.Line}}"/>
{{range .Points}}<g class="point">{{if .Whisker}}<line class="ci" x1="{{.X}}" x2="{{.X}}" y1="{{.Lo}}" y2="{{.Hi}}"/>{{end}}<circle cx="{{.X}}" cy="{{.Y}}" r="3"><title>{{.Title}}</title></circle></g>
{{end}}</svg>
</figure>
{{end}}`))
