package convert

import (
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// pt-pmp output: the date, then one line per distinct stack with how many
// times it was seen, its frames leaf first, separated by commas:
//
//	Sun Nov 22 01:28:34 UTC 2026
//	      2 spin_inner,compute_work,compute,start_thread,clone3
//
// pt-pmp merges threads and keeps only function names (cut to -l
// characters when asked).

// parsePtPmpLine parses "COUNT frame,frame,...".
func parsePtPmpLine(line string) (count int64, frames []string, ok bool) {
	s := strings.TrimSpace(line)
	c, rest, found := strings.Cut(s, " ")
	if !found {
		return 0, nil, false
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil || n <= 0 {
		return 0, nil, false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return 0, nil, false
	}
	return n, strings.Split(rest, ","), true
}

// isDateLine reports whether line is the output of date(1), as pt-pmp
// prints before its stacks: a weekday, a clock time, a year.
func isDateLine(line string) bool {
	f := strings.Fields(line)
	if len(f) < 5 || len(f) > 7 || !strings.Contains("Mon Tue Wed Thu Fri Sat Sun", f[0]) || len(f[0]) != 3 {
		return false
	}
	clock := false
	for _, x := range f {
		if _, err := time.Parse("15:04:05", x); err == nil {
			clock = true
		}
	}
	return clock
}

func parsePtPmp(data []byte, opt Options) *Result {
	b := newBuilder(opt.period(), false, opt.PIDs)
	r := &Result{}
	lr := &lineReader{data: data}
	var snapshots int64
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		if strings.TrimSpace(line) == "" || isDateLine(line) {
			continue
		}
		n, names, ok := parsePtPmpLine(line)
		if !ok {
			r.skip(lr.n, line)
			continue
		}
		stack := make([]frame, len(names))
		for i, name := range names {
			stack[i] = frame{Function: strings.TrimSpace(name)}
			if stack[i].Function == "" {
				stack[i].Function = "??"
			}
		}
		if n > 1<<40/int64(opt.period()) {
			n = 1 << 40 / int64(opt.period()) // keep the product in range
		}
		b.add(threadKey{}, profile.Other, stack, n*int64(opt.period()))
		snapshots += n
	}
	r.Lines = lr.n
	b.note("converted from pt-pmp output: %d thread stacks, each weighing a nominal %v; pt-pmp does not say which thread or state a stack was in, so the time is counted as state other", snapshots, opt.period())
	r.Profile = b.finish()
	return r
}
