package exectrace

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the summary as JSON (schema Format).
func WriteJSON(w io.Writer, s *Summary) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(s)
}

// WriteText writes the summary for a terminal.
func WriteText(w io.Writer, s *Summary) error {
	p := &printer{w: w}
	p.f("trace:       %s (Go 1.%s format, %s, %d events)\n", s.Name, strings.TrimPrefix(s.GoVersion, "1."), sizeString(s.Bytes), s.Events)
	p.f("duration:    %s, GOMAXPROCS %d, %d generations\n", fmtMs(s.DurationMs), s.Procs, s.Generations)
	if s.Truncated != "" {
		p.f("truncated:   %s\n", s.Truncated)
	}
	p.pauses(s)
	p.gc(s)
	p.sched(s)
	p.blocking(s)
	p.syscalls(s)
	p.goroutines(s)
	p.types("user regions", s.Regions)
	p.types("user tasks", s.Tasks)
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// fmtMs prints milliseconds with a unit that suits them.
func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 1:
		return fmt.Sprintf("%.2fms", v)
	default:
		return fmt.Sprintf("%.1fµs", v*1000)
	}
}

func (p *printer) dist(d Dist) string {
	return fmt.Sprintf("%d, total %s, p50 %s, p90 %s, p99 %s, max %s", d.Count, fmtMs(d.TotalMs),
		fmtMs(d.P50Ms), fmtMs(d.P90Ms), fmtMs(d.P99Ms), fmtMs(d.MaxMs))
}

func periodString(pr *Period) string {
	if pr == nil {
		return "too few to tell a period"
	}
	s := fmt.Sprintf("median interval %s (mean %s), %.0f%% of %d intervals within 10%% of it",
		fmtMs(pr.MedianMs), fmtMs(pr.MeanMs), pr.WithinPct, pr.Intervals)
	if pr.Periodic {
		return "recur every " + fmtMs(pr.MedianMs) + ": " + s
	}
	return "no steady period: " + s
}

func (p *printer) stack(indent string, st []string, n int) {
	for i, l := range st {
		if i == n {
			p.f("%s...\n", indent)
			break
		}
		p.f("%s%s\n", indent, l)
	}
}

func (p *printer) pauses(s *Summary) {
	p.f("\nstop-the-world pauses: %s\n", p.dist(s.Pauses.Dist))
	if s.Pauses.Count == 0 {
		return
	}
	p.f("  all pauses: %s\n", periodString(s.Pauses.Period))
	for _, k := range s.Pauses.Kinds {
		p.f("  %-28s from %s: %s\n", k.Reason, k.Site, p.dist(k.Dist))
		p.f("    %s\n", periodString(k.Period))
	}
	p.f("  longest:\n")
	for _, o := range s.Pauses.Longest[:min(3, len(s.Pauses.Longest))] {
		p.f("    %s at %s (%s)\n", fmtMs(o.Ms), fmtMs(o.AtMs), o.What)
		p.stack("      ", o.Stack, 6)
	}
}

func (p *printer) gc(s *Summary) {
	g := s.GC
	p.f("\nGC: %d cycles, %s in the mark phase; %s\n", g.Cycles, fmtMs(g.MarkMs), periodString(g.Period))
	p.f("  GC workers: %.1f%% of the CPU (runtime.gcBgMarkWorker running time %s / (GOMAXPROCS %d × %s))\n",
		g.WorkerCPUPct, fmtMs(g.WorkerRunningMs), s.Procs, fmtMs(s.DurationMs))
	p.f("  mark assists: %s in all\n", fmtMs(g.AssistMs))
	for _, a := range g.Assists[:min(5, len(g.Assists))] {
		p.f("    %10s  %s\n", fmtMs(a.Ms), a.Group)
	}
}

func (p *printer) sched(s *Summary) {
	l := s.Sched
	p.f("\nscheduling latency (runnable → running): %s\n", p.dist(l.Dist))
	p.histogram(l.Histogram)
	p.f("  by goroutine group (start function):\n")
	for _, g := range l.Groups[:min(8, len(l.Groups))] {
		p.f("    %-40s %s\n", g.Group, p.dist(g.Dist))
	}
	p.f("  worst:\n")
	for _, o := range l.Worst[:min(3, len(l.Worst))] {
		p.f("    %s at %s, goroutine %d (%s)\n", fmtMs(o.Ms), fmtMs(o.AtMs), o.Goroutine, o.Group)
		p.stack("      ", o.Stack, 4)
	}
}

func (p *printer) histogram(bs []Bucket) {
	var most int64
	for _, b := range bs {
		most = max(most, b.Count)
	}
	for _, b := range bs {
		bar := 0
		if most > 0 {
			bar = int(40 * b.Count / most)
		}
		p.f("    ≤ %9s %8d %s\n", fmtMs(b.LeMs), b.Count, strings.Repeat("█", bar))
	}
}

func (p *printer) blocking(s *Summary) {
	p.f("\nblocking by reason:\n")
	for _, r := range s.Blocking {
		p.f("  %-12s %10s", r.Reason, fmtMs(r.TotalMs))
		for i, g := range r.Groups[:min(3, len(r.Groups))] {
			sep := "  "
			if i > 0 {
				sep = ", "
			}
			p.f("%s%s %s", sep, g.Group, fmtMs(g.Ms))
		}
		p.f("\n")
		if len(r.Stacks) > 0 && r.Reason != "runtime" && r.Reason != "GC" {
			st := r.Stacks[0]
			p.f("    top stack (%s, %d times):\n", fmtMs(st.Ms), st.Count)
			p.stack("      ", st.Stack, 5)
		}
	}
}

func (p *printer) syscalls(s *Summary) {
	c := s.Syscalls
	p.f("\nsyscalls: %s; %d held their thread long enough to lose its P\n", p.dist(c.Dist), c.LostProc)
	for _, o := range c.Worst[:min(3, len(c.Worst))] {
		p.f("    %s at %s, goroutine %d (%s)\n", fmtMs(o.Ms), fmtMs(o.AtMs), o.Goroutine, o.Group)
		p.stack("      ", o.Stack, 4)
	}
}

func (p *printer) goroutines(s *Summary) {
	g := s.Goroutines
	p.f("\ngoroutines: %d created (%.1f/s), %d exited (%.1f/s), at most %d live, %d at the end\n",
		g.Created, g.CreatedPerS, g.Exited, g.ExitedPerS, g.MaxLive, g.LiveAtEnd)
	for _, r := range g.Groups[:min(8, len(g.Groups))] {
		p.f("  %6d  %-40s running %s\n", r.Goroutines, r.Group, fmtMs(r.RunningMs))
	}
}

func (p *printer) types(title string, ts []TypeDist) {
	if len(ts) == 0 {
		return
	}
	p.f("\n%s:\n", title)
	for _, t := range ts {
		p.f("  %-24s %s\n", t.Type, p.dist(t.Dist))
	}
}
