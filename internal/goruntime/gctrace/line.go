package gctrace

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseLine reads one collection line, which may be preceded on the same
// line by the program's own output (an unterminated write). It reports false
// when s holds no readable collection line.
func ParseLine(s string) (Cycle, bool) {
	for off := 0; ; {
		i := strings.Index(s[off:], "gc ")
		if i < 0 {
			return Cycle{}, false
		}
		if c, ok := parseAt(s[off+i:]); ok {
			return c, true
		}
		off += i + 3
	}
}

// parseAt reads a line that starts with "gc ".
func parseAt(s string) (Cycle, bool) {
	head, body, ok := strings.Cut(s, ": ")
	if !ok {
		return Cycle{}, false
	}
	c := Cycle{Stacks: -1, Globals: -1}
	if !parseHead(head, &c) {
		return Cycle{}, false
	}
	var have struct{ clock, cpu, heap, goal, procs bool }
	for _, f := range strings.Split(body, ", ") {
		f = strings.TrimSpace(f)
		switch {
		case strings.HasSuffix(f, " ms clock"):
			c.Clock, have.clock = parseClock(strings.TrimSuffix(f, " ms clock"))
		case strings.HasSuffix(f, " ms cpu"):
			c.CPU, c.IdleCPU, have.cpu = parseCPU(strings.TrimSuffix(f, " ms cpu"))
		case strings.HasSuffix(f, " MB goal"):
			c.Goal, have.goal = parseMB(strings.TrimSuffix(f, " MB goal"))
		case strings.HasSuffix(f, " MB stacks"):
			c.Stacks, _ = parseMB(strings.TrimSuffix(f, " MB stacks"))
		case strings.HasSuffix(f, " MB globals"):
			c.Globals, _ = parseMB(strings.TrimSuffix(f, " MB globals"))
		case strings.HasSuffix(f, " MB") && strings.Contains(f, "->"):
			have.heap = parseHeap(strings.TrimSuffix(f, " MB"), &c)
		case strings.Contains(f, " P"):
			have.procs = parseProcs(f, &c)
		}
	}
	return c, have.clock && have.cpu && have.heap && have.goal && have.procs
}

// parseHead reads "gc 12 @0.345s 3%" (Go 1.5 printed "gc #12"; Go 1.26 may
// append "(checking for goroutine leaks)").
func parseHead(head string, c *Cycle) bool {
	f := strings.Fields(head)
	if len(f) < 4 || f[0] != "gc" || !strings.HasPrefix(f[2], "@") || !strings.HasSuffix(f[2], "s") || !strings.HasSuffix(f[3], "%") {
		return false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(f[1], "#"))
	if err != nil || n < 0 {
		return false
	}
	at, ok := duration(strings.TrimSuffix(f[2][1:], "s"), float64(time.Second), maxAt)
	if !ok {
		return false
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(f[3], "%"))
	if err != nil || pct < 0 {
		return false
	}
	c.Num, c.At, c.Percent = n, at, pct
	return true
}

// Bounds on what a line may claim, so that totals cannot overflow: a
// timestamp up to a century, a phase up to an hour.
const (
	maxAt    = 100 * 365 * 24 * time.Hour
	maxPhase = time.Hour
)

// duration converts a non-negative decimal number of units, at most limit,
// to a Duration.
func duration(s string, unit float64, limit time.Duration) (time.Duration, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || v*unit > float64(limit) {
		return 0, false
	}
	return time.Duration(math.Round(v * unit)), true
}

func parseClock(s string) ([]time.Duration, bool) {
	parts := strings.Split(s, "+")
	ds := make([]time.Duration, 0, len(parts))
	for _, p := range parts {
		d, ok := duration(p, float64(time.Millisecond), maxPhase)
		if !ok {
			return nil, false
		}
		ds = append(ds, d)
	}
	return ds, len(ds) >= 2
}

// parseCPU reads "a+b/c/d+e": the slash group is assist/background/idle,
// so its third value is the idle mark time.
func parseCPU(s string) (ds []time.Duration, idle time.Duration, ok bool) {
	for _, p := range strings.Split(s, "+") {
		group := strings.Split(p, "/")
		for i, g := range group {
			d, ok := duration(g, float64(time.Millisecond), maxPhase)
			if !ok {
				return nil, 0, false
			}
			if len(group) == 3 && i == 2 {
				idle += d
			}
			ds = append(ds, d)
		}
	}
	return ds, idle, len(ds) >= 2
}

func parseMB(s string) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// parseHeap reads "4->5->2".
func parseHeap(s string, c *Cycle) bool {
	parts := strings.Split(s, "->")
	if len(parts) != 3 {
		return false
	}
	var v [3]int64
	for i, p := range parts {
		n, ok := parseMB(p)
		if !ok {
			return false
		}
		v[i] = n
	}
	c.HeapBefore, c.HeapAfter, c.HeapLive = v[0], v[1], v[2]
	return true
}

// parseProcs reads "4 P" or "4 P (forced)".
func parseProcs(s string, c *Cycle) bool {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "P" {
		return false
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return false
	}
	c.Procs = n
	c.Forced = len(f) > 2 && strings.Join(f[2:], " ") == "(forced)"
	return true
}
