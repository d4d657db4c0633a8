//go:build linux && amd64

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/latency"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

const latencyUsage = `Usage:
  wallprof latency [flags] -p PID FUNCTION...
  wallprof latency [flags] -p PID LIB:SYMBOL...

Measures how long calls of Go functions take in a running process, and
shows a histogram of their durations with the count, p50, p90, p99 and
max, per function, refreshed every second (plain lines when stdout is not
a terminal), until Ctrl-C, --duration or the process's exit. With --json
it prints one JSON document (wallprof.latency/v1) at the end instead.

FUNCTION is a Go function's full name, as in a stack trace:
main.handle, main.(*Index).Search, net/http.(*conn).serve. The program
may be stripped: functions are found in its .gopclntab. Each function gets
a uprobe at its entry and at each of its RET instructions (never a
uretprobe, which would corrupt the goroutine's stack). Only the outermost
call of a recursion is timed; a call that panics is not timed. A function
that is inlined everywhere cannot be measured. Go 1.17+ on amd64.

A native function is named lib:symbol (libc.so.6:getaddrinfo, libc:malloc,
/opt/lib/libfoo.so:foo_run), in any library the process has mapped; it
gets a uprobe and a uretprobe and is timed per thread, the outermost call
of a recursion only.

Each call's duration is split into running (on a CPU), runnable (waiting
for one) and blocked, from its thread's counters at entry and return,
per histogram bucket and in all: exact for native functions, Go calls
whose goroutine runs throughout, and goroutines locked to their thread; a
Go call that returns on another thread is not split (counted as moved),
and one that parks and resumes on the same thread (counted as parked)
may count other goroutines that thread ran meanwhile as its own (see
doc/latency-split.md).

For the Go calls whose goroutine stopped running on the way, wallprof
also reads the process's goroutine table every --sample-goroutines (10ms;
no probe in the scheduler) and gives, per bucket and in all, the states
their goroutine was seen in during those calls: running, runnable (in
Go's run queue), syscall, or the runtime's wait reason (sleep, chan
receive, IO wait, sync.Mutex.Lock, ...). Calls shorter than the interval
are seen in at most one sample each: the shares hold over many calls.

With --slow D --profile FILE, the calls that took at least D are written
to FILE as a pprof profile of where their goroutine was in those reads:
its stack while it waited (labelled wait_reason: sleep, chan receive, IO
wait, ...), was runnable or in a system call, and while it ran, the
stacks sampled on a CPU during the slow calls (a cpu-clock sample every
quarter interval, of goroutines inside a measured call, each weighing
that period), and "[running, thread waiting for a CPU]" for the rest of
the time the reads found it running. Each read counts the interval
(sample type wall, nanoseconds).

Each probe hit costs the calling goroutine about 15 µs (measured on a
2-vCPU VM; see BENCHMARKS.md): measure functions that take much longer,
or are called less than ~1,000 times a second. The cost is printed at the end.

Needs root, or CAP_BPF and CAP_PERFMON, and a kernel (5.18+) with BTF.

Flags:
`

func init() {
	commands["latency"] = command{order: 18, run: runLatency,
		usage: "  wallprof latency [flags] -p PID FUNC...   how long calls of Go functions take: histogram, p50/p90/p99\n"}
}

type latencyFlags struct {
	pid       int
	duration  time.Duration
	interval  time.Duration
	json      bool
	plain     bool
	sampleGs  time.Duration
	slow      time.Duration
	profile   string
	functions []string
}

func parseLatencyFlags(args []string, stdout, stderr io.Writer) (*latencyFlags, int, bool) {
	f := &latencyFlags{}
	fs := newCmdFlags("latency", latencyUsage, stdout, stderr)
	fs.IntVar(&f.pid, "p", 0, "measure the running process `PID`")
	fs.IntVar(&f.pid, "pid", 0, "same as -p")
	fs.DurationVar(&f.duration, "duration", 0, "stop after `DURATION` (default: at Ctrl-C or when the process exits)")
	fs.DurationVar(&f.interval, "interval", time.Second, "refresh the display every `DURATION`")
	fs.BoolVar(&f.json, "json", false, "print one JSON document (schema wallprof.latency/v1) at the end, and nothing live")
	fs.BoolVar(&f.plain, "plain", false, "print plain lines, even on a terminal")
	fs.DurationVar(&f.sampleGs, "sample-goroutines", 10*time.Millisecond, "read the goroutine table every `DURATION` to split the calls that stop (0: do not)")
	fs.DurationVar(&f.slow, "slow", 0, "with --profile: the calls that took at least `DURATION`")
	fs.StringVar(&f.profile, "profile", "", "write a pprof profile of where the --slow calls' goroutines were to `FILE`")
	if code, done := fs.parse(args); done {
		return nil, code, true
	}
	f.functions = fs.Args()
	switch {
	case f.pid <= 0:
		return nil, fs.usageError("give the process to measure with -p PID"), true
	case len(f.functions) == 0:
		return nil, fs.usageError("name at least one function to measure, e.g. main.handle"), true
	case len(f.functions) > latency.MaxFuncs:
		return nil, fs.usageError("at most %d functions at once", latency.MaxFuncs), true
	case f.duration < 0 || f.interval <= 0:
		return nil, fs.usageError("--duration and --interval must be positive"), true
	case f.sampleGs < 0 || f.sampleGs > 0 && f.sampleGs < time.Millisecond:
		return nil, fs.usageError("--sample-goroutines must be 0 (off) or at least 1ms"), true
	case (f.slow > 0) != (f.profile != ""):
		return nil, fs.usageError("--slow and --profile go together: --slow 50ms --profile slow.pb.gz"), true
	case f.slow < 0:
		return nil, fs.usageError("--slow must be positive"), true
	case f.profile != "" && f.sampleGs == 0:
		return nil, fs.usageError("--profile needs the goroutine table read: --sample-goroutines must not be 0"), true
	}
	return f, exitOK, false
}

func runLatency(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, done := parseLatencyFlags(args, stdout, stderr)
	if done {
		return code
	}
	fail := func(format string, a ...any) int {
		msg := strings.TrimSuffix(fmt.Sprintf(format, a...), ".")
		fmt.Fprintf(stderr, "wallprof latency: %s.\n", msg)
		return exitError
	}
	if !linux.ProcessExists(f.pid) {
		return fail("no process with PID %d is running", f.pid)
	}
	exe := "/proc/" + strconv.Itoa(f.pid) + "/exe"
	path, _ := os.Readlink(exe)
	bin, err := latency.Resolve(exe, f.pid, f.functions)
	if err != nil {
		if errors.Is(err, latency.ErrRefused) {
			_, msg, _ := strings.Cut(err.Error(), ": ")
			if path != "" {
				msg = strings.ReplaceAll(msg, exe, path)
			}
			return fail("%s", msg)
		}
		return fail("%v", err)
	}
	if msg := preflight(); msg != "" {
		return fail("%s", msg)
	}
	goFuncs := false
	for _, fn := range bin.Funcs {
		goFuncs = goFuncs || fn.Lib == ""
	}
	sample := f.sampleGs > 0 && bin.GoVersion != "" && goFuncs
	if f.profile != "" && !sample {
		return fail("--profile is for Go functions of a Go program")
	}
	var procSyms *symbolize.Process
	if f.profile != "" {
		// The program's mappings while it lives, to name the stacks at
		// the end.
		cache := symbolize.NewCache()
		defer cache.Close()
		if procSyms, err = cache.NewProcess(f.pid); err != nil {
			return fail("read the mappings of process %d: %v", f.pid, err)
		}
	}
	opts := latency.Options{Waits: sample, Slow: f.slow}
	if f.profile != "" {
		opts.CPUPeriod = max(f.sampleGs/4, time.Millisecond)
	}
	sess, err := latency.StartWith(bin, exe, f.pid, opts)
	if err != nil {
		return fail("%v", err)
	}
	defer sess.Stop()
	var waits *latency.WaitSampler
	if sample {
		if waits, err = sess.StartWaits(f.pid, f.sampleGs, f.profile != ""); err != nil {
			if f.profile != "" {
				return fail("the goroutine table cannot be read (%v): no profile of the slow calls", err)
			}
			fmt.Fprintf(stderr, "wallprof latency: note: the goroutine table cannot be read (%v): the calls that stop are split on their thread only.\n", err)
		} else {
			defer waits.Stop()
		}
	}
	fmt.Fprintf(stderr, "wallprof latency: %d probes on %d functions of process %d; Ctrl-C to stop.\n",
		sess.Probes(), len(bin.Funcs), f.pid)
	start := time.Now()
	exited := waitLatency(ctx, f, sess, bin, start, stdout)
	if waits != nil {
		waits.Stop()
	}
	snaps, err := sess.Snapshot()
	if err != nil {
		return fail("%v", err)
	}
	rep := latency.Report{PID: f.pid, Program: path, GoVersion: bin.GoVersion, DurationNs: int64(time.Since(start)),
		TargetExited: exited, Recursion: "outermost"}
	for i, s := range snaps {
		fr := latency.FuncReportOf(bin.Funcs[i], s)
		if waits != nil && bin.Funcs[i].Lib == "" {
			fr.Waits = waits.Report(i)
		}
		if s.Counters.LostStopped > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d calls that stopped were not split by goroutine state: wallprof did not read them in time", fr.Name, s.Counters.LostStopped))
		}
		rep.Functions = append(rep.Functions, fr)
		rep.Cost.ProbeHits += s.Counters.Hits
	}
	if waits != nil {
		taken, failed, cost := waits.Samples()
		rep.Cost.GoroutineSamples, rep.Cost.GoroutineSampleNs = taken, int64(cost)
		if failed > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d of %d reads of the goroutine table failed", failed, taken+failed))
		}
	}
	rep.Cost.Probes = sess.Probes()
	rep.Cost.PerHitNs = int64(latency.ProbeHitCost)
	rep.Cost.EstimatedNs = int64(rep.Cost.ProbeHits) * rep.Cost.PerHitNs
	rep.Cost.OpenCallsAtEnd = sess.Open()
	for _, r := range rep.Functions {
		if r.Count == 0 && r.Unmatched == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: no call began after the probes were attached and returned before they were removed; calls already running when they were attached (a keep-alive connection's serve loop, a worker's main loop) are not timed", r.Name))
		}
		if sp := r.Split; sp != nil && sp.Moved > 0 {
			sampled := ""
			if r.Waits != nil && r.Waits.Samples > 0 {
				sampled = "; their goroutine's sampled states are given below the histogram"
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d of %d calls returned on another thread than they entered on (the goroutine parked or was moved) and are not split into running, runnable and blocked on their thread%s", r.Name, sp.Moved, r.Count, sampled))
		}
		if sp := r.Split; sp != nil && sp.Parked > 0 {
			if sp.SeqKnown {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d of the %d calls split stopped running on the way (parked or preempted) and came back on the same thread: unless the goroutine is locked to it, the thread may have run other goroutines meanwhile, whose time is counted as the call's", r.Name, sp.Parked, sp.Calls))
			} else {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: for this Go version wallprof cannot tell whether a call's goroutine stopped running on the way: the split may include other goroutines that its thread ran meanwhile", r.Name))
			}
		}
		if r.Unmatched > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d returns had no entry: calls already running when the probes were attached, or entries lost when more than %d calls were open at once", r.Name, r.Unmatched, latency.MaxOpenCalls))
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(stderr, "wallprof latency: note: %s.\n", n)
	}
	if run, runs, ok := sess.ProgramStats(); ok {
		rep.Cost.BPFRunNs, rep.Cost.BPFRuns = int64(run), runs
	}
	if f.json {
		if err := latency.WriteJSON(stdout, &rep); err != nil {
			return fail("%v", err)
		}
	} else {
		if isTerminal(stdout) && !f.plain {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		for _, r := range rep.Functions {
			latency.WriteText(stdout, r)
		}
	}
	if exited {
		fmt.Fprintf(stderr, "wallprof latency: process %d exited.\n", f.pid)
	}
	if waits != nil && f.profile != "" {
		p, calls, reads := slowProfile(waits, bin, procSyms, path, start)
		if err := outfile.Write(f.profile, func(w io.Writer) error { return present.WritePprof(w, p) }); err != nil {
			return fail("cannot write the profile to %s: %v", f.profile, err)
		}
		fmt.Fprintf(stderr, "wallprof latency: wrote %s: %d calls of at least %v, their goroutines seen in %.0f reads of the goroutine table.\n",
			f.profile, calls, f.slow, reads)
		if _, used := waits.CPUSamples(); opts.CPUPeriod > 0 {
			fmt.Fprintf(stderr, "wallprof latency: their running time: %d on-CPU samples, one every %v of CPU time; the rest of it, when their threads were off a CPU, is \"%s\".\n",
				used, opts.CPUPeriod, runningOffCPU)
		}
		if n := sess.LostCPUSamples(); n > 0 {
			fmt.Fprintf(stderr, "wallprof latency: note: %d on-CPU samples were lost (the ring buffer was full).\n", n)
		}
	}
	fmt.Fprintf(stderr, "wallprof latency: cost: %d probe hits, ~%v each to the calling thread (uprobe trap and BPF program, see BENCHMARKS.md): ~%v of the target's time in %v.\n",
		rep.Cost.ProbeHits, latency.ProbeHitCost, time.Duration(rep.Cost.EstimatedNs).Round(time.Microsecond), time.Duration(rep.DurationNs).Round(time.Millisecond))
	return exitOK
}

// waitLatency shows the histograms every interval until ctx ends, the
// duration passes or the process exits (then it returns true).
func waitLatency(ctx context.Context, f *latencyFlags, sess *latency.Session, bin *latency.Binary, start time.Time, stdout io.Writer) bool {
	tick := time.NewTicker(min(f.interval, 200*time.Millisecond))
	defer tick.Stop()
	var deadline <-chan time.Time
	if f.duration > 0 {
		t := time.NewTimer(f.duration)
		defer t.Stop()
		deadline = t.C
	}
	live := !f.json
	tty := isTerminal(stdout) && !f.plain
	lastShow := start
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-tick.C:
		}
		if !processRunning(f.pid) {
			return true
		}
		if !live || time.Since(lastShow) < f.interval {
			continue
		}
		lastShow = time.Now()
		snaps, err := sess.Snapshot()
		if err != nil {
			continue
		}
		if tty {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		for i, s := range snaps {
			r := latency.FuncReportOf(bin.Funcs[i], s)
			if tty {
				latency.WriteText(stdout, r)
			} else {
				latency.WriteLine(stdout, time.Since(start), r)
			}
		}
	}
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// stackHasFunc reports whether a frame of stack is function fn.
func stackHasFunc(stack []*profile.Location, fn string) bool {
	for _, l := range stack {
		for _, f := range l.Frames {
			if f.Function == fn {
				return true
			}
		}
	}
	return false
}

// runningOffCPU names the time a slow call's goroutine was running in
// Go's terms while its thread was not on a CPU.
const runningOffCPU = "[running, thread waiting for a CPU]"

// slowProfile builds the profile of the slow calls from the sampler's
// reads: one sample per function, state and stack, weighing the reads'
// interval each. Running goroutines have no stack in the table: their
// reads take the stacks sampled on a CPU during the call, or are
// "[running]" under the function when none was.
func slowProfile(w *latency.WaitSampler, bin *latency.Binary, syms *symbolize.Process, program string, start time.Time) (p *profile.Profile, calls uint64, reads float64) {
	samples, perFunc, interval := w.Slow()
	p = &profile.Profile{Start: start, Duration: time.Since(start), Period: int64(interval), Command: program, Program: program}
	maps := map[*profile.Mapping]*profile.Mapping{}
	locs := map[uint64]*profile.Location{}
	mapping := func(m *profile.Mapping) *profile.Mapping {
		if m == nil {
			return nil
		}
		if c, ok := maps[m]; ok {
			return c
		}
		c := *m
		c.ID = uint64(len(p.Mappings) + 1)
		p.Mappings = append(p.Mappings, &c)
		maps[m] = &c
		return &c
	}
	loc := func(addr uint64) *profile.Location {
		if l, ok := locs[addr]; ok {
			return l
		}
		m, frames := syms.Resolve(addr)
		l := &profile.Location{ID: uint64(len(p.Locs) + 1), Mapping: mapping(m), Address: addr, Frames: frames}
		p.Locs = append(p.Locs, l)
		locs[addr] = l
		return l
	}
	named := map[string]*profile.Location{}
	pseudo := func(name string) *profile.Location {
		if l, ok := named[name]; ok {
			return l
		}
		l := &profile.Location{ID: uint64(len(p.Locs) + 1), Frames: []profile.Frame{{Function: name}}}
		p.Locs = append(p.Locs, l)
		named[name] = l
		return l
	}
	for _, n := range perFunc {
		calls += n
	}
	for _, s := range samples {
		reads += s.Reads
		fn := bin.Funcs[s.Func].Name
		ps := &profile.Sample{PID: syms.PID(), Value: int64(s.Reads * float64(interval)),
			Labels: map[string]string{"function": fn, "goroutine_state": s.State}}
		switch s.State {
		case latency.StateRunning:
			ps.State = profile.OnCPU
			switch {
			case s.OffCPU:
				ps.State = profile.Runnable
				ps.Stack = []*profile.Location{pseudo(runningOffCPU), pseudo(fn)}
			case len(s.Stack) == 0:
				ps.Stack = []*profile.Location{pseudo("[running]"), pseudo(fn)}
			}
		case latency.StateRunnable:
			ps.State = profile.Runnable
		case latency.StateSyscall:
			ps.State = profile.Other
		default:
			ps.State = profile.Sleeping
			ps.Labels["wait_reason"] = s.State
		}
		for _, pc := range s.Stack {
			if pc > 0 {
				pc-- // a return address: look up the call
			}
			ps.Stack = append(ps.Stack, loc(pc))
		}
		if len(ps.Stack) == 0 {
			ps.Stack = []*profile.Location{pseudo("[stack not read]"), pseudo(fn)}
		} else if s.State == latency.StateRunning && !s.OffCPU && !stackHasFunc(ps.Stack, fn) {
			// Sampled inside a call of fn, but the frame-pointer walk lost
			// its frame (Go's vDSO calls run on the system stack): the
			// time is fn's, the stack below it not known.
			ps.Stack = []*profile.Location{pseudo("[running, stack not unwound]"), pseudo(fn)}
		}
		p.Samples = append(p.Samples, ps)
	}
	return p, calls, reads
}
