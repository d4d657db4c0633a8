package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/bench"
)

func TestBenchFormatClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                     "0s",
		1400 * time.Millisecond:               "1s",
		59*time.Second + 600*time.Millisecond: "1m00s",
		125 * time.Second:                     "2m05s",
		time.Hour + 2*time.Minute + 29*time.Second: "1h02m",
		time.Hour + 2*time.Minute + 31*time.Second: "1h03m",
	} {
		if got := formatClock(d); got != want {
			t.Errorf("formatClock(%v) = %q; want %q", d, got, want)
		}
	}
}

func TestBenchFormatProgress(t *testing.T) {
	p := bench.Progress{Phase: "round", Done: 2, Total: 10, Elapsed: 25 * time.Second, DoneAt: 20 * time.Second}
	// 10 s a round, 8 rounds left, 5 s into the third: 75 s left.
	if got, want := formatProgress(p, true), "round 3 of 10 · 25s elapsed · about 1m15s left"; got != want {
		t.Errorf("terminal line %q; want %q", got, want)
	}
	if got, want := formatProgress(p, false), "2 of 10 rounds done · 25s elapsed · about 1m15s left"; got != want {
		t.Errorf("log line %q; want %q", got, want)
	}
	first := bench.Progress{Phase: "explain", Total: 2, Elapsed: 3 * time.Second}
	if got, want := formatProgress(first, true), "explaining regression 1 of 2 · 3s elapsed · estimating the time left"; got != want {
		t.Errorf("first step %q; want %q", got, want)
	}
}

// Off a terminal: a plain line when a step ends, none before the first
// step ends nor after the last, and at most one per interval.
func TestBenchProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	b := &benchProgress{w: &buf, every: 0, printed: time.Now()}
	step := bench.NewProgress(b.update, "round", 3)
	for i := range 4 {
		step(i)
	}
	b.done()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "wallprof bench: 1 of 3 rounds done") ||
		!strings.HasPrefix(lines[1], "wallprof bench: 2 of 3 rounds done") || strings.Contains(buf.String(), "\r") {
		t.Errorf("plain progress:\n%s", buf.String())
	}
	buf.Reset()
	b = &benchProgress{w: &buf, every: time.Hour, printed: time.Now()}
	step = bench.NewProgress(b.update, "round", 3)
	for i := range 4 {
		step(i)
	}
	if buf.Len() != 0 {
		t.Errorf("a line within the interval: %q", buf.String())
	}
}

// The progress lines go to stderr: stdout of a --json run stays one JSON
// document.
func TestBenchProgressJSON(t *testing.T) {
	dir, _, _ := benchRepo(t)
	t.Chdir(dir)
	t.Setenv("WALLPROF_BENCH_PROGRESS_EVERY", "0s")
	code, stdout, stderr := runCmd("bench", "--json", "--count", "3", "--benchtime", "100x")
	if code != exitOK {
		t.Fatalf("bench exited %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "wallprof bench: 1 of 3 rounds done") || !strings.Contains(stderr, "wallprof bench: 2 of 3 rounds done") {
		t.Errorf("no progress on stderr: %q", stderr)
	}
	var rep bench.Report
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&rep); err != nil || rep.Format != bench.Format || len(rep.Runs) != 1 || rep.Runs[0].Results != 3 {
		t.Errorf("stdout is not the run's JSON (%v): %q", err, stdout)
	}
	if dec.More() {
		t.Errorf("more than one JSON document on stdout: %q", stdout)
	}
}
