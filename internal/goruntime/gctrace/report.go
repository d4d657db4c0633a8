package gctrace

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Format names the JSON schema written by WriteJSON.
const Format = "wallprof.gctrace/v1"

// ms converts a duration to milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// jsonSummary is the JSON form of a Summary, with units in the names.
type jsonSummary struct {
	Name           string   `json:"name"`
	Lines          int      `json:"lines"`
	Collections    int      `json:"collections"`
	Forced         int      `json:"forced"`
	Restarts       int      `json:"restarts"`
	SkippedOther   int      `json:"skipped_other_lines"`
	SkippedScav    int      `json:"skipped_scavenger_lines"`
	SkippedLegacy  int      `json:"skipped_go1.4_lines"`
	Damaged        int      `json:"damaged_lines"`
	FirstS         float64  `json:"first_s"`
	LastS          float64  `json:"last_s"`
	SpanMS         float64  `json:"span_ms"`
	Procs          int      `json:"procs"`
	RuntimePercent int      `json:"gc_percent_runtime"`
	ClockPercent   *float64 `json:"gc_percent_clock"`
	CPUPercent     *float64 `json:"gc_percent_cpu"`
	GCWallMS       float64  `json:"gc_wall_ms"`
	GCCPUMS        float64  `json:"gc_cpu_ms"`
	IdleCPUMS      float64  `json:"gc_idle_cpu_ms"`
	STWMS          float64  `json:"stw_ms"`
	MaxSTWMS       float64  `json:"max_stw_ms"`
	PaceMS         float64  `json:"pace_ms"`
	HeapBeforeMB   Spread   `json:"heap_before_mb"`
	HeapAfterMB    Spread   `json:"heap_after_mb"`
	HeapLiveMB     Spread   `json:"heap_live_mb"`
	GoalMB         Spread   `json:"goal_mb"`
	Requests       int64    `json:"requests,omitempty"`
	RequestsPerGC  float64  `json:"requests_per_gc,omitempty"`
}

func toJSON(s Summary) jsonSummary {
	j := jsonSummary{
		Name: s.Name, Lines: s.Lines, Collections: s.Collections, Forced: s.Forced, Restarts: s.Restarts,
		SkippedOther: s.Other, SkippedScav: s.Scavenger, SkippedLegacy: s.Legacy, Damaged: s.Damaged,
		FirstS: s.First.Seconds(), LastS: s.Last.Seconds(), SpanMS: ms(s.Span), Procs: s.Procs,
		RuntimePercent: s.RuntimePercent, GCWallMS: ms(s.GCWall), GCCPUMS: ms(s.GCCPU), IdleCPUMS: ms(s.IdleCPU),
		STWMS: ms(s.STW), MaxSTWMS: ms(s.MaxSTW), PaceMS: ms(s.Pace),
		HeapBeforeMB: s.HeapBefore, HeapAfterMB: s.HeapAfter, HeapLiveMB: s.HeapLive, GoalMB: s.Goal,
		Requests: s.Requests, RequestsPerGC: round2(s.RequestsPerGC),
	}
	if s.Span > 0 {
		c, p := round2(s.ClockPercent), round2(s.CPUPercent)
		j.ClockPercent, j.CPUPercent = &c, &p
	}
	return j
}

// WriteJSON writes one summary, or two with their deltas (after minus
// before, and that as a percentage of before), as one JSON object.
func WriteJSON(w io.Writer, sums ...Summary) error {
	out := struct {
		Format string               `json:"format"`
		Logs   []jsonSummary        `json:"logs"`
		Deltas map[string]jsonDelta `json:"deltas,omitempty"`
	}{Format: Format}
	for _, s := range sums {
		out.Logs = append(out.Logs, toJSON(s))
	}
	if len(sums) == 2 {
		out.Deltas = map[string]jsonDelta{}
		for _, m := range metrics(sums[0], sums[1]) {
			if m.ok {
				d := jsonDelta{Abs: round2(m.b - m.a)}
				if m.a != 0 {
					p := round2(100 * (m.b - m.a) / m.a)
					d.Percent = &p
				}
				out.Deltas[m.key] = d
			}
		}
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(out)
}

type jsonDelta struct {
	Abs     float64  `json:"abs"`
	Percent *float64 `json:"percent"` // null when the first value is zero
}

// fmtDur prints a duration in seconds above one second, else in
// milliseconds, with three decimals.
func fmtDur(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		return fmt.Sprintf("%.3fs", d.Seconds())
	}
	return fmt.Sprintf("%.3fms", float64(d)/1e6)
}

func fmtMedian(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// WriteText writes a summary for people.
func WriteText(w io.Writer, s Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "gctrace:          %s\n", s.Name)
	fmt.Fprintf(&b, "lines:            %d: %d collections (%d forced)%s\n", s.Lines, s.Collections, s.Forced, skipped(s))
	if s.Restarts > 0 {
		fmt.Fprintf(&b, "restarts:         %d (the collection number went down: several runs in one log)\n", s.Restarts)
	}
	fmt.Fprintf(&b, "span:             @%.3fs to @%.3fs: %s\n", s.First.Seconds(), s.Last.Seconds(), fmtDur(s.Span))
	fmt.Fprintf(&b, "GC time, runtime: %d%% of the CPU since the program started (the runtime's figure, last line)\n", s.RuntimePercent)
	if s.Span > 0 {
		fmt.Fprintf(&b, "GC time, clock:   %.2f%% of the span (%s, every phase's wall-clock time)\n", s.ClockPercent, fmtDur(s.GCWall))
		fmt.Fprintf(&b, "GC time, CPU:     %.2f%% of span x %d P (%s; idle marking, %s, excluded)\n", s.CPUPercent, s.Procs, fmtDur(s.GCCPU), fmtDur(s.IdleCPU))
	} else {
		fmt.Fprintf(&b, "GC time, clock:   n/a (the span is zero)\nGC time, CPU:     n/a (the span is zero)\n")
	}
	fmt.Fprintf(&b, "stop-the-world:   %s in all, %s at most in one cycle\n", fmtDur(s.STW), fmtDur(s.MaxSTW))
	if s.Collections > 1 {
		fmt.Fprintf(&b, "pace:             one collection every %s\n", fmtDur(s.Pace))
	}
	if s.Requests > 0 {
		fmt.Fprintf(&b, "requests per GC:  %.2f (%d requests)\n", s.RequestsPerGC, s.Requests)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "heap (MB)\tmin\tmedian\tmax\t")
	// the names are padded to one width so that they read left-aligned
	for _, r := range []struct {
		name string
		s    Spread
	}{{"before", s.HeapBefore}, {"after", s.HeapAfter}, {"live", s.HeapLive}, {"goal", s.Goal}} {
		fmt.Fprintf(tw, "%-9s\t%d\t%s\t%d\t\n", r.name, r.s.Min, fmtMedian(r.s.Median), r.s.Max)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func skipped(s Summary) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{s.Other, "other"}, {s.Scavenger, "scavenger"}, {s.Legacy, "Go 1.4 format"}, {s.Damaged, "damaged"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; skipped " + strings.Join(parts, ", ")
}

// MarshalJSON writes a summary in the form WriteJSON uses, with units in the
// field names.
func (s Summary) MarshalJSON() ([]byte, error) { return json.Marshal(toJSON(s)) }

// UnmarshalJSON reads a summary written by MarshalJSON.
func (s *Summary) UnmarshalJSON(data []byte) error {
	var j jsonSummary
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	d := func(ms float64) time.Duration { return time.Duration(math.Round(ms * 1e6)) }
	*s = Summary{Name: j.Name, Lines: j.Lines, Collections: j.Collections, Forced: j.Forced, Restarts: j.Restarts,
		Other: j.SkippedOther, Scavenger: j.SkippedScav, Legacy: j.SkippedLegacy, Damaged: j.Damaged,
		First: time.Duration(math.Round(j.FirstS * 1e9)), Last: time.Duration(math.Round(j.LastS * 1e9)),
		Span: d(j.SpanMS), Procs: j.Procs, RuntimePercent: j.RuntimePercent,
		GCWall: d(j.GCWallMS), GCCPU: d(j.GCCPUMS), IdleCPU: d(j.IdleCPUMS), STW: d(j.STWMS), MaxSTW: d(j.MaxSTWMS),
		Pace: d(j.PaceMS), HeapBefore: j.HeapBeforeMB, HeapAfter: j.HeapAfterMB, HeapLive: j.HeapLiveMB, Goal: j.GoalMB,
		Requests: j.Requests, RequestsPerGC: j.RequestsPerGC}
	if j.ClockPercent != nil {
		s.ClockPercent = *j.ClockPercent
	}
	if j.CPUPercent != nil {
		s.CPUPercent = *j.CPUPercent
	}
	return nil
}
