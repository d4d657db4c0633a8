// Package gctrace reads the lines the Go runtime prints with
// GODEBUG=gctrace=1 and summarises them: collections, the span of time they
// cover, the share of time spent in the collector (as the runtime reports it
// and as computed from the phase times), stop-the-world time, pace, and the
// heap sizes.
//
// The contract: Parse never fails on content, only on read errors. Lines that
// are not collection lines (the program's own output, scavenger lines, lines
// too damaged to read) are counted, never fatal. It understands every format
// from Go 1.5 to Go 1.26:
//
//	gc N @Ts P%: a+b+c ms clock, a+b/c/d+e ms cpu, H0->H1->H2 MB, G MB goal[, S MB stacks, L MB globals], P P[ (forced)]
//
// (the stacks and globals fields appeared in Go 1.19; Go 1.5 printed five
// clock phases instead of three; Go 1.26 may add "(checking for goroutine
// leaks)" after the percentage; a '#' before the number is accepted). The stop-the-world collector of Go 1.4 and
// earlier printed "gcN(P): ..." lines with no timestamp: those are recognised
// and counted, not summarised.
package gctrace

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// Cycle is one garbage collection, as one gctrace line describes it.
type Cycle struct {
	Line    int           // 1-based line number in the log
	Num     int           // the runtime's collection number
	At      time.Duration // start of the cycle since the program started
	Percent int           // the runtime's GC CPU percentage since the program started
	// Clock holds the wall-clock time of each phase: sweep termination
	// (stop-the-world), concurrent mark, mark termination (stop-the-world);
	// Go 1.5 and 1.6 printed five phases.
	Clock []time.Duration
	// CPU holds the CPU time of each phase, in print order: sweep
	// termination, mark assist, background mark, idle mark, mark termination
	// (fewer or more terms in old versions).
	CPU []time.Duration
	// IdleCPU is the idle mark worker's CPU time, included in CPU: work
	// done on processors that had nothing else to run.
	IdleCPU time.Duration

	HeapBefore, HeapAfter, HeapLive, Goal int64 // MB: at start, at end of mark, marked live; the heap goal
	Stacks, Globals                       int64 // MB of stacks and globals to scan; -1 before Go 1.19
	Procs                                 int   // GOMAXPROCS
	Forced                                bool  // runtime.GC() or debug.FreeOSMemory asked for it
}

// STW is the cycle's stop-the-world wall-clock time: the sweep termination
// and mark termination phases (and, in the five-phase format of Go 1.5–1.6,
// the third phase that installed the write barrier).
func (c Cycle) STW() time.Duration {
	if len(c.Clock) == 0 {
		return 0
	}
	d := c.Clock[0]
	if len(c.Clock) > 1 {
		d += c.Clock[len(c.Clock)-1]
	}
	if len(c.Clock) == 5 {
		d += c.Clock[2]
	}
	return d
}

// Wall is the cycle's wall-clock time, all phases together.
func (c Cycle) Wall() time.Duration { return sum(c.Clock) }

// BusyCPU is the CPU time the collector took from the program: all the CPU
// terms except the idle mark time.
func (c Cycle) BusyCPU() time.Duration { return sum(c.CPU) - c.IdleCPU }

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// Log is a parsed gctrace log.
type Log struct {
	Cycles    []Cycle
	Lines     int // lines read
	Scavenger int // scavenger lines ("scvg..." before Go 1.12's rewrite, "scav ..." after), skipped
	Legacy    int // collection lines of Go 1.4 and earlier ("gcN(P): ..."), recognised but not summarised
	Damaged   int // lines that start like a collection line but could not be read
	Other     int // everything else: the program's own output
}

// maxLine bounds one line; longer lines are counted as other output.
const maxLine = 1 << 20

// Parse reads a log. It fails only when r fails.
func Parse(r io.Reader) (*Log, error) {
	l := &Log{}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if line != "" || err == nil {
			l.Lines++
			l.add(line)
		}
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return l, fmt.Errorf("read gctrace log: %w", err)
		}
	}
}

// readLine returns the next line without its end; a line longer than
// maxLine is cut there (the rest is discarded).
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(b) < maxLine {
			b = append(b, frag...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return strings.TrimRight(string(b), "\r\n"), err
	}
}

func (l *Log) add(line string) {
	s := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(s, "scvg") || strings.HasPrefix(s, "scav "):
		l.Scavenger++
	case isLegacy(s):
		l.Legacy++
	case strings.Contains(s, "gc ") && strings.Contains(s, " ms clock"):
		c, ok := ParseLine(s)
		if !ok {
			l.Damaged++
			return
		}
		c.Line = l.Lines
		l.Cycles = append(l.Cycles, c)
	default:
		l.Other++
	}
}

// isLegacy reports whether s looks like "gc12(4): ..." (Go 1.4 and earlier).
func isLegacy(s string) bool {
	rest, ok := strings.CutPrefix(s, "gc")
	if !ok {
		return false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return i > 0 && i < len(rest) && rest[i] == '('
}
