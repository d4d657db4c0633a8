package flame

import (
	_ "embed"
	"fmt"
	"html"
	"io"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

//go:embed assets/flame.js
var flameJS string

//go:embed assets/flame.css
var flameCSS string

// csp forbids every request: the page must work offline and leak nothing.
const csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

// WriteHTML writes p as one self-contained interactive flame graph page.
func WriteHTML(w io.Writer, p *profile.Profile, opt Options) error {
	if p == nil {
		return fmt.Errorf("flame graph: nil profile")
	}
	t := BuildTree(p, opt)
	title := opt.Title
	if title == "" {
		title = "Flame graph"
		if p.Command != "" {
			title += ": " + p.Command
		}
	}
	return writePage(w, t, pageInfo{Title: title, Subtitle: subtitle(p, t), Weight: opt.Weight.String(), Icicle: opt.Icicle})
}

// WriteDiffHTML writes a differential flame graph: the shape of after, each
// frame coloured by the change of its time per second of recording from
// before (red: grew, blue: shrank).
func WriteDiffHTML(w io.Writer, before, after *profile.Profile, opt Options) error {
	if before == nil || after == nil {
		return fmt.Errorf("differential flame graph: nil profile")
	}
	if before.Duration <= 0 || after.Duration <= 0 {
		return fmt.Errorf("differential flame graph: a profile has no duration, so time per second is unknown")
	}
	t := BuildDiffTree(before, after, opt)
	title := opt.Title
	if title == "" {
		title = "Differential flame graph"
	}
	sub := fmt.Sprintf("shape of the second profile (%s, %s), coloured by the change in time per second of recording from the first (%s): red grew, blue shrank",
		fmtDur(after.Duration), after.Command, fmtDur(before.Duration))
	return writePage(w, t, pageInfo{Title: title, Subtitle: sub, Weight: opt.Weight.String(), Icicle: opt.Icicle})
}

func writePage(w io.Writer, t *Tree, info pageInfo) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="%s">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s</title>
<style>
%s</style>
</head>
`, csp, html.EscapeString(info.Title), flameCSS)
	b.WriteString(pageBody)
	b.WriteString(`<script type="application/json" id="flame-data">`)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write flame graph: %w", err)
	}
	if err := writeJSON(w, t, info); err != nil {
		return fmt.Errorf("write flame graph: %w", err)
	}
	if _, err := io.WriteString(w, "</script>\n<script>\n"+flameJS+"</script>\n</body>\n</html>\n"); err != nil {
		return fmt.Errorf("write flame graph: %w", err)
	}
	return nil
}

const pageBody = `<body>
<header>
<h1 id="title"></h1>
<div id="subtitle"></div>
<div class="bar">
<span class="group" id="weights" role="group" aria-label="weight">
<button data-weight="wall" title="all time: on-CPU and off-CPU">wall</button><button data-weight="cpu" title="on-CPU time only">on-CPU</button><button data-weight="offcpu" title="off-CPU time only: runnable and blocked">off-CPU</button>
</span>
<button id="orient" title="switch between flame (root at the bottom) and icicle (root at the top)">icicle</button>
<button id="reset" title="show the whole profile (Esc)">reset zoom</button>
<input id="search" type="search" placeholder="search: regular expression" spellcheck="false" size="28">
<span id="match"></span>
<span id="legend"></span>
</div>
</header>
<div id="chart"><canvas id="canvas"></canvas></div>
<div id="tip" hidden></div>
<footer id="note"></footer>
`

// subtitle sums up the profile: totals by kind of time and the bounds.
func subtitle(p *profile.Profile, t *Tree) string {
	v := t.Root.Value
	parts := []string{
		"wall " + fmtDur(time.Duration(v.Wall())),
		"on-CPU " + fmtDur(time.Duration(v[profile.OnCPU])),
		"runnable " + fmtDur(time.Duration(v[profile.Runnable])),
		"blocked " + fmtDur(time.Duration(v.Blocked())),
	}
	if p.Duration > 0 {
		parts = append(parts, "recording "+fmtDur(p.Duration))
	}
	parts = append(parts, fmt.Sprintf("%d samples", t.Samples))
	return strings.Join(parts, " · ")
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string {
	ns := float64(d)
	switch a := max(ns, -ns); {
	case a >= 1e9:
		return sig3(ns/1e9) + "s"
	case a >= 1e6:
		return sig3(ns/1e6) + "ms"
	case a >= 1e3:
		return sig3(ns/1e3) + "µs"
	}
	return fmt.Sprintf("%dns", d)
}

// sig3 prints x with three significant digits, without an exponent.
func sig3(x float64) string {
	switch a := max(x, -x); {
	case a >= 100:
		return fmt.Sprintf("%.0f", x)
	case a >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func timeDuration(ns int64) time.Duration { return time.Duration(ns) }
