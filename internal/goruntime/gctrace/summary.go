package gctrace

import (
	"errors"
	"sort"
	"time"
)

// ErrNoCycles is returned by Summarize for a log with no collection line.
var ErrNoCycles = errors.New("no GODEBUG=gctrace=1 collection line")

// Spread is the minimum, median and maximum of a heap size, in MB.
type Spread struct {
	Min    int64   `json:"min"`
	Median float64 `json:"median"`
	Max    int64   `json:"max"`
}

func spread(vs []int64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := append([]int64(nil), vs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	m := float64(s[len(s)/2])
	if len(s)%2 == 0 {
		m = (float64(s[len(s)/2-1]) + m) / 2
	}
	return Spread{Min: s[0], Median: m, Max: s[len(s)-1]}
}

// Summary is what a log says about the collector. Percentages over the span
// are only meaningful when Span > 0 (two collections at different times).
type Summary struct {
	Name string // the log's name, for the report

	Lines, Scavenger, Legacy, Damaged, Other int // as in Log
	Collections, Forced                      int
	// Restarts counts the times the collection number or the time went
	// down: the log holds several runs of the program. The span is then the
	// sum of each run's span, and the pace counts intervals within runs.
	Restarts int

	First, Last time.Duration // @ of the first and last collection
	Span        time.Duration // Last - First (for one run)
	Procs       int           // GOMAXPROCS on the last line

	// RuntimePercent is the runtime's own figure on the last line: the
	// share of the CPU available since the program started that the
	// collector used.
	RuntimePercent int
	// ClockPercent is the wall-clock time of every phase of every cycle
	// over the span; CPUPercent the collector's CPU time (idle marking
	// excluded) over the span times Procs.
	ClockPercent, CPUPercent float64
	GCWall, GCCPU, IdleCPU   time.Duration // totals over all cycles

	STW    time.Duration // total stop-the-world time
	MaxSTW time.Duration // the longest stop-the-world time of one cycle
	Pace   time.Duration // average time between the starts of two collections

	HeapBefore, HeapAfter, HeapLive, Goal Spread

	Requests      int64   // given by the user; 0: unknown
	RequestsPerGC float64 // Requests / Collections
}

// Summarize summarises a parsed log; requests, when positive, is the number
// of requests the program served while the log was written.
func Summarize(name string, l *Log, requests int64) (Summary, error) {
	s := Summary{Name: name, Lines: l.Lines, Scavenger: l.Scavenger, Legacy: l.Legacy, Damaged: l.Damaged, Other: l.Other}
	n := len(l.Cycles)
	if n == 0 {
		return s, ErrNoCycles
	}
	s.Collections = n
	first, last := l.Cycles[0], l.Cycles[n-1]
	s.First, s.Last, s.Procs, s.RuntimePercent = first.At, last.At, last.Procs, last.Percent
	var before, after, live, goal []int64
	runStart := first.At
	for i, c := range l.Cycles {
		if c.Forced {
			s.Forced++
		}
		if i > 0 {
			prev := l.Cycles[i-1]
			if c.Num < prev.Num || c.At < prev.At {
				s.Restarts++ // a new run: close the span of the previous one
				s.Span += prev.At - runStart
				runStart = c.At
			}
		}
		s.GCWall += c.Wall()
		s.GCCPU += c.BusyCPU()
		s.IdleCPU += c.IdleCPU
		stw := c.STW()
		s.STW += stw
		s.MaxSTW = max(s.MaxSTW, stw)
		before, after = append(before, c.HeapBefore), append(after, c.HeapAfter)
		live, goal = append(live, c.HeapLive), append(goal, c.Goal)
	}
	s.Span += last.At - runStart
	if s.Span > 0 {
		s.ClockPercent = 100 * float64(s.GCWall) / float64(s.Span)
		s.CPUPercent = 100 * float64(s.GCCPU) / (float64(s.Span) * float64(s.Procs))
	}
	if intervals := n - 1 - s.Restarts; intervals > 0 {
		s.Pace = s.Span / time.Duration(intervals)
	}
	s.HeapBefore, s.HeapAfter, s.HeapLive, s.Goal = spread(before), spread(after), spread(live), spread(goal)
	if requests > 0 {
		s.Requests = requests
		s.RequestsPerGC = float64(requests) / float64(n)
	}
	return s, nil
}
