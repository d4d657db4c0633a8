package convert

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// perf script output: one event per block, a header line then one indented
// line per callchain frame (leaf first), then a blank line:
//
//	compute  7618 [001]  3074.605650:   10101010 cpu-clock:pppH:
//		            11aa spin_inner+0x21 (/tmp/cw/w)
//		           891f5 start_thread+0x305 (/usr/lib/x86_64-linux-gnu/libc.so.6)
//
// The header is "COMM [PID/]TID [CPU] TIME: [PERIOD] EVENT: [ARGS]"; COMM
// may contain spaces.

// perfEvent is one parsed header.
type perfEvent struct {
	comm     string
	pid, tid int
	hasPID   bool
	time     float64 // seconds
	period   int64
	hasPer   bool
	event    string // "cpu-clock:pppH", "sched:sched_switch", "offcpu-time"
	args     string
}

// parsePerfHeader parses an event header line.
func parsePerfHeader(line string) (perfEvent, bool) {
	var e perfEvent
	f := strings.Fields(line)
	ti := -1
	for i, tok := range f {
		if i > 0 && strings.HasSuffix(tok, ":") && strings.Contains(tok, ".") {
			if t, err := strconv.ParseFloat(tok[:len(tok)-1], 64); err == nil && t >= 0 {
				e.time, ti = t, i
				break
			}
		}
	}
	if ti < 1 || ti+1 >= len(f) {
		return e, false
	}
	head := f[:ti]
	if n := len(head); n > 1 && strings.HasPrefix(head[n-1], "[") && strings.HasSuffix(head[n-1], "]") {
		head = head[:n-1] // the CPU
	}
	if len(head) < 2 {
		return e, false
	}
	id := head[len(head)-1]
	if p, t, ok := strings.Cut(id, "/"); ok {
		// An exiting thread may be printed as ":-1 PID/-1".
		pid, err1 := strconv.Atoi(p)
		tid, err2 := strconv.Atoi(t)
		if err1 != nil || err2 != nil || pid < -1 || tid < -1 {
			return e, false
		}
		e.pid, e.tid, e.hasPID = pid, tid, true
	} else {
		tid, err := strconv.Atoi(id)
		if err != nil || tid < -1 {
			return e, false
		}
		e.tid = tid
	}
	e.comm = strings.Join(head[:len(head)-1], " ")
	rest := f[ti+1:]
	if p, err := strconv.ParseInt(rest[0], 10, 64); err == nil && len(rest) > 1 {
		e.period, e.hasPer = p, true
		rest = rest[1:]
	}
	if !strings.HasSuffix(rest[0], ":") || len(rest[0]) < 2 {
		return e, false
	}
	e.event = strings.TrimSuffix(rest[0], ":")
	// The arguments are what follows the event name in the original line,
	// so that spaces in them (comm values) are kept.
	if i := strings.Index(line, rest[0]); i >= 0 {
		e.args = strings.TrimSpace(line[i+len(rest[0]):])
	}
	return e, true
}

// parsePerfFrame parses a callchain line: "ADDR SYMBOL[+0xOFF] (DSO)".
func parsePerfFrame(line string) (frame, bool) {
	s := strings.TrimSpace(line)
	a, rest, _ := strings.Cut(s, " ")
	addr, err := strconv.ParseUint(a, 16, 64)
	if err != nil {
		return frame{}, false
	}
	rest = strings.TrimSpace(rest)
	f := frame{Address: addr}
	if strings.HasSuffix(rest, ")") {
		if i := strings.LastIndex(rest, " ("); i >= 0 {
			f.Module = rest[i+2 : len(rest)-1]
			rest = strings.TrimSpace(rest[:i])
		} else if strings.HasPrefix(rest, "(") {
			f.Module, rest = rest[1:len(rest)-1], ""
		}
	}
	if f.Module == "[unknown]" {
		f.Module = ""
	}
	f.Kernel = perfKernelModule(f.Module)
	if i := strings.LastIndex(rest, "+0x"); i > 0 {
		if _, err := strconv.ParseUint(rest[i+3:], 16, 64); err == nil {
			rest = rest[:i]
		}
	}
	if rest != "[unknown]" {
		f.Function = rest
	}
	return f, true
}

// perfKernelModule reports whether perf's dso name is the kernel or a
// kernel module ("[kernel.kallsyms]", "[ext4]"), not a special user mapping
// ("[vdso]", "[heap]", "[anon:...]").
func perfKernelModule(m string) bool {
	if strings.HasPrefix(m, "[kernel") || strings.HasSuffix(m, ".ko") {
		return true
	}
	if !strings.HasPrefix(m, "[") || !strings.HasSuffix(m, "]") {
		return false
	}
	switch name := strings.Trim(m, "[]"); {
	case name == "vdso", name == "vsyscall", name == "heap", name == "stack", name == "uprobes",
		strings.HasPrefix(name, "anon"), strings.HasPrefix(name, "stack:"), strings.Contains(name, "jit"):
		return false
	}
	return true
}

// perfTimeEvent reports whether event counts time in nanoseconds.
func perfTimeEvent(event string) bool {
	base, _, _ := strings.Cut(event, ":")
	base, _, _ = strings.Cut(base, "/")
	return base == "cpu-clock" || base == "task-clock"
}

// perfSamplingEvent reports whether event is a sampling (hardware or
// software) event rather than a tracepoint: no colon, or a colon followed
// only by perf's event modifiers.
func perfSamplingEvent(event string) bool {
	base, mod, ok := strings.Cut(event, ":")
	if !ok {
		return true
	}
	if base == "" || strings.Contains(base, "/") && !strings.HasSuffix(base, "/") {
		return false
	}
	return strings.Trim(mod, "ukhIGHpPSDWeb") == ""
}

// unclosed is a switch-out whose switch-in is missing, followed by the
// thread's next switch-out at next with no sample of it in between.
type unclosed struct {
	tid  int
	p    *pending
	next float64
}

// pending is a thread switched out whose switch-in has not been seen yet.
type pending struct {
	at    float64
	state profile.State
	stack []frame
	comm  string
	pid   int
}

// perfState maps a sched_switch prev_state to a state; exited is true for
// a thread that is leaving for good (X, Z).
func perfState(s string) (st profile.State, exited bool) {
	if s == "" {
		return profile.Other, false
	}
	switch s[0] {
	case 'R':
		return profile.Runnable, false
	case 'S', 'I':
		return profile.Sleeping, false
	case 'D':
		return profile.Disk, false
	case 'X', 'Z':
		return profile.Other, true
	}
	return profile.Other, false
}

// switchArgs holds the fields of a sched_switch event used here.
type switchArgs struct {
	prevComm  string
	prevPID   int
	prevState string
	nextComm  string
	nextPID   int
}

// argValue returns the value after "key=" up to the next space.
func argValue(args, key string) (string, bool) {
	i := strings.Index(args, key+"=")
	for i > 0 && args[i-1] != ' ' {
		j := strings.Index(args[i+1:], key+"=")
		if j < 0 {
			return "", false
		}
		i += 1 + j
	}
	if i < 0 {
		return "", false
	}
	v := args[i+len(key)+1:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v, true
}

func parseSwitchArgs(args string) (switchArgs, bool) {
	var a switchArgs
	pp, ok1 := argValue(args, "prev_pid")
	ps, ok2 := argValue(args, "prev_state")
	np, ok3 := argValue(args, "next_pid")
	if !ok1 || !ok2 || !ok3 {
		return a, false
	}
	var err1, err2 error
	a.prevPID, err1 = strconv.Atoi(pp)
	a.nextPID, err2 = strconv.Atoi(np)
	if err1 != nil || err2 != nil {
		return a, false
	}
	a.prevState = ps
	if i := strings.Index(args, "prev_comm="); i >= 0 {
		c := args[i+len("prev_comm="):]
		if j := strings.Index(c, " prev_pid="); j >= 0 {
			a.prevComm = c[:j]
		}
	}
	if i := strings.Index(args, "next_comm="); i >= 0 {
		c := args[i+len("next_comm="):]
		if j := strings.Index(c, " next_pid="); j >= 0 {
			a.nextComm = c[:j]
		}
	}
	return a, true
}

// perfParser holds the state of one parsePerf run.
type perfParser struct {
	b         *builder
	r         *Result
	opt       Options
	pending   map[int]*pending
	pids      map[int]int // tid -> pid, when perf printed it
	noPID     bool
	events    int // events read
	noStack   int // events without a call chain
	first     float64
	last      float64
	seenTime  bool
	periods   map[int64]int // cpu-clock periods seen, to pick the profile's period
	nominal   int           // samples weighed with the nominal frequency
	ignored   map[string]int
	unmatched uint64     // switch-outs whose switch-in the input lacks
	estimated uint64     // ... whose off-CPU time was estimated
	unclosed  []unclosed // ... followed by a switch-out and no sample
	offcpu    int
	switches  int
}

func parsePerf(data []byte, opt Options) *Result {
	freq := opt.PerfFrequency
	if freq <= 0 {
		freq = DefaultPerfFrequency
	}
	pp := &perfParser{
		b: newBuilder(0, true, opt.PIDs), r: &Result{}, opt: opt,
		pending: map[int]*pending{}, pids: map[int]int{},
		periods: map[int64]int{}, ignored: map[string]int{},
	}
	pp.opt.PerfFrequency = freq
	lr := &lineReader{data: data}
	var (
		ev      perfEvent
		inEvent bool // a header was read and its callchain is being read
		stack   []frame
	)
	flush := func() {
		if inEvent {
			pp.event(ev, stack)
		}
		inEvent, stack = false, nil
	}
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
			// perf script --header comments.
		case (line[0] == ' ' || line[0] == '\t') && perfIndentedHeader(line):
			// perf script -F pads the command name: the header is
			// indented like a frame.
			e, _ := parsePerfHeader(strings.TrimSpace(line))
			flush()
			ev, inEvent = e, true
		case line[0] == ' ' || line[0] == '\t':
			f, ok := parsePerfFrame(line)
			if !ok || !inEvent {
				// A callchain line that cannot be read, or one of an
				// event whose header could not be.
				pp.r.skip(lr.n, line)
				continue
			}
			stack = append(stack, f)
		default:
			e, ok := parsePerfHeader(line)
			if !ok {
				// A stray line; a callchain in progress goes on after it.
				pp.r.skip(lr.n, line)
				continue
			}
			flush()
			ev, inEvent = e, true
		}
	}
	flush()
	pp.r.Lines = lr.n
	pp.finish()
	pp.r.Profile = pp.b.finish()
	return pp.r
}

// thread returns the thread key of tid, named comm.
func (pp *perfParser) thread(tid int, comm string) threadKey {
	return threadKey{PID: pp.pids[tid], TID: tid, Name: comm}
}

// perfScriptFields is the perf script command line that prints what the
// conversion needs: with -F, perf prints call chains only when ip is among
// the fields.
const perfScriptFields = "'perf script -F +pid,+ip,+sym,+dso' (with -F, perf prints call chains only when ip is among the fields)"

// perfIndentedHeader reports whether an indented line is an event header
// (perf script -F right-aligns the command name in 16 columns) rather than
// a callchain frame.
func perfIndentedHeader(line string) bool {
	t := strings.TrimSpace(line)
	if _, ok := parsePerfFrame(t); ok && strings.HasSuffix(t, ")") {
		return false
	}
	_, ok := parsePerfHeader(t)
	return ok
}

// event handles one parsed event and its callchain.
func (pp *perfParser) event(e perfEvent, stack []frame) {
	pp.events++
	if len(stack) == 0 {
		pp.noStack++
	}
	if !pp.seenTime || e.time < pp.first {
		pp.first = e.time
	}
	if !pp.seenTime || e.time > pp.last {
		pp.last = e.time
	}
	pp.seenTime = true
	switch {
	case !e.hasPID:
		pp.noPID = true
	case e.tid > 0 && e.pid > 0:
		pp.pids[e.tid] = e.pid
	}
	switch {
	case e.event == "sched:sched_switch":
		pp.schedSwitch(e, stack)
	case e.event == "offcpu-time":
		pp.offcpu++
		if e.hasPer {
			pp.b.add(pp.thread(e.tid, e.comm), profile.Other, stack, e.period)
		}
	case perfSamplingEvent(e.event):
		v := int64(time.Second) / int64(pp.opt.PerfFrequency)
		if perfTimeEvent(e.event) && e.hasPer {
			v = e.period
			pp.periods[e.period]++
		} else {
			pp.nominal++
		}
		pp.running(e.tid, e.time, v)
		pp.b.add(pp.thread(e.tid, e.comm), profile.OnCPU, stack, v)
	default:
		pp.running(e.tid, e.time, 0)
		pp.ignored[e.event]++
	}
}

// running notes that tid was on a CPU at time at, in an event that
// counts the period ns before it (a cpu-clock sample), or 0 (its next
// switch-out, another event): a switch-out still pending had a switch-in
// the input does not show. perf records a per-thread event only in the
// thread's own context, and some kernels do not trace the switch out of
// an idle CPU's idle task (Linux 6.18 on a Firecracker VM, for one of
// its two CPUs). A sample bounds the switch-in: the thread was back on a
// CPU a period before it, within a period. A switch-out does not by
// itself: the thread may have run for long since; when the input has
// cpu-clock samples, a run with none was shorter than about a period, and
// finish closes those intervals a period before the switch-out.
func (pp *perfParser) running(tid int, at float64, period int64) {
	p := pp.pending[tid]
	if p == nil {
		return
	}
	delete(pp.pending, tid)
	if !pp.b.keep(pp.pids[tid]) {
		return
	}
	pp.unmatched++
	if period > 0 {
		pp.estimated++
		pp.offCPU(tid, p, at-float64(period)/1e9)
		return
	}
	pp.unclosed = append(pp.unclosed, unclosed{tid: tid, p: p, next: at})
}

func (pp *perfParser) schedSwitch(e perfEvent, stack []frame) {
	a, ok := parseSwitchArgs(e.args)
	if !ok {
		pp.ignored[e.event+" (unreadable arguments)"]++
		return
	}
	pp.switches++
	if p := pp.pending[a.nextPID]; p != nil && a.nextPID != 0 {
		delete(pp.pending, a.nextPID)
		pp.offCPU(a.nextPID, p, e.time)
	}
	if a.prevPID == 0 {
		return // the idle task
	}
	if _, known := pp.pids[a.prevPID]; !known && e.hasPID && e.pid > 0 {
		// A thread perf printed as ":-1 PID/-1" as it exited.
		pp.pids[a.prevPID] = e.pid
	}
	pp.running(a.prevPID, e.time, 0)
	st, exited := perfState(a.prevState)
	if exited {
		return
	}
	comm := a.prevComm
	if comm == "" {
		comm = e.comm
	}
	pp.pending[a.prevPID] = &pending{at: e.time, state: st, stack: stack, comm: comm}
}

// offCPU records the time from p's switch-out to until.
func (pp *perfParser) offCPU(tid int, p *pending, until float64) {
	ns := int64((until-p.at)*1e9 + 0.5)
	if ns <= 0 {
		return
	}
	pp.b.add(pp.thread(tid, p.comm), p.state, p.stack, ns)
}

func (pp *perfParser) finish() {
	b := pp.b
	// Threads still switched out at the end were off-CPU until then.
	tids := make([]int, 0, len(pp.pending))
	for tid := range pp.pending {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	for _, tid := range tids {
		pp.offCPU(tid, pp.pending[tid], pp.last)
	}
	if pp.seenTime {
		b.p.Duration = time.Duration((pp.last-pp.first)*1e9 + 0.5)
	}
	// The profile's period: the commonest cpu-clock period, else the nominal one.
	var best int64
	for p, n := range pp.periods {
		if best == 0 || n > pp.periods[best] || n == pp.periods[best] && p < best {
			best = p
		}
	}
	if best > 0 {
		// Time was sampled: a run with no sample was about a period long
		// at most (see running).
		for _, u := range pp.unclosed {
			pp.estimated++
			pp.offCPU(u.tid, u.p, u.next-float64(best)/1e9)
		}
	}
	if best == 0 && pp.nominal > 0 {
		best = int64(time.Second) / int64(pp.opt.PerfFrequency)
	}
	b.p.Period = best
	b.note("converted from perf script output; thread times are the sums of the converted samples, not exact totals")
	if pp.nominal > 0 {
		b.note("%d samples of events that do not count time (cycles, instructions...) each weigh 1/%d s, as if recorded with perf record -F %d", pp.nominal, pp.opt.PerfFrequency, pp.opt.PerfFrequency)
	}
	if pp.switches == 0 && pp.offcpu == 0 {
		b.note("no sched:sched_switch events: off-CPU time is unknown (record with perf record -e sched:sched_switch -g -a to get it)")
	}
	if pp.offcpu > 0 {
		b.note("perf --off-cpu offcpu-time events do not say how a thread was blocked: their time is counted as state other")
	}
	if pp.unmatched > 0 {
		b.lost("switch-in-not-seen", pp.unmatched)
		why := "perf records a per-thread event only in the thread's own context, so record with -a; some kernels do not trace a switch out of an idle CPU"
		switch {
		case pp.estimated == pp.unmatched:
			b.note("%d switch-outs had no switch-in in the input (%s): each of those off-CPU intervals ends a sample period before the thread's next event, to within a period", pp.unmatched, why)
		case pp.estimated > 0:
			b.note("%d switch-outs had no switch-in in the input (%s): %d of those off-CPU intervals end a sample period before the thread's next sample, to within a period; the other %d, with no sample before the next switch-out, are left out (record cpu-clock samples too, to bound them)", pp.unmatched, why, pp.estimated, pp.unmatched-pp.estimated)
		default:
			b.note("%d switch-outs had no switch-in in the input (%s): their off-CPU time is left out (record cpu-clock samples too, to bound it)", pp.unmatched, why)
		}
	}
	if pp.noStack > 0 {
		what := fmt.Sprintf("%d of %d events had no call chain", pp.noStack, pp.events)
		if pp.noStack == pp.events {
			what = "no event had a call chain"
		}
		w := fmt.Sprintf("%s: record with 'perf record -g', and run %s", what, perfScriptFields)
		b.note("%s", w)
		if pp.noStack*10 >= pp.events {
			// A perf script without call chains, rather than the odd
			// event whose chain the kernel could not take.
			pp.r.Warnings = append(pp.r.Warnings, w)
		}
	}
	if pp.noPID {
		w := "perf script printed thread IDs without process IDs: process IDs are 0; run " + perfScriptFields
		if len(pp.opt.PIDs) > 0 {
			w = "perf script printed thread IDs without process IDs, so --pid could not tell the processes; run " + perfScriptFields
		}
		b.note("%s", w)
		pp.r.Warnings = append(pp.r.Warnings, w)
	}
	var kinds []string
	for k := range pp.ignored {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		b.note("ignored %d %s events: they are neither samples nor context switches", pp.ignored[k], k)
	}
}
