package convert

import (
	"strconv"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// eu-stack -p PID output, one block per snapshot:
//
//	PID 8759 - process
//	TID 8759:
//	#0  0x00007fafb2d08f16 __futex_abstimed_wait_common
//	#1  0x000055e0842a6305 main
//
// With -m a frame ends in " - MODULE"; with -s a line "    FILE:LINE[:COL]"
// follows it; with -v the address may be followed by "- 1" (the pc was
// adjusted). A frame with no symbol is the bare address.

// parseEuFrame parses "#N  0xADDR [- 1] [NAME] [- MODULE]".
func parseEuFrame(line string) (frame, bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "#") {
		return frame{}, false
	}
	num, rest, _ := strings.Cut(s[1:], " ")
	if _, err := strconv.Atoi(num); err != nil {
		return frame{}, false
	}
	rest = strings.TrimSpace(rest)
	a, rest, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(a, "0x") {
		return frame{}, false
	}
	addr, err := strconv.ParseUint(a[2:], 16, 64)
	if err != nil {
		return frame{}, false
	}
	f := frame{Address: addr}
	rest = strings.TrimSpace(rest)
	if after, ok := strings.CutPrefix(rest, "- 1"); ok && (after == "" || after[0] == ' ') {
		rest = strings.TrimSpace(after)
	}
	if i := strings.LastIndex(rest, " - "); i >= 0 {
		f.Module, rest = strings.TrimSpace(rest[i+3:]), strings.TrimSpace(rest[:i])
	} else if m, ok := strings.CutPrefix(rest, "- "); ok {
		f.Module, rest = strings.TrimSpace(m), ""
	}
	f.Function = rest
	return f, true
}

// parseSourceLine parses "FILE:LINE[:COL]", as eu-stack -s prints it.
func parseSourceLine(s string) (file string, line int, ok bool) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	if len(parts) < 2 {
		return "", 0, false
	}
	// FILE:LINE:COL or FILE:LINE; the file itself may contain colons.
	for _, n := range []int{2, 1} {
		if len(parts) <= n {
			continue
		}
		nums := parts[len(parts)-n:]
		okNums := true
		for _, x := range nums {
			if _, err := strconv.Atoi(x); err != nil {
				okNums = false
			}
		}
		if okNums {
			l, _ := strconv.Atoi(nums[0])
			return strings.Join(parts[:len(parts)-n], ":"), l, true
		}
	}
	return "", 0, false
}

func parseEuStack(data []byte, opt Options) *Result {
	b := newBuilder(opt.period(), true, opt.PIDs)
	r := &Result{}
	lr := &lineReader{data: data}
	var (
		pid, tid  int
		inThread  bool
		stack     []frame
		snapshots int
		stacks    int
	)
	flush := func() {
		if inThread {
			b.add(threadKey{PID: pid, TID: tid}, profile.Other, stack, int64(opt.period()))
			stacks++
		}
		inThread, stack = false, nil
	}
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "":
		case strings.HasPrefix(t, "PID ") && strings.Contains(t, " - "):
			flush()
			n, _, _ := strings.Cut(strings.TrimPrefix(t, "PID "), " ")
			p, err := strconv.Atoi(n)
			if err != nil {
				r.skip(lr.n, line)
				continue
			}
			pid = p
			snapshots++
		case strings.HasPrefix(t, "TID ") && strings.HasSuffix(t, ":"):
			flush()
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t, "TID "), ":"))
			if err != nil {
				r.skip(lr.n, line)
				continue
			}
			tid, inThread = n, true
		case strings.HasPrefix(t, "#"):
			f, ok := parseEuFrame(t)
			if !ok || !inThread {
				r.skip(lr.n, line)
				continue
			}
			stack = append(stack, f)
		default:
			if file, ln, ok := parseSourceLine(t); ok && len(stack) > 0 && line[0] == ' ' {
				stack[len(stack)-1].File, stack[len(stack)-1].Line = file, ln
				continue
			}
			r.skip(lr.n, line)
		}
	}
	flush()
	r.Lines = lr.n
	b.note("converted from eu-stack output: %d snapshots, %d thread stacks, each weighing a nominal %v; eu-stack does not say which state a thread was in, so the time is counted as state other, and thread times are sums of snapshots", snapshots, stacks, opt.period())
	r.Profile = b.finish()
	return r
}
