//go:build linux && amd64

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

const recordUsage = `Usage:
  wallprof record [flags] -p PID[,PID...]
  wallprof record [flags] -- COMMAND [ARGS...]
  wallprof record [flags] -p PID[,PID...] -- COMMAND [ARGS...]

Records a wall-clock profile: every thread's time split into on-CPU,
runnable (waiting for a CPU) and blocked (sleeping, disk), each with its
user and kernel stack. Every thread's time is measured exactly from the
scheduler's own clock and counters. On-CPU stacks are taken where the CPU
is, -F times a second, as perf does, and each thread's exact CPU time is
spread over them; off-CPU stacks once per quarter period (at least 1 ms) of
a thread's time off CPU, in the call it waited in. Stacks are always
recorded: -g is accepted, as perf's habit, and changes nothing. User stacks
are unwound in the kernel with each file's .eh_frame (code built without
frame pointers) and by frame pointer where a file has none (Go, JIT code);
WALLPROF_UNWIND=fp walks frame pointers only.
Recording stops after --duration, on Ctrl-C or SIGTERM, or when the target
exits; the profile is written in every case.

With -- COMMAND, the command is started under the recorder and the
processes it forks are recorded too; when the recording stops first the
command is sent SIGTERM. With -p PID -- COMMAND (as perf record does), the
processes PID are recorded while the command runs: the command is only the
timer, and is not recorded.

Exit status: with a COMMAND, the command's own when it ends before the
recording stops (128+N when signal N killed it), as for a shell; 0 when
--duration, a signal or the targets' exit stopped the recording first.
1 when recording failed, 2 for a usage error. When wallprof writes to
stdout (-o - or --json -), the command's stdout goes to stderr.

Flags take their values attached too, as perf's do: -F99, -p1234, -ofile.
A profile name ending in .folded, .collapsed or .txt means --format
collapsed; without -o the profile is wallprof.pb.gz (wallprof.folded with
--format collapsed).

Needs root, or CAP_BPF and CAP_PERFMON, and a kernel (5.18+) with BTF.

Flags:
`

func init() {
	commands["record"] = command{order: 10, run: runRecord, usage: `  wallprof record [flags] -p PID            record a running process
  wallprof record [flags] -- COMMAND [ARGS] launch a command and record it (and its children)
`}
}

type recordFlags struct {
	pids     pidList
	freq     int
	output   string
	duration time.Duration
	format   string
	quiet    bool
	stats    string
	gview    string
	json     string
	stacks   bool // -g: stacks are always on
	verbose  bool
}

// pidList is -p's value: one process ID, or several separated by commas
// (-p 1,2,3); repeated, the lists add up.
type pidList []int

func (l *pidList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func (l *pidList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return errors.New("not a process ID nor a list of them (1234 or 1,2,3)")
		}
		*l = append(*l, p)
	}
	return nil
}

// secondsValue is a duration given as a Go duration (30s, 1m30s) or as a
// bare number of seconds, as perf's and py-spy's users type it (30, 2.5).
type secondsValue struct{ d *time.Duration }

func (v secondsValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v secondsValue) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		*v.d = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("give seconds (30) or a duration (30s, 2m)")
	}
	*v.d = d
	return nil
}

func parseRecordFlags(args []string, stdout, stderr io.Writer) (*recordFlags, []string, int) {
	f := &recordFlags{}
	fs := newCmdFlags("record", recordUsage, stdout, stderr)
	fs.Var(&f.pids, "p", "record the running process `PID`, or several: 1,2,3")
	fs.Var(&f.pids, "pid", "same as -p `PID`")
	fs.IntVar(&f.freq, "F", collect.DefaultFreq, "sampling frequency in `Hz` of on-CPU stacks (1 to 20000); an off-CPU stack stands for a quarter period of a thread's time off CPU, at least 1ms")
	fs.IntVar(&f.freq, "freq", collect.DefaultFreq, "same as -F")
	fs.StringVar(&f.output, "o", "", "write the profile to `FILE`, '-' for stdout (default wallprof.pb.gz, or wallprof.folded with --format collapsed)")
	fs.StringVar(&f.output, "output", "", "same as -o")
	fs.Var(secondsValue{&f.duration}, "duration", "stop after `TIME`: seconds (30) or a duration (30s, 2m) (default: until Ctrl-C or the target exits)")
	fs.StringVar(&f.format, "format", "", "output format: pprof (gzipped protobuf) or collapsed (folded stacks, nanoseconds) (default: from the -o name, else pprof)")
	fs.BoolVar(&f.quiet, "q", false, "print nothing but errors")
	fs.BoolVar(&f.verbose, "v", false, "also print the notes on how the kernel behaved (they are in the profile either way)")
	fs.BoolVar(&f.stacks, "g", false, "accepted for perf's habit: stacks are always recorded")
	fs.StringVar(&f.json, "json", "", "also write the summary as JSON (schema "+recordFormat+") to `FILE`, '-' for stdout: for CI and scripts")
	fs.StringVar(&f.gview, "goroutines", "auto", "the goroutine view of a Go program (its goroutines' time running, runnable and waiting, with wait reasons): auto (when the target is a Go program) or off")
	fs.StringVar(&f.stats, "bpf-stats", "sampled", "how to measure wallprof's own BPF run time: sampled (the kernel's BPF statistics on 10% of the time, total extrapolated; measured throughout when kernel.bpf_stats_enabled is already 1), full (on all the time: exact, but they cost two clock reads per probe run, about as much as the probes), off")
	if code, done := fs.parseToArgs(args); done {
		return nil, nil, code
	}
	cmd := fs.Args()
	usageError := func(format string, a ...any) (*recordFlags, []string, int) {
		return nil, nil, fs.usageError(format, a...)
	}
	if len(f.pids) == 0 && len(cmd) == 0 {
		return usageError("say what to record: -p PID for a running process, or -- COMMAND to launch one.")
	}
	for _, p := range f.pids {
		if p <= 0 {
			return usageError("-p %d is not a process ID.", p)
		}
	}
	switch {
	case f.freq < 1 || f.freq > collect.MaxFreq:
		return usageError("-F %d is out of range: use 1 to %d Hz.", f.freq, collect.MaxFreq)
	case f.duration < 0:
		return usageError("--duration must be positive.")
	case f.stats != "sampled" && f.stats != "full" && f.stats != "off":
		return usageError("unknown --bpf-stats %q: use sampled, full or off.", f.stats)
	case f.gview != "auto" && f.gview != "off":
		return usageError("unknown --goroutines %q: use auto or off.", f.gview)
	case f.format != "" && f.format != "pprof" && f.format != "collapsed":
		return usageError("unknown --format %q: use pprof or collapsed.", f.format)
	case f.output == "-" && f.json == "-":
		return usageError("-o - and --json - would both write to stdout: send one of them to a file.")
	case f.output == "" && fs.isSet("o"), f.output == "" && fs.isSet("output"):
		return usageError("-o needs a file name, or '-' for stdout.")
	}
	// The format follows the profile's name, as convert's does, unless
	// --format says; a name and a --format that disagree are a mistake.
	byName := outputFormat(f.output)
	if byName != "pprof" && byName != "collapsed" {
		byName = ""
	}
	switch {
	case f.format != "" && byName != "" && byName != f.format:
		return usageError("-o %s names a %s file but --format is %s: change one of them.", f.output, byName, f.format)
	case f.format == "" && byName != "":
		f.format = byName
	case f.format == "":
		f.format = "pprof"
	}
	if f.output == "" {
		f.output = "wallprof.pb.gz"
		if f.format == "collapsed" {
			f.output = "wallprof.folded"
		}
	}
	if f.output == "-" && f.format == "pprof" && isTerminal(stdout) {
		return usageError("-o - would write a binary profile to the terminal: redirect stdout, or use --format collapsed.")
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
	if err := linux.CheckBTF(); err != nil {
		return "this kernel does not expose its BTF type information (/sys/kernel/btf/vmlinux is missing): use a kernel built with CONFIG_DEBUG_INFO_BTF=y."
	}
	// What the recorder needs, probed and named; then the kernel's
	// version for what cannot be probed (sleepable task iterators calling
	// bpf_copy_from_user_task, 5.18).
	if err := collect.CheckFeatures(); err != nil {
		return fmt.Sprintf("%v; upgrade the kernel to record.", err)
	}
	if err := linux.CheckKernel(); err != nil {
		return fmt.Sprintf("%v (for sleepable task iterators and bpf_copy_from_user_task); upgrade the kernel to record.", err)
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
	}
	for _, pid := range f.pids {
		if !linux.ProcessExists(pid) {
			return fail("no process with PID %d is running.", pid)
		}
	}
	// The output files are created before recording, beside their final
	// names, and renamed when complete: a path that cannot be written
	// fails now, and a failed run leaves no half-written profile.
	out, err := createOutput(f.output, stdout)
	if err != nil {
		return fail("cannot write the profile to %s: %v.", f.output, errors.Unwrap(err))
	}
	defer out.Abandon()
	var summary profileOut
	if f.json != "" {
		if summary, err = createOutput(f.json, stdout); err != nil {
			return fail("cannot write the summary to %s: %v.", f.json, errors.Unwrap(err))
		}
		defer summary.Abandon()
	}

	c := &recorder{flags: f, stderr: stderr, status: isTerminal(stderr) && !f.quiet, cmdExit: -1}
	switch {
	case cmdPath != "" && len(f.pids) > 0:
		code = c.attachWhile(ctx, cmdPath, cmdArgs)
	case cmdPath != "":
		code = c.launch(ctx, cmdPath, cmdArgs)
	default:
		code = c.attach(ctx)
	}
	if code != exitOK {
		return code
	}
	if code := c.finish(out, summary); code != exitOK {
		return code
	}
	if c.cmdExit >= 0 {
		return c.cmdExit
	}
	return exitOK
}

// recorder is one 'wallprof record' run: its flags, what it tells the
// user, and the recording (internal/record does the recording itself).
type recorder struct {
	flags  *recordFlags
	stderr io.Writer
	status bool
	rec    *record.Recording
	// why is what stopped the recording; cmdExit the exit status of a
	// command that ended before the recording stopped, or -1.
	why     stopReason
	cmdExit int
	written int64 // bytes of profile written
}

// cmdStdout is where a command's stdout goes: wallprof's own, unless
// wallprof writes its output there.
func (c *recorder) cmdStdout() *os.File {
	if c.flags.output == "-" || c.flags.json == "-" {
		return os.Stderr
	}
	return os.Stdout
}

// exitStatus is a finished command's status as a shell gives it: its exit
// code, or 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
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
// sched_wakeup; WALLPROF_EXIT_TP=0 leaves sched_exit_tp alone;
// WALLPROF_ACCOUNTING=walk, resume or switch picks the accounting (the
// default: collect.AccountAuto); WALLPROF_TIMER_STAGGER=0 starts the CPUs'
// sampling timers at one instant; WALLPROF_WALK_EVERY (a duration) sets the
// mean interval between two walks; WALLPROF_WALK_TIMER=1 runs the walks' first
// pass from a BPF timer rather than from wallprof's thread (doc/walk-timer.md).
func setPlanFromEnv(p *collect.Plan) {
	switch os.Getenv("WALLPROF_RESUME") {
	case "0":
		p.Accounting = collect.AccountSwitch
	case "1":
		p.Accounting = collect.AccountResume
	}
	switch os.Getenv("WALLPROF_ACCOUNTING") {
	case "walk":
		p.Accounting = collect.AccountWalk
	case "resume":
		p.Accounting = collect.AccountResume
	case "switch":
		p.Accounting = collect.AccountSwitch
	}
	p.NoRunDelay = os.Getenv("WALLPROF_RUN_DELAY") == "0"
	p.NoExitTP = os.Getenv("WALLPROF_EXIT_TP") == "0"
	p.NoStagger = os.Getenv("WALLPROF_TIMER_STAGGER") == "0"
	p.WalkTimer = os.Getenv("WALLPROF_WALK_TIMER") == "1"
	if d, err := time.ParseDuration(os.Getenv("WALLPROF_WALK_EVERY")); err == nil && d > 0 {
		p.WalkEvery = d
	}
	p.FramePointersOnly = os.Getenv("WALLPROF_UNWIND") == "fp"
	if n, err := strconv.Atoi(os.Getenv("WALLPROF_UNWIND_ROWS")); err == nil && n > 0 {
		p.UnwindRows = n
	}
	if n, err := strconv.Atoi(os.Getenv("WALLPROF_RING_BYTES")); err == nil && n > 0 {
		p.RingBytes = n // bench/: the ring's size against memory and losses
	}
	if n, err := strconv.Atoi(os.Getenv("WALLPROF_OFFCPU_RATE")); err == nil && n != 0 {
		p.OffCPURate = n // bench/ and tests: the switch and resume accountings' off-CPU stacks per CPU per second; negative: unbounded
	}
	if n, err := strconv.Atoi(os.Getenv("WALLPROF_BENCH_CUT")); err == nil && n >= 1 && n <= 6 {
		p.BenchCut = n // bench/: where a switch's BPF time goes
	}
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

// startPIDs starts recording the processes of -p.
func (c *recorder) startPIDs() int {
	pids := c.flags.pids
	rec, err := record.StartPIDs(pids, c.options())
	if errors.Is(err, record.ErrExited) {
		fmt.Fprintf(c.stderr, "wallprof record: %v.\n", err)
		return exitError
	} else if err != nil {
		return c.openError(err)
	}
	c.rec = rec
	return exitOK
}

// targets names the processes of -p for the user.
func (c *recorder) targets() string {
	if len(c.flags.pids) == 1 {
		return fmt.Sprintf("process %d (%s)", c.flags.pids[0], c.rec.Command())
	}
	return fmt.Sprintf("processes %s", c.rec.Command())
}

// exitWatch watches processes exit.
type exitWatch struct {
	all  chan struct{} // closed when every one has exited
	mu   sync.Mutex
	gone map[int]bool
}

// watchExit watches pids until they have all exited, or done is closed.
func watchExit(pids []int, done <-chan struct{}) *exitWatch {
	w := &exitWatch{all: make(chan struct{}), gone: map[int]bool{}}
	var wg sync.WaitGroup
	for _, pid := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = linux.WaitExit(pid, done)
			select {
			case <-done:
			default:
				w.mu.Lock()
				w.gone[pid] = true
				w.mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		close(w.all)
	}()
	return w
}

// noteExited notes the processes of -p that exited during the recording.
func (c *recorder) noteExited(w *exitWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pid := range c.flags.pids {
		if w.gone[pid] {
			c.rec.Note("target process %d exited during the recording", pid)
		}
	}
}

// attach records already running processes.
func (c *recorder) attach(ctx context.Context) int {
	if code := c.startPIDs(); code != exitOK {
		return code
	}
	done := make(chan struct{})
	exits := watchExit(c.flags.pids, done)
	c.started(c.targets())
	c.why = c.wait(ctx, exits.all, nil)
	close(done)
	c.noteExited(exits)
	return c.stop()
}

// attachWhile records the processes of -p while a command runs, as
// 'perf record -p PID -- sleep 10' does: the command is the timer, and is
// not recorded.
func (c *recorder) attachWhile(ctx context.Context, path string, args []string) int {
	if code := c.startPIDs(); code != exitOK {
		return code
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.cmdStdout(), os.Stderr
	if err := cmd.Start(); err != nil {
		c.rec.Close()
		fmt.Fprintf(c.stderr, "wallprof record: cannot start %s: %v.\n", path, err)
		return exitError
	}
	c.started(fmt.Sprintf("%s while %q runs", c.targets(), strings.Join(args, " ")))
	cmdDone := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(cmdDone)
	}()
	done := make(chan struct{})
	exits := watchExit(c.flags.pids, done)
	c.why = c.wait(ctx, exits.all, cmdDone)
	close(done)
	c.noteExited(exits)
	code := c.stop()
	if c.why == stopCommand {
		c.cmdExit = exitStatus(cmd.ProcessState)
		c.rec.Note("command %s: %v", filepath.Base(path), cmd.ProcessState)
	} else {
		endCommand(cmd, cmdDone)
	}
	return code
}

// endCommand sends a command SIGTERM, and SIGKILL 5 s later, and waits for
// it to end (done closes when it has).
func endCommand(cmd *exec.Cmd, done <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// launch starts a command under the recorder (launchGated) and records it
// until it exits, the duration passes or a signal comes.
func (c *recorder) launch(ctx context.Context, path string, args []string) int {
	o := c.options()
	o.Command = strings.Join(args, " ")
	g, err := launchGated(path, args, o, func(cmd *exec.Cmd) {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.cmdStdout(), os.Stderr
	})
	var se *recordStartError
	if errors.As(err, &se) {
		return c.openError(se.err)
	} else if err != nil {
		fmt.Fprintf(c.stderr, "wallprof record: %v.\n", err)
		return exitError
	}
	cmd, rec := g.cmd, g.rec
	c.rec = rec
	c.started(fmt.Sprintf("%q (pid %d) and its children", rec.Command(), cmd.Process.Pid))
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	g.open()
	c.why = c.wait(ctx, exited, nil)
	if c.why != stopExited {
		// Stop recording first so the profile is complete, then end the command.
		code := c.stop()
		endCommand(cmd, exited)
		return code
	}
	c.why = stopCommand
	c.cmdExit = exitStatus(cmd.ProcessState)
	if waitErr != nil {
		rec.Note("command %s: %v", filepath.Base(path), waitErr)
	}
	return c.stop()
}

// gatedLaunch is a command held at a gate (a shell waiting on a pipe) and
// the recording of it, started before the gate opens.
type gatedLaunch struct {
	cmd  *exec.Cmd
	rec  *record.Recording
	gate *os.File // the gate's write end
}

// recordStartError says that the command started but recording it did not.
type recordStartError struct{ err error }

func (e *recordStartError) Error() string { return startError(e.err) }
func (e *recordStartError) Unwrap() error { return e.err }

// launchGated starts the command path (args[0] its name) held at a gate,
// with setup's stdio, directory and environment, and starts recording its
// process with o (FollowForks and Gated set, the program path's). When g.open
// is called the shell exec's the command in place, so that not one
// instruction of it runs unrecorded. 'record -- COMMAND' and bench's
// off-CPU recordings both launch through here. A failure to start the
// recording is a *recordStartError, the command killed and reaped.
func launchGated(path string, args []string, o record.Options, setup func(*exec.Cmd)) (*gatedLaunch, error) {
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	script := `read -r _ <&3; exec 3<&-; exec "$0" "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, path}, args[1:]...)...)
	setup(cmd)
	cmd.ExtraFiles = []*os.File{gateR}
	if err := cmd.Start(); err != nil {
		gateR.Close()
		gateW.Close()
		return nil, fmt.Errorf("cannot start %s: %v", path, err)
	}
	gateR.Close()
	o.FollowForks, o.Gated = true, true
	o.Program, _ = linux.ProgramAt(path) // the gate's "$0"
	rec, err := record.Start(cmd.Process.Pid, o)
	if err != nil {
		_ = cmd.Process.Kill()
		gateW.Close()
		_ = cmd.Wait()
		return nil, &recordStartError{err}
	}
	return &gatedLaunch{cmd: cmd, rec: rec, gate: gateW}, nil
}

// open lets the command run.
func (g *gatedLaunch) open() {
	g.gate.Write([]byte("\n"))
	g.gate.Close()
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
	stopSignal   stopReason = iota
	stopDuration            // --duration
	stopExited              // the targets exited
	stopCommand             // the command of -p PID -- COMMAND, or the launched one, exited
)

func (r stopReason) String() string {
	return [...]string{"signal", "duration", "exited", "command"}[r]
}

// wait blocks until the recording should stop, showing a status line on a
// terminal.
func (c *recorder) wait(ctx context.Context, exited, cmdDone <-chan struct{}) stopReason {
	// Not during the start, whose unwind tables are built in a burst of
	// memory that a tight heap would slow down while samples wait for them.
	softMemoryLimitAfter(2 * time.Second)
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
		case <-cmdDone:
			return stopCommand
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

func (c *recorder) finish(out, summary profileOut) int {
	liftMemoryLimit() // building the profile needs its own memory at once
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
	if summary != nil {
		s := newRecordSummary(p, c.flags.pids, c.flags.output, c.flags.format, c.written, c.flags.freq, c.why.String())
		if c.cmdExit >= 0 {
			s.CommandExit = &c.cmdExit
		}
		if err := writeJSON(summary, s); err == nil {
			err = summary.Commit()
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "wallprof record: cannot write the summary to %s: %v.\n", c.flags.json, err)
			return exitError
		}
	}
	return exitOK
}

func (c *recorder) write(out profileOut, p *profile.Profile) error {
	w := &countWriter{w: out}
	var err error
	if c.flags.format == "collapsed" {
		err = present.WriteCollapsed(w, p, present.CollapsedOptions{})
	} else {
		err = present.WritePprof(w, p)
	}
	if err != nil {
		return err
	}
	c.written = w.n
	return out.Commit()
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *recorder) summary(p *profile.Profile) {
	w := c.stderr
	for _, n := range c.rec.Notes() {
		if c.flags.verbose || !kernelNote(n) {
			fmt.Fprintf(w, "wallprof: %s\n", n)
		}
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
			if g.Before > 0 {
				covers = fmt.Sprintf(" covering %s of the %s %s (%.0f%%)", g.Covered.Round(time.Millisecond),
					g.Span(p.Duration).Round(time.Millisecond), g.SpanText(), 100*c)
			}
		}
		fmt.Fprintf(w, "wallprof: goroutines (%s): up to %d, goroutine table read %d times every %s%s, %d inconsistent reads dropped%s; see 'wallprof report --goroutines'\n",
			g.Version, g.MaxGoroutines, g.Snapshots, g.Interval.Round(time.Microsecond), covers, g.Dropped, failed)
		if warn := present.GoCoverageWarning(p); warn != "" {
			fmt.Fprintf(w, "wallprof: warning: %s\n", warn)
		}
	}
	if c := p.Cost; c != nil {
		// A target that hardly ran (a kernel thread, an idle process)
		// makes a share of its CPU meaningless: say how little it ran.
		share := func(d time.Duration, of string) string {
			if c.TargetCPU < minShareCPU {
				return ""
			}
			return fmt.Sprintf(" (%s%s)", pct(d, c.TargetCPU), of)
		}
		bpf := "BPF run time not measured"
		if c.BPFStatsShare > 0 {
			est := ""
			if c.BPFStatsShare < 0.999 {
				est = fmt.Sprintf(", estimated from the %.0f%% of the time it was measured", 100*c.BPFStatsShare)
			}
			bpf = fmt.Sprintf("BPF %s%s in %d program runs%s", c.BPFRunTime.Round(time.Microsecond), share(c.BPFRunTime, ""), c.BPFRunCount, est)
		}
		little := ""
		if c.TargetCPU < minShareCPU {
			little = fmt.Sprintf("; the target used %s of CPU, too little for a share", c.TargetCPU.Round(time.Microsecond))
		}
		fmt.Fprintf(w, "wallprof: cost: profiler CPU %s while recording%s, %s; %s of CPU to start%s\n",
			c.ProfilerCPU.Round(time.Microsecond), share(c.ProfilerCPU, " of target CPU"), bpf, c.StartupCPU.Round(time.Millisecond), little)
	}
	name := c.flags.output
	if name == "-" {
		name = "the profile to stdout"
	}
	fmt.Fprintf(w, "wallprof: wrote %s (%s, %d bytes) %s after the recording ended; peak memory %d MiB\n",
		name, c.flags.format, c.written, time.Since(c.rec.Stopped()).Round(time.Millisecond), linux.MaxRSS()>>20)
}

// kernelNote reports whether a note is about the kernel's own quirks:
// they are in the profile, and printed with -v.
func kernelNote(n string) bool {
	return strings.HasPrefix(n, "the kernel switched a recorded thread") || strings.HasPrefix(n, "the kernel did not report")
}

// minShareCPU is the target CPU time under which wallprof's cost is not
// given as a share of it.
const minShareCPU = 10 * time.Millisecond

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

// recordMemoryLimit is the heap size above which the garbage collector
// works harder than GOGC asks (runtime/debug.SetMemoryLimit) while
// recording, from two seconds in until the profile is built: without it
// the heap grows to twice what it holds between collections, and a long
// recording's RSS to twice its samples (caddy under load at -F 999, 40 s:
// 113 MB, 98 MB with it, for 3% more of wallprof's CPU). A heap that needs
// more still gets it: the limit is soft. GOMEMLIMIT overrides it.
const recordMemoryLimit = 64 << 20

var memLimit struct {
	sync.Mutex
	lifted bool
}

// softMemoryLimitAfter sets the limit after d, unless liftMemoryLimit was
// called by then.
func softMemoryLimitAfter(d time.Duration) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	time.AfterFunc(d, func() {
		memLimit.Lock()
		defer memLimit.Unlock()
		if !memLimit.lifted {
			debug.SetMemoryLimit(recordMemoryLimit)
		}
	})
}

// liftMemoryLimit ends softMemoryLimitAfter: building the profile holds the
// samples and the profile at once, and a limit below that would have the
// collector run without end for a brief peak.
func liftMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	memLimit.Lock()
	defer memLimit.Unlock()
	memLimit.lifted = true
	debug.SetMemoryLimit(math.MaxInt64)
	// Building and encoding the profile allocate much that lives briefly:
	// collect it sooner than Go's default (the heap at 1.5 times what is
	// live instead of 2), for a lower peak at little cost in time.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
}
