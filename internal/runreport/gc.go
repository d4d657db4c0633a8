package runreport

import (
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
)

// edgeSlack: see BuildGC.
const edgeSlack = 100 * time.Millisecond

// BuildGC summarises the collections of l that started in the window
// [start, end] (offsets from the program's start, the clock of gctrace's
// "@" field), with requests the number of requests served in it. A forced
// collection within edgeSlack of an edge counts outside the window: it is
// the one `wallprof run` asked for, to read a current allocation profile,
// and the two clocks differ by the few milliseconds the program took to
// start. It returns gctrace.ErrNoCycles when the log has no collection at all; a
// window without collections gives a summary with zero collections.
func BuildGC(l *gctrace.Log, start, end time.Duration, requests int64) (*GC, error) {
	if len(l.Cycles) == 0 {
		return nil, gctrace.ErrNoCycles
	}
	g := &GC{InLog: len(l.Cycles)}
	in := &gctrace.Log{Lines: l.Lines, Scavenger: l.Scavenger, Legacy: l.Legacy, Damaged: l.Damaged, Other: l.Other}
	var prev *gctrace.Cycle
	for i := range l.Cycles {
		c := &l.Cycles[i]
		p := GCPoint{At: c.At, Wall: c.Wall(), HeapBefore: c.HeapBefore, HeapAfter: c.HeapAfter, Goal: c.Goal,
			CPUPercent: -1, RuntimePercent: c.Percent}
		if prev != nil && c.At > prev.At && c.Procs > 0 {
			p.CPUPercent = 100 * float64(c.BusyCPU()) / (float64(c.At-prev.At) * float64(c.Procs))
		}
		g.Timeline = append(g.Timeline, p)
		prev = c
		switch {
		case c.At < start || c.Forced && c.At < start+edgeSlack:
			g.Before++
		case c.At > end || c.Forced && c.At > end-edgeSlack:
			g.After++
		default:
			in.Cycles = append(in.Cycles, *c)
		}
	}
	s, err := gctrace.Summarize("load window", in, requests)
	if err != nil {
		// No collection in the window: keep the counts of the log.
		s = gctrace.Summary{Name: "load window", Lines: l.Lines, Requests: requests}
	}
	g.Summary = s
	if requests > 0 {
		g.PerKRequests = 1000 * float64(len(in.Cycles)) / float64(requests)
	}
	return g, nil
}
