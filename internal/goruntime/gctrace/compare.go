package gctrace

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// metric is one row of a comparison.
type metric struct {
	key, name string
	a, b      float64
	ok        bool // both values are known
	format    func(float64) string
	point     bool // a percentage: the delta is in percentage points
}

func count(v float64) string  { return fmt.Sprintf("%.0f", v) }
func msec(v float64) string   { return fmtDur(time.Duration(v * 1e6)) }
func pct(v float64) string    { return fmt.Sprintf("%.2f%%", v) }
func mb(v float64) string     { return fmtMedian(v) + " MB" }
func number(v float64) string { return fmt.Sprintf("%.2f", v) }

// metrics lists what a comparison shows, durations in milliseconds.
func metrics(a, b Summary) []metric {
	spans := a.Span > 0 && b.Span > 0
	m := []metric{
		{key: "collections", name: "collections", a: float64(a.Collections), b: float64(b.Collections), ok: true, format: count},
		{key: "span_ms", name: "span", a: ms(a.Span), b: ms(b.Span), ok: true, format: msec},
		{key: "gc_percent_runtime", name: "GC time, runtime", a: float64(a.RuntimePercent), b: float64(b.RuntimePercent), ok: true, format: pct, point: true},
		{key: "gc_percent_clock", name: "GC time, clock", a: round2(a.ClockPercent), b: round2(b.ClockPercent), ok: spans, format: pct, point: true},
		{key: "gc_percent_cpu", name: "GC time, CPU", a: round2(a.CPUPercent), b: round2(b.CPUPercent), ok: spans, format: pct, point: true},
		{key: "stw_ms", name: "stop-the-world", a: ms(a.STW), b: ms(b.STW), ok: true, format: msec},
		{key: "max_stw_ms", name: "longest STW", a: ms(a.MaxSTW), b: ms(b.MaxSTW), ok: true, format: msec},
		{key: "pace_ms", name: "pace", a: ms(a.Pace), b: ms(b.Pace), ok: a.Collections > 1 && b.Collections > 1, format: msec},
		{key: "requests_per_gc", name: "requests per GC", a: round2(a.RequestsPerGC), b: round2(b.RequestsPerGC), ok: a.Requests > 0 && b.Requests > 0, format: number},
	}
	for _, h := range []struct {
		key, name string
		a, b      Spread
	}{{"heap_before_mb", "heap before", a.HeapBefore, b.HeapBefore}, {"heap_after_mb", "heap after", a.HeapAfter, b.HeapAfter},
		{"heap_live_mb", "heap live", a.HeapLive, b.HeapLive}, {"goal_mb", "heap goal", a.Goal, b.Goal}} {
		m = append(m,
			metric{key: h.key + "_median", name: h.name + ", median", a: h.a.Median, b: h.b.Median, ok: true, format: mb},
			metric{key: h.key + "_max", name: h.name + ", max", a: float64(h.a.Max), b: float64(h.b.Max), ok: true, format: mb})
	}
	return m
}

// WriteComparison writes two summaries side by side with the change from
// the first to the second, absolute and relative.
func WriteComparison(w io.Writer, a, b Summary) error {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	ms := metrics(a, b)
	width := 0
	for _, m := range ms {
		width = max(width, len(m.name))
	}
	na, nb := columnNames(a.Name, b.Name)
	fmt.Fprintf(tw, "%*s\t%s\t%s\tdelta\tdelta %%\t\n", -width, "", na, nb)
	for _, m := range ms {
		name := fmt.Sprintf("%*s", -width, m.name)
		if !m.ok {
			fmt.Fprintf(tw, "%s\t%s\t%s\tn/a\tn/a\t\n", name, orNA(m, m.a, a), orNA(m, m.b, b))
			continue
		}
		d := m.b - m.a
		abs := m.format(d)
		if m.point {
			abs = fmt.Sprintf("%.2f pt", d)
		}
		if d >= 0 {
			abs = "+" + abs
		}
		rel := "n/a"
		if m.a != 0 {
			rel = fmt.Sprintf("%+.1f%%", 100*d/m.a)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, m.format(m.a), m.format(m.b), abs, rel)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sb.WriteString("\n")
	for _, s := range []Summary{a, b} {
		fmt.Fprintf(&sb, "%s: %d lines: %d collections (%d forced)%s\n", s.Name, s.Lines, s.Collections, s.Forced, skipped(s))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// columnNames shortens the logs' names to their base names for the column
// headers, unless that makes them equal (before/run.log, after/run.log).
func columnNames(a, b string) (string, string) {
	ba, bb := filepath.Base(a), filepath.Base(b)
	if ba == bb {
		return a, b
	}
	return ba, bb
}

// orNA prints one side of a metric that is not known on both sides.
func orNA(m metric, v float64, s Summary) string {
	switch {
	case m.key == "requests_per_gc" && s.Requests == 0,
		m.key == "pace_ms" && s.Collections < 2,
		m.point && s.Span == 0:
		return "n/a"
	}
	return m.format(v)
}
