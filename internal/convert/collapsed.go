package convert

import (
	"math"
	"strconv"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// Collapsed ("folded") stacks, as FlameGraph's stackcollapse scripts,
// inferno and `wallprof record --format collapsed` write them: frames from
// the root to the leaf separated by ';', a space, and a count:
//
//	compute-7618/7618;start_thread;compute;spin_inner 42
//
// Two conventions are read back: a root frame "COMM-PID/TID" (as
// stackcollapse-perf.pl --tid and wallprof's per-thread output write it)
// becomes the sample's thread, and a leaf frame naming a wallprof state
// ("[sleeping]") becomes its state. A "_[k]" suffix marks a kernel frame.

// parseCollapsedLine splits "a;b;c 123" into frames (root first) and value.
func parseCollapsedLine(line string) (frames []string, value float64, ok bool) {
	s := strings.TrimRight(line, " \t")
	i := strings.LastIndexAny(s, " \t")
	if i <= 0 {
		return nil, 0, false
	}
	v, err := strconv.ParseFloat(s[i+1:], 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, 0, false
	}
	stack := strings.TrimSpace(s[:i])
	if stack == "" {
		return nil, 0, false
	}
	return strings.Split(stack, ";"), v, true
}

// parseThreadFrame parses "COMM-PID/TID".
func parseThreadFrame(s string) (threadKey, bool) {
	slash := strings.LastIndexByte(s, '/')
	if slash < 0 {
		return threadKey{}, false
	}
	dash := strings.LastIndexByte(s[:slash], '-')
	if dash < 0 {
		return threadKey{}, false
	}
	pid, err1 := strconv.Atoi(s[dash+1 : slash])
	tid, err2 := strconv.Atoi(s[slash+1:])
	if err1 != nil || err2 != nil || pid < 0 || tid < 0 || s[dash+1] == '+' || s[slash+1] == '+' {
		return threadKey{}, false
	}
	return threadKey{PID: pid, TID: tid, Name: s[:dash]}, true
}

func parseCollapsed(data []byte, opt Options) *Result {
	b := newBuilder(opt.period(), true, opt.PIDs)
	r := &Result{}
	lr := &lineReader{data: data}
	var withThread, withState, lines int
	maxCount := float64(math.MaxInt64/4) / float64(opt.period())
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		names, v, ok := parseCollapsedLine(line)
		if !ok {
			r.skip(lr.n, line)
			continue
		}
		lines++
		var t threadKey
		if len(names) > 1 {
			if k, ok := parseThreadFrame(names[0]); ok {
				t, names = k, names[1:]
				withThread++
			}
		}
		st := profile.Other
		if n := len(names); n > 1 && strings.HasPrefix(names[n-1], "[") && strings.HasSuffix(names[n-1], "]") {
			if s, ok := profile.ParseState(names[n-1][1 : len(names[n-1])-1]); ok {
				st, names = s, names[:n-1]
				withState++
			}
		}
		stack := make([]frame, len(names))
		for i, name := range names {
			f := frame{Function: name}
			if k, ok := strings.CutSuffix(name, "_[k]"); ok && k != "" {
				f = frame{Function: k, Module: "[kernel.kallsyms]", Kernel: true}
			}
			if f.Function == "" {
				f.Function = "[unknown]"
			}
			stack[len(names)-1-i] = f
		}
		v = min(v, maxCount)
		b.add(t, st, stack, int64(math.Round(v*float64(opt.period()))))
	}
	r.Lines = lr.n
	b.note("converted from collapsed stacks: each count weighs a nominal %v (collapsed stacks have no unit; for wallprof's own output in nanoseconds use --period 1ns)", opt.period())
	if withState < lines {
		b.note("%d of %d stacks have no state frame, so their time is counted as state other", lines-withState, lines)
	}
	if withThread == 0 {
		b.note("the stacks name no threads")
	} else {
		b.note("thread times are sums of the stacks, not exact totals")
	}
	r.Profile = b.finish()
	return r
}
