package convert

import (
	"strconv"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// gdb -p PID -batch -ex 'thread apply all bt' output, possibly several
// dumps in a row:
//
//	Thread 2 (Thread 0x7fafb2c7f6c0 (LWP 8760) "compute"):
//	#0  0x000055e0842a61aa in spin_inner () at w.c:20
//	#1  __futex_abstimed_wait_common64 (private=128, ...) at ./nptl/futex-internal.c:57
//	#2  0x00007fafb2d8c8ec in clone3 () from /lib/x86_64-linux-gnu/libc.so.6
//
// gdb also prints chatter around the dumps ("[New LWP 8760]", the frame
// it stopped in, "[Inferior 1 (process 8759) detached]"): lines before the
// first thread of a dump are not counted as skipped.

// parseGDBThread parses a "Thread N (... (LWP TID) "NAME"):" header.
func parseGDBThread(line string) (tid int, name string, ok bool) {
	if !strings.HasPrefix(line, "Thread ") || !strings.HasSuffix(line, ":") {
		return 0, "", false
	}
	i := strings.Index(line, "(LWP ")
	if i < 0 {
		// A thread without an LWP (a core file of a non-threaded program).
		return 0, "", strings.Contains(line, "(")
	}
	n, rest, _ := strings.Cut(line[i+len("(LWP "):], ")")
	tid, err := strconv.Atoi(n)
	if err != nil {
		return 0, "", false
	}
	rest = strings.TrimSpace(rest)
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		if k := strings.LastIndexByte(rest, '"'); k > j {
			name = rest[j+1 : k]
		}
	}
	return tid, name, true
}

// parseGDBFrame parses "#N  [0xADDR in ]FUNC (ARGS)[ at FILE:LINE| from LIB]".
func parseGDBFrame(line string) (frame, bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "#") {
		return frame{}, false
	}
	num, rest, _ := strings.Cut(s[1:], " ")
	if _, err := strconv.Atoi(num); err != nil {
		return frame{}, false
	}
	rest = strings.TrimSpace(rest)
	var f frame
	if strings.HasPrefix(rest, "0x") {
		a, after, ok := strings.Cut(rest, " in ")
		if !ok {
			return frame{}, false
		}
		addr, err := strconv.ParseUint(a[2:], 16, 64)
		if err != nil {
			return frame{}, false
		}
		f.Address, rest = addr, after
	}
	if i := strings.LastIndex(rest, " at "); i >= 0 {
		if file, ln, ok := parseSourceLine(rest[i+4:]); ok {
			f.File, f.Line, rest = file, ln, rest[:i]
		}
	} else if i := strings.LastIndex(rest, " from "); i >= 0 && strings.HasSuffix(rest[:i], ")") {
		f.Module, rest = strings.TrimSpace(rest[i+6:]), rest[:i]
	}
	f.Function = gdbFunction(strings.TrimSpace(rest))
	if f.Function == "" {
		return frame{}, false
	}
	if f.Function == "??" {
		f.Function = ""
	}
	return f, true
}

// gdbFunction strips the argument list, the last balanced "(...)", from
// "FUNC (ARGS)". Names may contain parentheses themselves
// ("std::function<void ()>::operator()"), so the match starts at the end.
func gdbFunction(s string) string {
	if !strings.HasSuffix(s, ")") {
		return s
	}
	depth := 0
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				return strings.TrimSpace(s[:i])
			}
		}
	}
	return s
}

// gdbChatter reports whether line is one of gdb's messages around a dump.
func gdbChatter(t string) bool {
	for _, p := range []string{"[New LWP", "[New Thread", "[Thread debugging", "Using host libthread_db",
		"[Inferior ", "warning:", "Downloading ", "Reading symbols", "Missing separate debuginfo", "Try: ",
		"(No debugging symbols", "Backtrace stopped:", "Python Exception", "No symbol table"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	// A source line gdb lists where it stopped: "57\t./nptl/futex-internal.c: No such file or directory."
	n, _, ok := strings.Cut(t, "\t")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}

func parseGDB(data []byte, opt Options) *Result {
	b := newBuilder(opt.period(), true, opt.PIDs)
	r := &Result{}
	lr := &lineReader{data: data}
	var (
		tid      int
		name     string
		inThread bool
		inDump   bool // a thread header was seen since the last "[Inferior ... detached]"
		stack    []frame
		stacks   int
	)
	flush := func() {
		if inThread && len(stack) > 0 {
			b.add(threadKey{TID: tid, Name: name}, profile.Other, stack, int64(opt.period()))
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
		case strings.HasPrefix(t, "Thread "):
			flush()
			id, n, ok := parseGDBThread(t)
			if !ok {
				r.skip(lr.n, line)
				continue
			}
			tid, name, inThread, inDump = id, n, true, true
		case strings.HasPrefix(t, "#") && inThread:
			f, ok := parseGDBFrame(t)
			if !ok {
				r.skip(lr.n, line)
				continue
			}
			stack = append(stack, f)
		case strings.HasPrefix(t, "[Inferior "):
			flush()
			inDump = false
		case gdbChatter(t) || !inDump:
			// gdb's messages, and what it prints on attaching.
		default:
			r.skip(lr.n, line)
		}
	}
	flush()
	r.Lines = lr.n
	b.note("converted from gdb backtraces: %d thread stacks, each weighing a nominal %v; gdb does not say which state a thread was in, so the time is counted as state other, and thread times are sums of snapshots; process IDs are unknown", stacks, opt.period())
	r.Profile = b.finish()
	return r
}
