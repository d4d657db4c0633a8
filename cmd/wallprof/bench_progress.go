package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/wallprof/wallprof/internal/bench"
)

// benchProgress is the progress line of the bench commands, on stderr
// (stdout carries the table or the JSON). On a terminal it is one line,
// rewritten in place every second and erased at the end; elsewhere (a CI
// log) it is a plain line when a step ends, at most one every
// progressEvery (10 s), so that a run shorter than that prints nothing.
type benchProgress struct {
	w     io.Writer
	tty   bool
	every time.Duration // the least time between two plain lines

	mu      sync.Mutex
	last    bench.Progress
	at      time.Time // when last arrived
	printed time.Time // when a plain line was last printed (or the start)
	shown   bool      // a terminal line is on screen
	stop    chan struct{}
}

// progressEvery is the least time between two plain progress lines;
// WALLPROF_BENCH_PROGRESS_EVERY (a duration) changes it, for the tests.
const progressEvery = 10 * time.Second

func newBenchProgress(stderr io.Writer) *benchProgress {
	every := progressEvery
	if d, err := time.ParseDuration(os.Getenv("WALLPROF_BENCH_PROGRESS_EVERY")); err == nil {
		every = d
	}
	return &benchProgress{w: stderr, tty: isTerminal(stderr), every: every, printed: time.Now()}
}

// update is the bench.Progress callback.
func (b *benchProgress) update(p bench.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last, b.at = p, time.Now()
	if !b.tty {
		if p.Done > 0 && p.Done < p.Total && time.Since(b.printed) >= b.every {
			fmt.Fprintf(b.w, "wallprof bench: %s\n", formatProgress(p, false))
			b.printed = time.Now()
		}
		return
	}
	if p.Done >= p.Total {
		b.erase()
		return
	}
	b.draw()
	if b.stop == nil {
		b.stop = make(chan struct{})
		go b.tick(b.stop)
	}
}

// tick redraws the terminal line every second, so that its clock moves
// during a long round.
func (b *benchProgress) tick(stop chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			b.mu.Lock()
			if b.shown {
				b.draw()
			}
			b.mu.Unlock()
		}
	}
}

func (b *benchProgress) draw() {
	p := b.last
	p.Elapsed += time.Since(b.at)
	fmt.Fprintf(b.w, "\r\033[Kwallprof bench: %s", formatProgress(p, true))
	b.shown = true
}

func (b *benchProgress) erase() {
	if b.shown {
		fmt.Fprint(b.w, "\r\033[K")
		b.shown = false
	}
}

// done erases the terminal line and stops its clock: call it before
// anything else is written to stderr.
func (b *benchProgress) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.erase()
	if b.stop != nil {
		close(b.stop)
		b.stop = nil
	}
}

// formatProgress is the text of the progress line: on a terminal the step
// under way ("round 3 of 10"), in a log the steps done ("2 of 10 rounds
// done"); then the time elapsed and the estimate of the time left.
func formatProgress(p bench.Progress, current bool) string {
	noun, verb := "round", "rounds done"
	if p.Phase == "explain" {
		noun, verb = "explaining regression", "regressions explained"
	}
	var s string
	if current {
		s = fmt.Sprintf("%s %d of %d", noun, min(p.Done+1, p.Total), p.Total)
	} else {
		s = fmt.Sprintf("%d of %d %s", p.Done, p.Total, verb)
	}
	s += " · " + formatClock(p.Elapsed) + " elapsed"
	if left, ok := p.Remaining(); ok {
		s += " · about " + formatClock(left) + " left"
	} else {
		s += " · estimating the time left"
	}
	return s
}

// formatClock writes d in whole seconds, minutes and hours: 7s, 2m05s,
// 1h02m (seconds dropped from an hour on).
func formatClock(d time.Duration) string {
	s := int64((d + time.Second/2) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	m := (s + 30) / 60
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
