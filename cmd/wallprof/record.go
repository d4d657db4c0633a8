package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

const recordUsage = `Usage:
  wallprof record [flags] -p PID
  wallprof record [flags] -- COMMAND [ARGS...]

Records a wall-clock profile: every thread's time split into on-CPU,
runnable (waiting for a CPU) and blocked (sleeping, disk), each with its
user and kernel stack. Every thread's time is measured exactly from the
scheduler's own clock and counters. On-CPU stacks are taken where the CPU
is, -F times a second, as perf does, and each thread's exact CPU time is
spread over them; off-CPU stacks once per quarter period (at least 1 ms) of
a thread's time off CPU, in the call it waited in.
Recording stops after --duration, on Ctrl-C or SIGTERM, or when the target
exits; the profile is written in every case.

With -- COMMAND, the command is started under the recorder and the
processes it forks are recorded too; when the recording stops first the
command is sent SIGTERM.

Needs root, or CAP_BPF and CAP_PERFMON, and a kernel (5.18+) with BTF.

Flags:
`

func init() {
	commands["record"] = command{order: 10, run: runRecord, usage: `  wallprof record [flags] -p PID            record a running process
  wallprof record [flags] -- COMMAND [ARGS] launch a command and record it (and its children)
`}
}

type recordFlags struct {
	pid      int
	freq     int
	output   string
	duration time.Duration
	format   string
	quiet    bool
	stats    string
	gview    string
}

func parseRecordFlags(args []string, stdout, stderr io.Writer) (*recordFlags, []string, int) {
	f := &recordFlags{}
	fs := newCmdFlags("record", recordUsage, stdout, stderr)
	fs.IntVar(&f.pid, "p", 0, "record the running process `PID`")
	fs.IntVar(&f.pid, "pid", 0, "same as -p")
	fs.IntVar(&f.freq, "F", collect.DefaultFreq, "sampling frequency in `Hz` of on-CPU stacks (1 to 20000); an off-CPU stack stands for a quarter period of a thread's time off CPU, at least 1ms")
	fs.IntVar(&f.freq, "freq", collect.DefaultFreq, "same as -F")
	fs.StringVar(&f.output, "o", "wallprof.pb.gz", "write the profile to `FILE`")
	fs.StringVar(&f.output, "output", "wallprof.pb.gz", "same as -o")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long, e.g. 30s (default: until Ctrl-C or the target exits)")
	fs.StringVar(&f.format, "format", "pprof", "output format: pprof (gzipped protobuf) or collapsed (folded stacks, nanoseconds)")
	fs.BoolVar(&f.quiet, "q", false, "print nothing but errors")
	fs.StringVar(&f.gview, "goroutines", "auto", "the goroutine view of a Go program (its goroutines' time running, runnable and waiting, with wait reasons): auto (when the target is a Go program) or off")
	fs.StringVar(&f.stats, "bpf-stats", "sampled", "how to measure wallprof's own BPF run time: sampled (the kernel's BPF statistics on 10% of the time, total extrapolated; measured throughout when kernel.bpf_stats_enabled is already 1), full (on all the time: exact, but they cost two clock reads per probe run, about as much as the probes), off")
	if code, done := fs.parseToArgs(args); done {
		return nil, nil, code
	}
	cmd := fs.Args()
	usageError := func(format string, a ...any) (*recordFlags, []string, int) {
		return nil, nil, fs.usageError(format, a...)
	}
	switch {
	case f.pid != 0 && len(cmd) > 0:
		return usageError("give either -p PID or -- COMMAND, not both.")
	case f.pid == 0 && len(cmd) == 0:
		return usageError("say what to record: -p PID for a running process, or -- COMMAND to launch one.")
	case f.pid < 0:
		return usageError("-p %d is not a process ID.", f.pid)
	case f.freq < 1 || f.freq > collect.MaxFreq:
		return usageError("-F %d is out of range: use 1 to %d Hz.", f.freq, collect.MaxFreq)
	case f.duration < 0:
		return usageError("--duration must be positive.")
	case f.stats != "sampled" && f.stats != "full" && f.stats != "off":
		return usageError("unknown --bpf-stats %q: use sampled, full or off.", f.stats)
	case f.gview != "auto" && f.gview != "off":
		return usageError("unknown --goroutines %q: use auto or off.", f.gview)
	case f.format != "pprof" && f.format != "collapsed":
		return usageError("unknown --format %q: use pprof or collapsed.", f.format)
	}
	return f, cmd, -1
}

// preflight returns a one-sentence explanation of why recording cannot work
// here, or "".
func preflight() string {
	if err := linux.CheckPrivileges(); err != nil {
		if errors.Is(err, linux.ErrNoPrivileges) {
			return "recording needs root, or the CAP_BPF and CAP_PERFMON capabilities: run it with sudo."
		}
		return err.Error()
	}
	if err := linux.CheckKernel(); err != nil {
		return fmt.Sprintf("%v; upgrade the kernel to record.", err)
	}
	if err := linux.CheckBTF(); err != nil {
		return "this kernel does not expose its BTF type information (/sys/kernel/btf/vmlinux is missing): use a kernel built with CONFIG_DEBUG_INFO_BTF=y."
	}
	return ""
}

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, cmdArgs, code := parseRecordFlags(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "wallprof record: "+format+"\n", a...)
		return exitError
	}
	if path := os.Getenv("WALLPROF_CPUPROFILE"); path != "" {
		// For developers: profile wallprof itself.
		if pf, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(pf)
			defer func() { pprof.StopCPUProfile(); pf.Close() }()
		}
	}
	if msg := preflight(); msg != "" {
		return fail("%s", msg)
	}
	var cmdPath string
	if len(cmdArgs) > 0 {
		p, err := exec.LookPath(cmdArgs[0])
		if err != nil {
			return fail("command not found: %s.", cmdArgs[0])
		}
		cmdPath = p
	} else if !linux.ProcessExists(f.pid) {
		return fail("no process with PID %d is running.", f.pid)
	}
	// The output file is created before recording, beside its final name,
	// and renamed when complete: a path that cannot be written fails now,
	// and a failed run leaves no half-written profile.
	out, err := outfile.Create(f.output)
	if err != nil {
		return fail("cannot write the profile to %s: %v.", f.output, errors.Unwrap(err))
	}
	defer out.Abandon()

	c := &recorder{flags: f, stderr: stderr, status: isTerminal(stderr) && !f.quiet}
	if cmdPath != "" {
		code = c.launch(ctx, cmdPath, cmdArgs)
	} else {
		code = c.attach(ctx, f.pid)
	}
	if code != exitOK {
		return code
	}
	return c.finish(out)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// recorder is one 'wallprof record' run: its flags, what it tells the
// user, and the recording (internal/record does the recording itself).
type recorder struct {
	flags  *recordFlags
	stderr io.Writer
	status bool
	rec    *record.Recording
}

// options are the recording's options as the flags give them.
func (c *recorder) options() record.Options {
	return record.Options{Freq: c.flags.freq, Duration: c.flags.duration, Stats: statsMode(c.flags.stats),
		Goroutines: c.flags.gview != "off", Plan: setPlanFromEnv}
}

// setPlanFromEnv applies the environment's knobs for comparing the ways
// of recording (benchmarks, the switch-time tests of make test):
// WALLPROF_RESUME=0 accounts at sched_switch, =1 never falls back from the
// accounting at each thread's resumption; WALLPROF_RUN_DELAY=0 probes
// sched_wakeup; WALLPROF_EXIT_TP=0 leaves sched_exit_tp alone.
func setPlanFromEnv(p *collect.Plan) {
	switch os.Getenv("WALLPROF_RESUME") {
	case "0":
		p.Accounting = collect.AccountSwitch
	case "1":
		p.Accounting = collect.AccountResume
	}
	p.NoRunDelay = os.Getenv("WALLPROF_RUN_DELAY") == "0"
	p.NoExitTP = os.Getenv("WALLPROF_EXIT_TP") == "0"
}

// startError explains why recording could not start.
func startError(err error) string {
	if collect.IsPermission(err) {
		return fmt.Sprintf("the kernel refused to load or attach the BPF program (%v): run as root, or check that kernel.unprivileged_bpf_disabled and lockdown allow BPF tracing.", err)
	}
	return fmt.Sprintf("cannot start recording: %v.", err)
}

func (c *recorder) openError(err error) int {
	fmt.Fprintf(c.stderr, "wallprof record: %s\n", startError(err))
	return exitError
}

// attach records an already running process.
func (c *recorder) attach(ctx context.Context, pid int) int {
	rec, err := record.Start(pid, c.options())
	if errors.Is(err, record.ErrExited) {
		fmt.Fprintf(c.stderr, "wallprof record: process %d exited before recording started.\n", pid)
		return exitError
	} else if err != nil {
		return c.openError(err)
	}
	c.rec = rec
	exited := make(chan struct{})
	done := make(chan struct{})
	go func() {
		_ = linux.WaitExit(pid, done)
		close(exited)
	}()
	c.started(fmt.Sprintf("process %d (%s)", pid, rec.Command()))
	why := c.wait(ctx, exited)
	close(done)
	if why == stopExited {
		rec.Note("target process %d exited during the recording", pid)
	}
	return c.stop()
}

// launch starts a command under the recorder. The command is held at a gate
// (a shell waiting on a pipe) until the recorder is attached to its PID, then
// exec'ed in place, so not one instruction of it runs unrecorded.
func (c *recorder) launch(ctx context.Context, path string, args []string) int {
	gateR, gateW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(c.stderr, "wallprof record: %v.\n", err)
		return exitError
	}
	script := `read -r _ <&3; exec 3<&-; exec "$0" "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, path}, args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{gateR}
	if err := cmd.Start(); err != nil {
		gateR.Close()
		gateW.Close()
		fmt.Fprintf(c.stderr, "wallprof record: cannot start %s: %v.\n", path, err)
		return exitError
	}
	gateR.Close()
	pid := cmd.Process.Pid
	abort := func(code int) int {
		_ = cmd.Process.Kill()
		gateW.Close()
		_ = cmd.Wait()
		return code
	}
	o := c.options()
	o.FollowForks, o.Gated = true, true
	o.Command = strings.Join(args, " ")
	o.Program, _ = linux.ProgramAt(path) // the gate's "$0"
	rec, err := record.Start(pid, o)
	if err != nil {
		return abort(c.openError(err))
	}
	c.rec = rec
	c.started(fmt.Sprintf("%q (pid %d) and its children", rec.Command(), pid))
	gateW.Write([]byte("\n"))
	gateW.Close()

	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	why := c.wait(ctx, exited)
	if why != stopExited {
		// Stop recording first so the profile is complete, then end the command.
		code := c.stop()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		return code
	}
	if waitErr != nil {
		rec.Note("command %s: %v", filepath.Base(path), waitErr)
	}
	return c.stop()
}

func statsMode(s string) collect.StatsMode {
	m, _ := collect.ParseStatsMode(s) // validated with the flags
	return m
}

// started tells the user that recording has begun.
func (c *recorder) started(what string) {
	if c.flags.quiet {
		return
	}
	until := "Ctrl-C to stop"
	if c.flags.duration > 0 {
		until = fmt.Sprintf("for %s or until Ctrl-C", c.flags.duration)
	}
	fmt.Fprintf(c.stderr, "wallprof: recording %s at %d Hz, %s\n", what, c.flags.freq, until)
}

type stopReason int

const (
	stopSignal stopReason = iota
	stopDuration
	stopExited
)

// wait blocks until the recording should stop, showing a status line on a
// terminal.
func (c *recorder) wait(ctx context.Context, exited <-chan struct{}) stopReason {
	var timeout <-chan time.Time
	if c.flags.duration > 0 {
		t := time.NewTimer(c.flags.duration)
		defer t.Stop()
		timeout = t.C
	}
	// The status line's ticker runs only when there is a status line: every
	// wake-up of this process costs a target that shares its CPU.
	var ticks <-chan time.Time
	if c.status {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		ticks = tick.C
	}
	start := time.Now()
	defer func() {
		if c.status {
			fmt.Fprint(c.stderr, "\r\033[K")
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return stopSignal
		case <-timeout:
			return stopDuration
		case <-exited:
			return stopExited
		case <-ticks:
			n, lost := c.rec.Counts()
			fmt.Fprintf(c.stderr, "\r\033[Kwallprof: recording %s · %d samples · %d lost · Ctrl-C to stop",
				time.Since(start).Round(time.Second), n, lost)
		}
	}
}

// stop ends the recording.
func (c *recorder) stop() int {
	if err := c.rec.Stop(); err != nil {
		fmt.Fprintf(c.stderr, "wallprof record: %v.\n", err)
		return exitError
	}
	return exitOK
}

func (c *recorder) finish(out *outfile.File) int {
	p, err := c.rec.Profile()
	if err != nil {
		fmt.Fprintf(c.stderr, "wallprof record: %v.\n", err)
		return exitError
	}
	if err := c.write(out, p); err != nil {
		fmt.Fprintf(c.stderr, "wallprof record: cannot write the profile to %s: %v.\n", c.flags.output, err)
		return exitError
	}
	if !c.flags.quiet {
		c.summary(p)
	}
	return exitOK
}

func (c *recorder) write(out *outfile.File, p *profile.Profile) error {
	var err error
	if c.flags.format == "collapsed" {
		err = present.WriteCollapsed(out, p, present.CollapsedOptions{})
	} else {
		err = present.WritePprof(out, p)
	}
	if err != nil {
		return err
	}
	return out.Commit()
}

func (c *recorder) summary(p *profile.Profile) {
	w := c.stderr
	for _, n := range c.rec.Notes() {
		fmt.Fprintf(w, "wallprof: %s\n", n)
	}
	nsamples := 0
	for _, t := range p.Threads {
		nsamples += t.Samples
	}
	fmt.Fprintf(w, "wallprof: recorded %s of %q: %d threads, %d stack samples, lost events: %s\n",
		p.Duration.Round(time.Millisecond), p.Command, len(p.Threads), nsamples, lostSummary(p.Lost))
	if n := c.rec.GoroutineNote(); n != "" {
		fmt.Fprintf(w, "wallprof: %s\n", n)
	}
	if g := p.GoInfo; g != nil {
		failed := ""
		if g.Failed > 0 {
			failed = fmt.Sprintf(", %d reads failed", g.Failed)
		}
		covers := ""
		if c, ok := g.Coverage(p.Duration); ok {
			covers = fmt.Sprintf(" covering %s of the recording (%.0f%%)", g.Covered.Round(time.Millisecond), 100*c)
		}
		fmt.Fprintf(w, "wallprof: goroutines (%s): up to %d, goroutine table read %d times every %s%s, %d inconsistent reads dropped%s; see 'wallprof report --goroutines'\n",
			g.Version, g.MaxGoroutines, g.Snapshots, g.Interval.Round(time.Microsecond), covers, g.Dropped, failed)
		if warn := present.GoCoverageWarning(p); warn != "" {
			fmt.Fprintf(w, "wallprof: warning: %s\n", warn)
		}
	}
	if c := p.Cost; c != nil && c.BPFStatsShare > 0 {
		est := ""
		if c.BPFStatsShare < 0.999 {
			est = fmt.Sprintf(", estimated from the %.0f%% of the time it was measured", 100*c.BPFStatsShare)
		}
		fmt.Fprintf(w, "wallprof: cost: profiler CPU %s while recording (%s of target CPU), BPF %s (%s) in %d program runs%s; %s of CPU to start\n",
			c.ProfilerCPU.Round(time.Microsecond), pct(c.ProfilerCPU, c.TargetCPU),
			c.BPFRunTime.Round(time.Microsecond), pct(c.BPFRunTime, c.TargetCPU), c.BPFRunCount, est,
			c.StartupCPU.Round(time.Millisecond))
	} else if c != nil {
		fmt.Fprintf(w, "wallprof: cost: profiler CPU %s while recording (%s of target CPU), BPF run time not measured; %s of CPU to start\n",
			c.ProfilerCPU.Round(time.Microsecond), pct(c.ProfilerCPU, c.TargetCPU), c.StartupCPU.Round(time.Millisecond))
	}
	size := int64(0)
	if fi, err := os.Stat(c.flags.output); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(w, "wallprof: wrote %s (%s, %d bytes) %s after the recording ended; peak memory %d MiB\n",
		c.flags.output, c.flags.format, size, time.Since(c.rec.Stopped()).Round(time.Millisecond), linux.MaxRSS()>>20)
}

func pct(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(a)/float64(b))
}

func lostSummary(lost map[string]uint64) string {
	if len(lost) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(lost) {
		parts = append(parts, fmt.Sprintf("%s %d", k, lost[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
