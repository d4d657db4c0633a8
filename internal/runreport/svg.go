package runreport

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// The charts are inline SVG drawn here, so the report needs no script and
// no network; each mark has a <title> that the browser shows on hover.

// palette is colour-blind safe (Okabe–Ito), then greys.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999", "#666666"}

type plot struct {
	b                        strings.Builder
	w, h                     float64
	left, right, top, bottom float64
	x0, x1, y0, y1           float64
}

func newPlot(w, h, x0, x1, y0, y1 float64) *plot {
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	p := &plot{w: w, h: h, left: 64, right: 16, top: 12, bottom: 36, x0: x0, x1: x1, y0: y0, y1: y1}
	fmt.Fprintf(&p.b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img">`, w, h, w, h)
	return p
}

func (p *plot) X(v float64) float64 {
	return p.left + (v-p.x0)/(p.x1-p.x0)*(p.w-p.left-p.right)
}

func (p *plot) Y(v float64) float64 {
	return p.h - p.bottom - (v-p.y0)/(p.y1-p.y0)*(p.h-p.top-p.bottom)
}

// ticks returns round values covering [lo, hi], about n of them.
func ticks(lo, hi float64, n int) []float64 {
	if hi <= lo || n < 1 {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// Round to the step's decimals so that labels print as 1.4, not
	// 1.4000000000000001.
	scale := math.Pow(10, math.Max(0, -math.Floor(math.Log10(step))))
	var out []float64
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		out = append(out, math.Round(k*step*scale)/scale)
	}
	return out
}

// axes draws the grid, the tick labels and the axis names.
func (p *plot) axes(xname, yname string, yfmt func(float64) string) {
	fmt.Fprintf(&p.b, `<g class="grid">`)
	for _, v := range ticks(p.y0, p.y1, 4) {
		y := p.Y(v)
		fmt.Fprintf(&p.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><text class="yl" x="%.1f" y="%.1f">%s</text>`,
			p.left, p.w-p.right, y, y, p.left-6, y+4, html.EscapeString(yfmt(v)))
	}
	for _, v := range ticks(p.x0, p.x1, 8) {
		x := p.X(v)
		fmt.Fprintf(&p.b, `<line class="xt" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><text class="xl" x="%.1f" y="%.1f">%s</text>`,
			x, x, p.h-p.bottom, p.h-p.bottom+4, x, p.h-p.bottom+16, html.EscapeString(fmtSeconds(v)))
	}
	fmt.Fprintf(&p.b, `</g><text class="axis" x="%.1f" y="%.1f">%s</text><text class="axis" x="4" y="%.1f" transform="rotate(-90 10 %.1f)">%s</text>`,
		(p.left+p.w-p.right)/2, p.h-4, html.EscapeString(xname), p.h/2, p.h/2, html.EscapeString(yname))
}

// window shades the load window.
func (p *plot) window(start, end float64) {
	if end <= start {
		return
	}
	x0, x1 := p.X(max(start, p.x0)), p.X(min(end, p.x1))
	fmt.Fprintf(&p.b, `<rect class="window" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>load window %s to %s</title></rect>`,
		x0, p.top, x1-x0, p.h-p.top-p.bottom, fmtSeconds(start), fmtSeconds(end))
}

func (p *plot) String() string { return p.b.String() + "</svg>" }

func fmtSeconds(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0fs", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".") + "s"
}

func secs(d time.Duration) float64 { return d.Seconds() }

// heapChart draws the heap sawtooth: the heap grows to its size at the
// start of each collection and drops to its size at the end of marking;
// the goal is dashed.
func heapChart(g *GC, start, end time.Duration) string {
	if len(g.Timeline) == 0 {
		return ""
	}
	first, last := g.Timeline[0], g.Timeline[len(g.Timeline)-1]
	x0 := min(0, secs(first.At))
	x1 := max(secs(last.At+last.Wall), secs(end))
	var ymax int64
	for _, c := range g.Timeline {
		ymax = max(ymax, c.HeapBefore, c.Goal)
	}
	p := newPlot(880, 240, x0, x1, 0, float64(ymax)*1.1+1)
	p.window(secs(start), secs(end))
	p.axes("time since the server started", "heap (MB)", func(v float64) string { return fmt.Sprintf("%.0f", v) })
	var pts, goal strings.Builder
	for i, c := range g.Timeline {
		fmt.Fprintf(&pts, "%.1f,%.1f %.1f,%.1f ", p.X(secs(c.At)), p.Y(float64(c.HeapBefore)), p.X(secs(c.At+c.Wall)), p.Y(float64(c.HeapAfter)))
		if i+1 < len(g.Timeline) {
			fmt.Fprintf(&goal, "%.1f,%.1f %.1f,%.1f ", p.X(secs(c.At)), p.Y(float64(c.Goal)), p.X(secs(g.Timeline[i+1].At)), p.Y(float64(c.Goal)))
		}
	}
	fmt.Fprintf(&p.b, `<polyline class="goal" points="%s"/><polyline class="heap" points="%s"/>`, goal.String(), pts.String())
	for _, c := range g.Timeline {
		fmt.Fprintf(&p.b, `<circle class="gcdot" cx="%.1f" cy="%.1f" r="2.5"><title>collection at %s: %d → %d MB, goal %d MB, %s</title></circle>`,
			p.X(secs(c.At)), p.Y(float64(c.HeapBefore)), fmtSeconds(secs(c.At)), c.HeapBefore, c.HeapAfter, c.Goal, c.Wall)
	}
	return p.String()
}

// gcCPUChart draws the collector's CPU share per cycle as bars, and the
// runtime's cumulative figure as a line.
func gcCPUChart(g *GC, start, end time.Duration) string {
	if len(g.Timeline) == 0 {
		return ""
	}
	last := g.Timeline[len(g.Timeline)-1]
	x0, x1 := min(0, secs(g.Timeline[0].At)), max(secs(last.At+last.Wall), secs(end))
	ymax := 1.0
	for _, c := range g.Timeline {
		ymax = max(ymax, c.CPUPercent, float64(c.RuntimePercent))
	}
	p := newPlot(880, 180, x0, x1, 0, math.Min(100, ymax*1.15))
	p.window(secs(start), secs(end))
	p.axes("time since the server started", "GC CPU %", func(v float64) string { return fmt.Sprintf("%.0f%%", v) })
	var line strings.Builder
	for i, c := range g.Timeline {
		if c.CPUPercent >= 0 && i > 0 {
			xa, xb := p.X(secs(g.Timeline[i-1].At)), p.X(secs(c.At))
			y := p.Y(math.Min(c.CPUPercent, p.y1))
			fmt.Fprintf(&p.b, `<rect class="cpubar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%.1f%% of the CPU from %s to %s</title></rect>`,
				xa, y, math.Max(xb-xa, 0.5), p.Y(0)-y, c.CPUPercent, fmtSeconds(secs(g.Timeline[i-1].At)), fmtSeconds(secs(c.At)))
		}
		fmt.Fprintf(&line, "%.1f,%.1f ", p.X(secs(c.At)), p.Y(float64(c.RuntimePercent)))
	}
	fmt.Fprintf(&p.b, `<polyline class="cumulative" points="%s"/>`, line.String())
	return p.String()
}

// heapAreaChart stacks the bytes in use by site over time.
func heapAreaChart(h *HeapSeries, start, end time.Duration) string {
	if len(h.At) < 2 {
		return ""
	}
	var ymax int64
	for _, row := range h.Bytes {
		var t int64
		for _, v := range row {
			t += v
		}
		ymax = max(ymax, t)
	}
	p := newPlot(880, 260, secs(h.At[0]), secs(h.At[len(h.At)-1]), 0, float64(ymax)*1.1+1)
	p.window(secs(start), secs(end))
	p.axes("time since the server started", "in use", func(v float64) string { return fmtBytes(int64(v)) })
	base := make([]int64, len(h.At))
	for j, site := range h.Sites {
		var up, down strings.Builder
		for i := range h.At {
			fmt.Fprintf(&up, "%.1f,%.1f ", p.X(secs(h.At[i])), p.Y(float64(base[i]+h.Bytes[i][j])))
		}
		for i := len(h.At) - 1; i >= 0; i-- {
			fmt.Fprintf(&down, "%.1f,%.1f ", p.X(secs(h.At[i])), p.Y(float64(base[i])))
		}
		var peak int64
		for i := range h.At {
			base[i] += h.Bytes[i][j]
			peak = max(peak, h.Bytes[i][j])
		}
		fmt.Fprintf(&p.b, `<polygon fill="%s" points="%s%s"><title>%s: up to %s</title></polygon>`,
			palette[j%len(palette)], up.String(), down.String(), html.EscapeString(site), fmtBytes(peak))
	}
	return p.String()
}

// fmtBytes prints a size with a binary unit.
func fmtBytes(n int64) string {
	f := float64(n)
	switch {
	case math.Abs(f) >= 1<<30:
		return fmt.Sprintf("%.1f GiB", f/(1<<30))
	case math.Abs(f) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	case math.Abs(f) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
