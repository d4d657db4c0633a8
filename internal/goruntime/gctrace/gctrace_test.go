package gctrace

import (
	"bytes"
	goldenfile "github.com/wallprof/wallprof/internal/golden"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

func summarize(t *testing.T, name string, requests int64) Summary {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(name, l, requests)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// realLogs were captured by testdata/capture.sh from testdata/prog.
var realLogs = []string{"go1.16.15.log", "go1.20.14.log", "go1.22.12.log", "go1.26.8.log"}

func TestGoldenSummaries(t *testing.T) {
	for _, name := range append(realLogs, "handwritten.log") {
		t.Run(name, func(t *testing.T) {
			var requests int64
			if name == "handwritten.log" {
				requests = 1000
			}
			s := summarize(t, name, requests)
			var text, js bytes.Buffer
			if err := WriteText(&text, s); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, s); err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(name, ".log")
			golden(t, base+".txt", text.Bytes())
			golden(t, base+".json", js.Bytes())
		})
	}
}

func TestGoldenComparison(t *testing.T) {
	a, b := summarize(t, "go1.16.15.log", 0), summarize(t, "go1.26.8.log", 0)
	var text, js bytes.Buffer
	if err := WriteComparison(&text, a, b); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, a, b); err != nil {
		t.Fatal(err)
	}
	golden(t, "go1.16.15-vs-go1.26.8.txt", text.Bytes())
	golden(t, "go1.16.15-vs-go1.26.8.json", js.Bytes())
}

// Every "gc N @" line of the real logs is a collection, and everything
// else (the program's output) is skipped: checked against the raw text, not
// against the parser.
func TestRealLogsCountLines(t *testing.T) {
	for _, name := range realLogs {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var gc, forced, other int
		for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, "gc ") && strings.HasSuffix(line, " P (forced)"):
				gc++
				forced++
			case strings.HasPrefix(line, "gc "):
				gc++
			default:
				other++
			}
		}
		s := summarize(t, name, 0)
		if s.Collections != gc || s.Forced != forced || s.Other+s.Scavenger != other || s.Damaged != 0 {
			t.Errorf("%s: %d collections, %d forced, %d other, %d damaged; the text has %d, %d, %d",
				name, s.Collections, s.Forced, s.Other+s.Scavenger, s.Damaged, gc, forced, other)
		}
		if s.Forced == 0 || s.Span <= 0 || s.Procs <= 0 {
			t.Errorf("%s: want a forced collection, a span and P: %+v", name, s)
		}
	}
}

func TestParseLine(t *testing.T) {
	c, ok := ParseLine("gc 12 @0.345s 3%: 0.021+1.2+0.004 ms clock, 0.084+0.3/1.0/0.5+0.017 ms cpu, 4->5->2 MB, 5 MB goal, 0 MB stacks, 1 MB globals, 4 P (forced)")
	if !ok {
		t.Fatal("not parsed")
	}
	us := time.Microsecond
	if c.Num != 12 || c.At != 345*time.Millisecond || c.Percent != 3 || c.Procs != 4 || !c.Forced ||
		c.HeapBefore != 4 || c.HeapAfter != 5 || c.HeapLive != 2 || c.Goal != 5 || c.Stacks != 0 || c.Globals != 1 {
		t.Errorf("fields: %+v", c)
	}
	if c.STW() != 25*us || c.Wall() != 1225*us || c.IdleCPU != 500*us || c.BusyCPU() != 1401*us {
		t.Errorf("times: STW %v wall %v idle %v busy %v", c.STW(), c.Wall(), c.IdleCPU, c.BusyCPU())
	}
	old, ok := ParseLine("gc 7 @1.5s 2%: 0.1+2+0.2 ms clock, 0.4+1/2/3+0.8 ms cpu, 10->11->5 MB, 12 MB goal, 8 P")
	if !ok || old.Stacks != -1 || old.Globals != -1 || old.Forced || old.Procs != 8 {
		t.Errorf("Go 1.18 line: %v %+v", ok, old)
	}
	for _, bad := range []string{
		"gc 1 @0.1s 1%: 0.1+0.2 ms clock", // fields missing
		"gc x @0.1s 1%: 0.1+2+0.2 ms clock, 0.4+1/2/3+0.8 ms cpu, 10->11->5 MB, 12 MB goal, 8 P", // number
		"gc 1 @-1s 1%: 0.1+2+0.2 ms clock, 0.4+1/2/3+0.8 ms cpu, 10->11->5 MB, 12 MB goal, 8 P",  // negative time
		"gc 1 @1s 1%: 0.1+NaN+0.2 ms clock, 0.4+1/2/3+0.8 ms cpu, 10->11->5 MB, 12 MB goal, 8 P", // NaN
		"gc 1 @1s 1%: 0.1+2+0.2 ms clock, 0.4+1/2/3+0.8 ms cpu, 10->5 MB, 12 MB goal, 8 P",       // two heap sizes
	} {
		if c, ok := ParseLine(bad); ok {
			t.Errorf("ParseLine(%q) = %+v, want false", bad, c)
		}
	}
}

func TestNoCycles(t *testing.T) {
	l, err := Parse(strings.NewReader("hello\nscvg: 0 MB released\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Summarize("x", l, 0); err != ErrNoCycles {
		t.Errorf("Summarize: %v, want ErrNoCycles", err)
	}
	if l.Lines != 2 || l.Other != 1 || l.Scavenger != 1 {
		t.Errorf("counts: %+v", l)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range append(realLogs, "handwritten.log") {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte("gc 1 @0s 0%: 0+0 ms clock, 0+0 ms cpu, 0->0->0 MB, 0 MB goal, 1 P\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if l.Other+l.Scavenger+l.Legacy+l.Damaged+len(l.Cycles) != l.Lines {
			t.Fatalf("line counts do not add up: %+v", l)
		}
		s, err := Summarize("fuzz", l, 3)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteText(&out, s); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&out, s, s); err != nil {
			t.Fatal(err)
		}
		if err := WriteComparison(&out, s, s); err != nil {
			t.Fatal(err)
		}
	})
}

// A log holding two runs of a program sums the runs' spans.
func TestRestart(t *testing.T) {
	line := func(n int, at string) string {
		return "gc " + strconv.Itoa(n) + " @" + at + "s 1%: 1+8+1 ms clock, 2+1/4/2+2 ms cpu, 4->5->2 MB, 5 MB goal, 2 P\n"
	}
	log := line(1, "1.0") + line(2, "2.0") + line(3, "3.0") + "restarting\n" + line(1, "0.5") + line(2, "1.5")
	l, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize("two runs", l, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Restarts != 1 || s.Span != 3*time.Second || s.Pace != time.Second || s.STW != 10*time.Millisecond || s.ClockPercent != 100*0.050/3 {
		t.Errorf("restarts %d span %v pace %v STW %v clock %v%%", s.Restarts, s.Span, s.Pace, s.STW, s.ClockPercent)
	}
}
