package flame

import (
	"bufio"
	_ "embed"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

//go:embed assets/svg.js
var svgJS string

// SVG geometry, in pixels.
const (
	svgRow     = 16
	svgPad     = 10
	svgTop     = 58 // title, subtitle and buttons
	svgBottom  = 28 // details line
	svgCharW   = 7.0
	svgMinPx   = 0.1 // narrower frames are left out
	svgMinText = 3   // characters a label needs to be drawn
)

// WriteSVG writes p as a standalone interactive SVG flame graph of one
// weight (opt.Weight): click a frame to zoom, hover for its times, "Search"
// to highlight a regular expression's matches and see their share. The
// root is at the bottom, as in flamegraph.pl's output.
func WriteSVG(w io.Writer, p *profile.Profile, opt Options) error {
	if p == nil {
		return fmt.Errorf("flame graph: nil profile")
	}
	t := BuildTree(p, opt)
	width := opt.Width
	if width <= 0 {
		width = DefaultSVGWidth
	}
	title := opt.Title
	if title == "" {
		title = "Flame graph"
		if p.Command != "" {
			title += ": " + p.Command
		}
	}
	inner := float64(width - 2*svgPad)
	total := t.Root.Value.Of(opt.Weight)
	levels := 1
	if total > 0 {
		t.Root.Walk(func(n *Node) {
			if float64(n.Value.Of(opt.Weight))*inner/float64(total) >= svgMinPx && n.Depth+1 > levels {
				levels = n.Depth + 1
			}
		})
	}
	height := svgTop + levels*svgRow + svgBottom
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" data-levels="%d">
<style>
text { font-family: Verdana, "DejaVu Sans", sans-serif; font-size: 12px; fill: #111; }
#title { font-size: 17px; font-weight: bold; }
#subtitle, #details, #matched { fill: #555; }
.btn { cursor: pointer; fill: #2b5fad; }
.f { cursor: pointer; }
.f:hover rect { stroke: #222; stroke-width: 0.8; }
.f text { pointer-events: none; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
</style>
<rect width="100%%" height="100%%" fill="#fafafa"/>
<text id="title" x="%d" y="22" text-anchor="middle">%s</text>
<text id="subtitle" x="%d" y="42" text-anchor="middle">%s</text>
<text id="reset" class="btn" x="%d" y="22" visibility="hidden">Reset zoom</text>
<text id="search" class="btn" x="%d" y="22" text-anchor="end">Search</text>
<text id="matched" x="%d" y="%d" text-anchor="end"></text>
<text id="details" x="%d" y="%d"> </text>
<g id="frames">
`, width, height, width, height, levels,
		width/2, xmlText(title), width/2, xmlText(subtitle(p, t)+" · weight: "+weightLabel(opt.Weight)),
		svgPad, width-svgPad, width-svgPad, height-10, svgPad, height-10)
	if total > 0 {
		writeSVGFrames(bw, t, opt.Weight, inner, total, levels)
	}
	// The script comes last: it runs when parsed and needs the frames.
	bw.WriteString("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n")
	bw.WriteString(strings.ReplaceAll(svgJS, "]]>", "]] >"))
	bw.WriteString("]]></script>\n</svg>\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write SVG flame graph: %w", err)
	}
	return nil
}

// writeSVGFrames writes one <g> per frame at least svgMinPx wide, in
// preorder. data-x and data-w are the frame's start and width as fractions
// of the total, which the script uses to zoom.
func writeSVGFrames(bw *bufio.Writer, t *Tree, wt present.Weight, inner float64, total int64, levels int) {
	type item struct {
		n *Node
		x int64 // weight before this frame, from the left
	}
	todo := []item{{t.Root, 0}}
	for len(todo) > 0 {
		it := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		v := it.n.Value.Of(wt)
		px := float64(v) * inner / float64(total)
		if v <= 0 || px < svgMinPx {
			continue
		}
		fx, fw := float64(it.x)/float64(total), float64(v)/float64(total)
		x := svgPad + fx*inner
		y := svgTop + (levels-1-it.n.Depth)*svgRow
		fmt.Fprintf(bw, `<g class="f" data-x="%s" data-w="%s" data-d="%d"><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/><text x="%.1f" y="%d">%s</text></g>`+"\n",
			fmtFrac(fx), fmtFrac(fw), it.n.Depth, xmlText(svgTitle(it.n, t.Root)), x, y, max(px-0.5, 0.1), svgRow-1,
			kindColor(dominant(&it.n.Value, wt), nameHash(it.n.Name)), x+3, y+svgRow/2+4, xmlText(fitLabel(it.n.Name, px)))
		// Children go on the stack in reverse so they come out in order.
		start := len(todo)
		cx := it.x
		for _, c := range it.n.Children {
			todo = append(todo, item{c, cx})
			cx += c.Value.Of(wt)
		}
		slices.Reverse(todo[start:])
	}
}

func fmtFrac(f float64) string { return strconv.FormatFloat(f, 'g', 7, 64) }

// svgTitle is a frame's hover text: its name on the first line (the script
// reads it back), then its times.
func svgTitle(n, root *Node) string {
	v := &n.Value
	wall := v.Wall()
	share := func(x int64) string {
		if wall == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f%%", 100*float64(x)/float64(wall))
	}
	rootWall := root.Value.Wall()
	of := "-"
	if rootWall > 0 {
		of = fmt.Sprintf("%.2f%%", 100*float64(wall)/float64(rootWall))
	}
	return fmt.Sprintf("%s\nwall %s (%s of all wall time)\non-CPU %s (%s)\nrunnable %s (%s)\nblocked %s (%s)",
		n.Name, fmtDurT(wall), of, fmtDurT(v[profile.OnCPU]), share(v[profile.OnCPU]),
		fmtDurT(v[profile.Runnable]), share(v[profile.Runnable]), fmtDurT(v.Blocked()), share(v.Blocked()))
}

// fitLabel cuts a name to the characters that fit px pixels, or drops it.
func fitLabel(name string, px float64) string {
	room := int((px - 6) / svgCharW)
	if room < svgMinText {
		return ""
	}
	r := []rune(name)
	if len(r) <= room {
		return name
	}
	return string(r[:room-2]) + ".."
}

// Frame kinds, by what dominates a frame: the same hues as the HTML page.
const (
	kindOnCPU = iota
	kindRunnable
	kindBlocked
)

// dominant says which of on-CPU, runnable and blocked time dominates v
// under weight w.
func dominant(v *Values, w present.Weight) int {
	on, run, blk := v[profile.OnCPU], v[profile.Runnable], v.Blocked()
	switch w {
	case present.CPU:
		return kindOnCPU
	case present.OffCPU:
		if run >= blk {
			return kindRunnable
		}
		return kindBlocked
	}
	switch {
	case on >= run && on >= blk:
		return kindOnCPU
	case run >= blk:
		return kindRunnable
	}
	return kindBlocked
}

var kindHSL = [...]struct{ hue, spread, sat, light float64 }{
	kindOnCPU:    {22, 20, 88, 58},
	kindRunnable: {300, 16, 45, 66},
	kindBlocked:  {205, 16, 70, 64},
}

// kindColor is the colour of a frame of kind k whose name hashes to h in
// [0, 1): the kind's hue, varied a little by the name.
func kindColor(k int, h float64) string {
	c := kindHSL[k]
	return fmt.Sprintf("hsl(%.1f,%.0f%%,%.1f%%)", c.hue+(h-0.5)*c.spread, c.sat, c.light+(h-0.5)*10)
}

// nameHash maps a name to [0, 1), the same on every run.
func nameHash(s string) float64 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return float64(h.Sum32()) / (1 << 32)
}

func weightLabel(w present.Weight) string {
	switch w {
	case present.CPU:
		return "on-CPU"
	case present.OffCPU:
		return "off-CPU"
	}
	return "wall"
}

func fmtDurT(ns int64) string {
	return fmtDur(timeDuration(ns))
}

// xmlText escapes s for XML text and attributes, dropping what XML cannot
// hold (invalid UTF-8, control characters).
func xmlText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF {
			return -1
		}
		return r
	}, s)
	return html.EscapeString(s)
}
