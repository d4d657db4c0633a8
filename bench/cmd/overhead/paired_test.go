package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func run1(cfg string, run, round int, wall time.Duration) result {
	r := result{Config: cfg, Workload: "pingpong150k-pin2", Round: round, Run: run}
	r.W.Elapsed = wall
	return r
}

func TestPairedStat(t *testing.T) {
	s := paired([]float64{1.02, 1.02, 1.02, 1.02, 1.02})
	if s.N != 5 || s.Above != 5 || s.Median != 1.02 || s.Lo != 1.02 || s.Hi != 1.02 {
		t.Errorf("constant ratios: got %+v", s)
	}
	// Nine rounds, one far off: the median ignores it, the interval
	// holds the median and stays inside the data.
	r := []float64{0.97, 0.98, 0.99, 1.00, 1.01, 1.02, 1.03, 1.04, 1.90}
	s = paired(r)
	if s.Median != 1.01 || s.Above != 5 {
		t.Errorf("median %v above %d, want 1.01 and 5", s.Median, s.Above)
	}
	if !(s.Lo <= s.Median && s.Median <= s.Hi) || s.Lo < 0.97 || s.Hi > 1.90 || s.Hi >= 1.5 {
		t.Errorf("interval %v..%v around %v", s.Lo, s.Hi, s.Median)
	}
	if got := s.String(); !strings.HasPrefix(got, "+1.0% (") || !strings.HasSuffix(got, "5 of 9 above") {
		t.Errorf("String() = %q", got)
	}
	if got := paired(nil).String(); got != "-" {
		t.Errorf("no rounds: %q", got)
	}
}

// Pooled runs pair a configuration with its reference in the same round of
// the same run, never across runs.
func TestPairRatiosWithinARun(t *testing.T) {
	ref := []result{run1("none", 0, 1, 100), run1("none", 1, 1, 200)}
	rs := []result{run1("x", 0, 1, 110), run1("x", 1, 1, 220)}
	got := pairRatios(rs, ref, func(r result) float64 { return float64(r.W.Elapsed) })
	if len(got) != 2 || got[0] != 1.1 || got[1] != 1.1 {
		t.Errorf("ratios %v, want [1.1 1.1] (a cross-run pairing gives 2.2 or 0.55)", got)
	}
}

func TestReportPoolsRuns(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, slow := range []time.Duration{100, 300} { // two runs, the second slower throughout
		var rs []result
		for round := 1; round <= 3; round++ {
			rs = append(rs, run1("none", 0, round, slow*time.Millisecond),
				run1("hook-floor-99-walk", 0, round, slow*101/100*time.Millisecond),
				run1("wallprof-99", 0, round, slow*103/100*time.Millisecond))
		}
		p := filepath.Join(dir, string(rune('a'+i))+".csv")
		if err := writeCSV(p, rs); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	var out bytes.Buffer
	if err := reprint(&out, strings.Join(paths, ","), false); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "wallprof-99") && strings.Contains(l, "above") {
			line = l
		}
	}
	// Paired within each run: +3.0% vs none in all six rounds, and
	// 1.03/1.01 = +2.0% vs the floor. Pairing across runs would mix in
	// ratios of 3 and 1/3.
	if !strings.Contains(line, "+3.0% (+3.0 to +3.0), 6 of 6 above") || !strings.Contains(line, "+2.0% (+2.0 to +2.0), 6 of 6 above") {
		t.Errorf("pooled report's paired line:\n%s\nwhole output:\n%s", line, out.String())
	}
}
