// Package record is the recording sequence that every command that records
// calls: open a BPF session for a process, seed its threads, read the ring
// buffer, start the goroutine view of a Go target, stop in the right order,
// and build the symbolized profile with its notes.
//
// The sequence, from a PID to the BPF maps:
//
//	Start(pid, Options)          or StartPIDs(pids, Options) for several processes
//	  collect.Open(plan)         load the BPF object, set the target, attach (collect.Plan.Attachment)
//	  read the command line and the program, open the process's resolver
//	  session.SeedThreads(pid)   the threads that exist now, in the thread table
//	  go session.Run(add)        the ring buffer, into the aggregator (and the goroutine tap)
//	  startGoroutines            the goroutine view, when the target is a Go program
//	Stop()                       goroutine view first, then session.Stop (final stacks, detach, drain)
//	Profile()                    kernel symbols, notes, Scale before collect.Build, the goroutine window
//
// The commands keep their flags, the launch of a command, the wait for a
// signal or a duration, the output files and the summary.
package record

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/goview"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// Options says what to record and how.
type Options struct {
	// Freq is the on-CPU sampling frequency in Hz (collect.DefaultFreq if 0).
	Freq int
	// Duration is how long the command means to record (0: until Stop); the
	// session sizes its buffers with it. Start does not stop by itself.
	Duration time.Duration
	// Stats says how wallprof's own BPF run time is measured.
	Stats collect.StatsMode
	// FollowForks records the processes the target forks, too.
	FollowForks bool
	// Goroutines asks for the goroutine view when the target is Go.
	Goroutines bool
	// Gated says the target is held at a gate, a shell that will exec the
	// real command once Start returns: the goroutine view waits for the
	// exec (up to 5 s) instead of looking at the shell, and the process's
	// mappings are read when its samples arrive.
	Gated bool
	// Command names the target in the profile (default: its command line).
	Command string
	// Program is the program the target runs (default: linux.ReadProgram).
	Program linux.Program
	// Plan, if set, adjusts the plan before the session opens: the
	// command's knobs for comparing ways of recording.
	Plan func(*collect.Plan)
	// All records every process of the machine but wallprof's own
	// (StartAll): no goroutine view, no program.
	All bool
	// Live, when positive, keeps the last Live buckets of the recording
	// for views that refresh while it runs (wallprof top): Tick closes a
	// bucket, Window builds the profile of the latest ones.
	Live int
	// ForgetExited, with Live, forgets a process that has exited once
	// its last time is out of the Live buckets kept: its samples, stacks,
	// thread records and symbolizer; and the stacks no thread has run for
	// a few buckets (collect.Live.Compact). Native code is named from
	// symbol tables, without DWARF (symbolize.Cache.SkipDWARF). For recordings looked at only
	// through their live windows (the agent): a long system-wide
	// recording then holds the processes that ran lately, not all that
	// ever ran, and its whole-recording profile lacks the forgotten ones.
	ForgetExited bool
}

// ErrExited says the target exited before recording started.
var ErrExited = errors.New("the process exited before recording started")

// session is what a Recording needs of a collect.Session: the order tests
// replay samples through a fake.
type session interface {
	SeedThreads(pid int) error
	SeedAll() error
	Run(sink func(*collect.RawSample))
	SetReadInterval(d time.Duration)
	Counts() (samples, lost uint64)
	Stop() (*collect.Result, error)
	Close()
	StartNs() uint64
	Drain()
	Peek() ([]*collect.ThreadRecord, uint64, error)
	TrackUnwind(pid uint32, src collect.UnwindSource)
	TrackUnwindLater(pid uint32, src collect.UnwindSource)
	UnwindStats() (collect.UnwindStats, bool)
	OnExec(f func(pid uint32))
	OnFold(f func(pid, tid, into uint32))
	Forget(pids map[uint32]bool)
}

// goSampler is what a Recording needs of the goroutine view.
type goSampler interface {
	Active() bool
	Running(tid int) uint64
	Stop() error
	Attach(p, threads *profile.Profile, r goview.Resolver)
	From(t time.Time)
	Mark(keep int)
	AttachWindow(p, threads *profile.Profile, r goview.Resolver, n int)
}

// deps are the outside world: the kernel, the target's memory, the kernel's
// symbols. Tests replace them.
type deps struct {
	open       func(collect.Plan) (session, error)
	goroutines func(pid int, interval time.Duration, exe *goroutines.Exe) (goSampler, error)
	kernel     func() (collect.KernelResolver, error)
	exists     func(pid int) bool
	exe        func(pid int) string
	snapshot   func(pid int) ([]collect.ThreadSnapshot, error)
}

var system = deps{
	open: func(p collect.Plan) (session, error) { return collect.Open(p) },
	goroutines: func(pid int, interval time.Duration, exe *goroutines.Exe) (goSampler, error) {
		return goview.StartExe(pid, interval, exe)
	},
	kernel: func() (collect.KernelResolver, error) {
		k, err := symbolize.LoadKernel()
		if err != nil {
			return nil, err
		}
		return k, nil
	},
	exists:   linux.ProcessExists,
	snapshot: collect.SnapshotThreads,
	exe: func(pid int) string {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return exe
	},
}

// A Recording is one recording of a process, from Start to Profile.
type Recording struct {
	opts    Options
	deps    deps
	pid     int   // the first process: the goroutine view's, the gate's
	pids    []int // every process recorded
	session session
	agg     *collect.Aggregator
	cache   *symbolize.Cache
	result  *collect.Result
	command string
	// program is the program the target was run as and the file it runs
	// (they differ for a program run through a symlink); zero if unknown.
	program linux.Program

	// live divides the recording into buckets (Options.Live); aggMu then
	// keeps its ticks and windows apart from the samples' arrival.
	live     *collect.Live
	snapAt   time.Time // when seeStacks last read the threads' stacks
	ticks    int
	goneAt   map[uint32]int // the tick at which each process was first seen gone (ForgetExited)
	periodNs uint64
	aggMu    sync.Mutex
	kernel   collect.KernelResolver
	kernErr  error
	kernOK   bool

	mu      sync.Mutex
	notes   []string
	stopped time.Time
	stopErr error
	built   bool

	gomu   sync.Mutex
	gview  goSampler // the goroutine view of a Go target, or nil
	gostop chan struct{}
	gonote string // why there is no goroutine view, or why it is partial
	// goexe is a launched command's executable, read for the goroutine
	// view while the BPF program loads (nil when it is not a Go program);
	// nil when there is none to wait for.
	goexe chan *goroutines.Exe
	// gotap also aggregates the samples that arrive while the goroutine
	// table is read, so that running time covers the same window as the
	// snapshots.
	gotap     atomic.Pointer[goTap]
	gotapDone *collect.Aggregator
}

// goTap is where samples go while the goroutine table is read.
type goTap struct {
	agg *collect.Aggregator
	s   goSampler
	// live divides them into the live view's buckets (Options.Live).
	live *collect.Live
}

// Start opens a session for pid and starts recording. When the process
// exits before its threads are read, the error wraps ErrExited; when the
// kernel refuses the BPF program, collect.IsPermission(err) is true.
func Start(pid int, o Options) (*Recording, error) {
	return start([]int{pid}, o, system)
}

// StartAll starts a system-wide recording: every process but wallprof's
// own, as perf record -a.
func StartAll(o Options) (*Recording, error) {
	o.All, o.Goroutines, o.Gated = true, false, false
	if o.Command == "" {
		o.Command = "all processes"
	}
	return start([]int{0}, o, system)
}

// StartPIDs is Start for several processes, recorded in one session and
// one profile. The first one is the goroutine view's (and, with Gated, the
// gated one); Command defaults to their command lines. Any of them exiting
// before its threads are read gives ErrExited.
func StartPIDs(pids []int, o Options) (*Recording, error) {
	if len(pids) == 0 {
		return nil, errors.New("no process to record")
	}
	return start(pids, o, system)
}

func start(pids []int, o Options, d deps) (*Recording, error) {
	if o.Freq == 0 {
		o.Freq = collect.DefaultFreq
	}
	pid := pids[0]
	r := &Recording{opts: o, deps: d, pid: pid, pids: append([]int(nil), pids...), command: o.Command, program: o.Program,
		gostop: make(chan struct{})}
	r.cache = symbolize.NewCache()
	if o.ForgetExited {
		r.cache.SkipDWARF() // a long recording of every process: memory first
	}
	r.agg = r.newAggregator()
	plan := collect.Plan{PIDs: r.pids, FollowForks: o.FollowForks, Freq: o.Freq,
		Duration: o.Duration, Stats: o.Stats, Live: o.Live > 0}
	if o.All {
		plan.PIDs, plan.All, plan.FollowForks = nil, true, false
	}
	if o.Plan != nil {
		o.Plan(&plan)
	}
	var gate string
	if o.Gated {
		gate = d.exe(pid) // the shell, before it execs the command
	}
	// A launched command's unwind tables are built while the BPF program
	// loads: both before the command runs, neither waiting on the other.
	warmed := make(chan struct{})
	if o.Gated && r.program.Exe != "" && !plan.FramePointersOnly {
		go func() {
			defer close(warmed)
			r.cache.WarmUnwind(r.program.Exe)
		}()
	} else {
		close(warmed)
	}
	if o.Gated && o.Goroutines && r.program.Exe != "" {
		// And what the goroutine view reads from it: its first snapshot
		// then comes as soon as the runtime has started, not 80-300 ms
		// later (a 2 s recording's goroutine view covered 87-90% of it).
		r.goexe = make(chan *goroutines.Exe, 1)
		go func() {
			e, _ := goroutines.ReadExe(r.program.Exe) // not Go, or unreadable: read from the process later
			r.goexe <- e
		}()
	}
	s, err := d.open(plan)
	<-warmed
	if err != nil {
		r.cache.Close()
		return nil, err
	}
	r.session = s
	r.periodNs = plan.PeriodNs()
	if o.Gated || o.FollowForks {
		// A launched command, and the children it forks, may exit before
		// a read once a second: their mappings are read when their first
		// samples are, and cannot be once they are gone.
		s.SetReadInterval(commandReadInterval)
		s.OnExec(r.onExec)
	}
	s.OnFold(r.onFold)
	// The kernel's symbols while the recording's BPF programs are loaded:
	// a timer's sample can land in one (the scheduler hook), and the kernel
	// lists them only while they exist. Before a launched command runs:
	// parsing them is ~80 ms of CPU, which ran beside the first 200 ms of
	// the command (the ping-pong benchmark felt it as 2 points of
	// slowdown through the CPU it shares a core or a cache with).
	if o.Gated {
		r.kernelSymbols()
	} else {
		go r.kernelSymbols()
	}
	if o.Live > 0 {
		r.live = collect.NewLive(r.agg, s.StartNs(), r.periodNs, o.Live)
	}
	if o.All {
		if err := s.SeedAll(); err != nil {
			s.Close()
			r.cache.Close()
			return nil, err
		}
		r.trackUnwindLater()
		go s.Run(r.add)
		return r, nil
	}
	if r.command == "" {
		r.command = cmdlines(r.pids)
	}
	if r.program == (linux.Program{}) && !o.Gated {
		r.program, _ = linux.ReadProgram(pid) // unknown for a kernel thread
	}
	for _, p := range r.pids {
		if !o.Gated {
			// Read the process's mappings now, while it certainly exists.
			r.agg.Resolver(uint32(p))
		}
		if err := s.SeedThreads(p); err != nil {
			s.Close()
			r.cache.Close()
			if !d.exists(p) {
				return nil, fmt.Errorf("process %d: %w", p, ErrExited)
			}
			return nil, err
		}
	}
	// The targets' unwind tables before their samples are read; the
	// processes seen later (children, the command a gated shell execs
	// into) get theirs as their first sample arrives.
	if !o.Gated {
		for _, p := range r.pids {
			if src, ok := r.agg.Resolver(uint32(p)).(collect.UnwindSource); ok {
				s.TrackUnwind(uint32(p), src)
			}
		}
	} else {
		// The command's tables were built before it runs (above): they
		// are loaded as soon as it has exec'ed, not after its first
		// samples.
		go r.trackUnwindAfterExec(gate)
	}
	r.trackUnwindLater()
	go s.Run(r.add)
	if o.Goroutines {
		if o.Gated {
			go r.startGoroutines(gate)
		} else {
			r.startGoroutines("")
		}
	}
	return r, nil
}

// trackUnwindAfterExec loads the unwind tables of a gated target as soon
// as the shell has exec'ed the command, rather than when its first sample
// is read (up to a read interval later, its stacks walked by frame pointer
// until then).
func (r *Recording) trackUnwindAfterExec(gate string) {
	deadline := time.Now().Add(goroutineWait)
	for r.deps.exe(r.pid) == gate {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	if r.cache == nil {
		return
	}
	p, err := r.cache.NewProcess(r.pid)
	if err != nil {
		return
	}
	// The dynamic loader maps the libraries right after the exec, and
	// programs often dlopen more as they start: follow the mappings
	// closely for a while (the tables are reloaded only when they change).
	for start := time.Now(); ; {
		r.session.TrackUnwind(uint32(r.pid), p)
		since := time.Since(start)
		if since > startupWatch || !r.Stopped().IsZero() {
			return
		}
		// Every millisecond while the loader maps the libraries (a
		// program's first calls into them, before their tables are in,
		// are walked by frame pointer), then every 5.
		if since < startupWatch/5 {
			time.Sleep(time.Millisecond)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// startupWatch is how long after its exec a launched command's mappings are
// re-read (every 1 ms for the first fifth, every 5 ms after) for its unwind
// tables.
const startupWatch = 500 * time.Millisecond

// trackUnwindLater has every process the aggregator meets from now on
// given its unwind tables, in the background: the reader never waits.
func (r *Recording) trackUnwindLater() {
	s := r.session
	r.agg.OnProcess = func(pid uint32, pr collect.ProcessResolver) {
		if src, ok := pr.(collect.UnwindSource); ok {
			s.TrackUnwindLater(pid, src)
		}
	}
}

func (r *Recording) newAggregator() *collect.Aggregator {
	return collect.NewAggregator(func(pid int) (collect.ProcessResolver, error) {
		return r.cache.NewProcess(pid)
	})
}

// onFold moves the samples of an exited thread to its process's record of
// exited threads (collect.Session.OnFold), on the reader's goroutine.
func (r *Recording) onFold(pid, tid, into uint32) {
	if r.live != nil {
		r.aggMu.Lock()
		defer r.aggMu.Unlock()
	}
	r.agg.Fold(pid, tid, into)
	if tap := r.gotap.Load(); tap != nil {
		tap.agg.Fold(pid, tid, into)
	}
}

// add takes one sample from the session.
func (r *Recording) add(s *collect.RawSample) {
	if r.live != nil {
		r.aggMu.Lock()
		defer r.aggMu.Unlock()
	}
	r.agg.Add(s)
	if tap := r.gotap.Load(); tap != nil && tap.s.Active() {
		// Mark the sample with the goroutine the latest snapshot had on
		// its thread; Attach checks that the stack is that goroutine's.
		t := *s
		t.GoID = tap.s.Running(int(s.TID))
		tap.agg.Add(&t)
	}
}

// Tick closes a bucket of the live view (Options.Live) now.
func (r *Recording) Tick() error {
	if r.live == nil {
		return errors.New("not a live recording")
	}
	// The samples first, then the thread table: each thread's time then
	// covers all of its samples, and the difference, time no sample has
	// covered yet, is small.
	r.session.Drain()
	threads, now, err := r.session.Peek()
	if err != nil {
		return err
	}
	if !r.opts.All && time.Since(r.snapAt) >= snapshotEvery {
		r.aggMu.Lock()
		unseen := r.live.Unseen(threads)
		r.aggMu.Unlock()
		if len(unseen) > 0 {
			r.snapAt = time.Now()
			r.seeStacks(unseen)
		}
	}
	r.aggMu.Lock()
	defer r.aggMu.Unlock()
	r.live.Tick(threads, now)
	if tap := r.gotap.Load(); tap != nil && tap.live != nil {
		tap.live.Tick(threads, now)
		tap.s.Mark(r.opts.Live)
	}
	r.ticks++
	if r.opts.ForgetExited {
		r.forgetExited(threads)
	}
	return nil
}

// forgetExited forgets the processes (ForgetExited) that have had no live
// thread for more ticks than the buckets kept: their last bucket, with
// the time of their last threads, is out. Called with aggMu held.
func (r *Recording) forgetExited(threads []*collect.ThreadRecord) {
	if r.goneAt == nil {
		r.goneAt = map[uint32]int{}
	}
	running := map[uint32]bool{}
	for _, t := range threads {
		if !t.Exited {
			running[t.PID] = true
		}
	}
	for _, t := range threads {
		if _, ok := r.goneAt[t.PID]; !ok && !running[t.PID] && !r.deps.exists(int(t.PID)) {
			r.goneAt[t.PID] = r.ticks
		}
	}
	forget := map[uint32]bool{}
	for pid, at := range r.goneAt {
		switch {
		case running[pid]:
			delete(r.goneAt, pid) // its id was given to a new process
		case r.ticks-at > r.opts.Live:
			forget[pid] = true
			delete(r.goneAt, pid)
		}
	}
	if len(forget) > 0 {
		r.live.Forget(forget)
		r.session.Forget(forget)
	}
	// The stacks the live processes no longer run, likewise.
	r.live.Compact(uint32(r.opts.Live) + 2)
	if r.cache != nil {
		r.cache.Sweep(fileIdle)
	}
}

// fileIdle is how long the files of programs that no recorded process
// runs any more stay open and parsed (ForgetExited): a program started
// again within it (a command in a loop) is not parsed again.
const fileIdle = time.Minute

// snapshotEvery bounds how often Tick reads the stacks of threads blocked
// since before the recording (a task iterator, ~35 ms of CPU).
const snapshotEvery = 5 * time.Second

// seeStacks reads the current stacks of the threads in unseen, blocked
// since before the recording began (no sample has shown where they wait),
// and adds each as a sample of 1 ns in its state: the live view then has
// a stack for their time, the one they wait in now.
func (r *Recording) seeStacks(unseen map[uint32]profile.State) {
	snaps, err := r.deps.snapshot(r.pid)
	if err != nil {
		return // the view keeps saying the stack was not seen
	}
	r.aggMu.Lock()
	defer r.aggMu.Unlock()
	for _, t := range snaps {
		st, ok := unseen[uint32(t.TID)]
		if !ok || t.State == collect.Running || t.StaleUser {
			continue
		}
		s := &collect.RawSample{PID: uint32(t.PID), TID: uint32(t.TID), Comm: t.Comm, Regs: t.Regs,
			Kernel: t.Kernel, User: t.User, Snap: t.Snap}
		s.Weight[st] = 1
		r.agg.Add(s)
	}
}

// Window returns the profile of the live view's last n buckets (nil for a
// recording that is not live). Its threads are named as their samples name
// them.
func (r *Recording) Window(n int) *profile.Profile {
	if r.live == nil {
		return nil
	}
	kr := r.kernelSymbols()
	r.aggMu.Lock()
	p := r.live.Window(n, kr, r.command)
	var threads *profile.Profile
	var gr goview.Resolver
	tap := r.gotap.Load()
	if tap != nil && tap.live != nil {
		threads = tap.live.WindowOf(n, r.pid, kr, r.command)
		if pr := r.agg.Resolver(uint32(r.pid)); pr != nil {
			gr = pr
		}
	}
	if threads != nil {
		// The goroutine view of the same buckets, with the thread
		// samples marked with their goroutines (under the lock: the
		// resolver is the one the samples' leaf repair uses).
		tap.s.AttachWindow(p, threads, gr, n)
	}
	r.aggMu.Unlock()
	// Last: the goroutine view matches mappings by their file name.
	p.NameProgram(r.program.Path, r.program.Exe)
	return p
}

// WindowOf is Window for the threads of process pid alone.
func (r *Recording) WindowOf(n, pid int) *profile.Profile {
	if r.live == nil {
		return nil
	}
	kr := r.kernelSymbols()
	r.aggMu.Lock()
	p := r.live.WindowOf(n, pid, kr, cmdline(pid))
	r.aggMu.Unlock()
	if prog, err := linux.ReadProgram(pid); err == nil {
		p.NameProgram(prog.Path, prog.Exe)
	}
	return p
}

// WindowThreads returns each thread's time in the live view's last n
// buckets, and the time they cover, without stacks (nil for a recording
// that is not live).
func (r *Recording) WindowThreads(n int) ([]*collect.ThreadRecord, time.Duration) {
	if r.live == nil {
		return nil, 0
	}
	r.aggMu.Lock()
	defer r.aggMu.Unlock()
	return r.live.Threads(n)
}

// kernelSymbols loads the kernel's symbols once.
func (r *Recording) kernelSymbols() collect.KernelResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.kernOK {
		r.kernel, r.kernErr = r.deps.kernel()
		r.kernOK = true
	}
	return r.kernel
}

// Command is how the profile names the target.
func (r *Recording) Command() string { return r.command }

// Counts returns the samples read and the events lost so far.
func (r *Recording) Counts() (samples, lost uint64) { return r.session.Counts() }

// Note adds a sentence to the profile's notes.
func (r *Recording) Note(format string, a ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, a...))
	r.mu.Unlock()
}

// Notes returns the notes about how the recording went (not the goroutine
// view's; see GoroutineNote), complete once Profile has returned.
func (r *Recording) Notes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.notes...)
}

// GoroutineNote says why there is no goroutine view, or why it is partial
// ("" when there is nothing to say).
func (r *Recording) GoroutineNote() string {
	r.gomu.Lock()
	defer r.gomu.Unlock()
	return r.gonote
}

// Stopped is when Stop ended the recording (zero before).
func (r *Recording) Stopped() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// Stop ends the recording: the goroutine snapshots first, so that no
// snapshot outlives the samples it is matched with, then the session (the
// final stacks of every thread, detach, drain). It may be called more than
// once; later calls return the first one's error.
func (r *Recording) Stop() error {
	r.mu.Lock()
	if !r.stopped.IsZero() {
		defer r.mu.Unlock()
		return r.stopErr
	}
	r.mu.Unlock()
	r.stopGoroutines()
	res, err := r.session.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = time.Now()
	r.result, r.stopErr = res, err
	return err
}

// Close releases what a recording holds when its profile will not be
// built (Profile releases it otherwise).
func (r *Recording) Close() {
	_ = r.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.built {
		r.built = true
		r.cache.Close()
	}
}

// Profile symbolizes what was recorded and returns the profile, with the
// goroutine view and the notes. Call it once, after Stop succeeded.
func (r *Recording) Profile() (*profile.Profile, error) {
	r.mu.Lock()
	switch {
	case r.stopped.IsZero():
		r.mu.Unlock()
		return nil, errors.New("the recording has not stopped")
	case r.result == nil:
		r.mu.Unlock()
		return nil, fmt.Errorf("the recording failed: %v", r.stopErr)
	case r.built:
		r.mu.Unlock()
		return nil, errors.New("the profile was already built")
	}
	r.built = true
	r.mu.Unlock()
	defer r.cache.Close()

	// Separate debug files from debuginfod servers (DEBUGINFOD_URLS), now
	// that recording is over: downloads never delay the recording.
	r.cache.UseDebuginfod(symbolize.DebuginfodFromEnv())
	kr := r.kernelSymbols()
	if r.kernErr != nil {
		r.Note("kernel frames are not symbolized: %v", r.kernErr)
	}
	res := r.result
	if n := res.RecoveredSwitchIns; n > 0 && res.Resume {
		times := fmt.Sprintf("%d times", n)
		if n == 1 {
			times = "once"
		}
		r.Note("the kernel switched a recorded thread out and back in %s without counting it; each interval was closed when the thread resumed (sched_exit_tp), with its exact CPU time and its stack, its off-CPU time counted sleeping", times)
	} else if n > 0 {
		r.Note("the kernel did not report %d switches to a recorded thread; each was taken when the thread ran (sched_exit_tp), with exact times and its stack, so nothing is lost", n)
	}
	if n := res.DroppedOffCPU; n > 0 && res.OffCPURate > 0 {
		r.Note("off-CPU stacks were held to %d a second per CPU: %d that came due beyond that were not taken, and each thread's off-CPU samples are scaled to its exact time in each state, as its on-CPU samples are (WALLPROF_OFFCPU_RATE sets the bound)", res.OffCPURate, n)
	}
	if n := res.ReusedThreadIDs; n > 0 {
		r.Note("%d threads that exited had the id of an earlier thread of their process (the kernel reuses ids: pid_max); each id's times and samples are those of all the threads that had it", n)
	}
	if n := res.FoldedThreads; n > 0 {
		r.Note("%d threads that exited after the first %d are counted together, per process and name, as threads named %q: their times and stacks are whole, their ids not kept", n, collect.MaxExitRecords, collect.FoldedThreadsName+"NAME")
	}
	// Each thread's on-CPU samples weigh its exact CPU time over its
	// sample count, in the whole recording and in the goroutine view's
	// window alike. The factors are taken before Build, which scales the
	// aggregator's samples in place.
	res = r.agg.HoldWalkRemainders(res)
	scale := r.agg.Scale(res)
	p := collect.Build(res, r.agg, kr, r.command)
	r.gomu.Lock()
	gview, window, gonote := r.gview, r.gotapDone, r.gonote
	r.gomu.Unlock()
	if gview != nil && window != nil {
		// The thread samples of the snapshots' window, without the end's
		// remainders (time of the whole recording).
		inWindow := *res
		inWindow.Remainders = nil
		threads := collect.BuildWindow(&inWindow, window, scale, kr, r.command)
		var gr goview.Resolver
		if pr := r.agg.Resolver(uint32(r.pid)); pr != nil {
			gr = pr
		}
		gview.Attach(p, threads, gr)
	}
	if n := r.unwindNote(); n != "" {
		r.Note("%s", n)
	}
	for _, n := range jitNotes(p, func(pid int) jitSourcer {
		if s, ok := r.agg.Resolver(uint32(pid)).(jitSourcer); ok {
			return s
		}
		return nil
	}) {
		r.Note("%s", n)
	}
	p.Notes = append(p.Notes, r.Notes()...)
	if gonote != "" {
		p.Notes = append(p.Notes, gonote)
	}
	// Last: the goroutine view matches mappings by their file name.
	p.NameProgram(r.program.Path, r.program.Exe)
	// The samples and files the profile was built from are not needed any
	// more: let them go before the profile is encoded, which needs memory
	// of its own (on a Go server at -F 999, a fifth of the peak).
	r.agg.Release()
	if window != nil {
		window.Release()
	}
	return p, nil
}

// onExec reads the mappings of a process that has just exec'ed a program
// (on the reader's goroutine, before the program's samples), and again
// every millisecond for execWatch while the loader maps its libraries: a
// short-lived child (a compiler under make, a command in a shell loop) is
// gone long before the next read of the ring buffer, and a process's
// mappings cannot be read once it is gone.
func (r *Recording) onExec(pid uint32) {
	if r.live != nil {
		r.aggMu.Lock()
		defer r.aggMu.Unlock()
	}
	pr := r.agg.Resolver(pid) // made now if new; reads the mappings
	if pr == nil {
		return
	}
	_ = pr.Refresh() // a resolver made before the exec has the old image's
	go func() {
		for start := time.Now(); time.Since(start) < execWatch; {
			time.Sleep(time.Millisecond)
			if pr.Refresh() != nil {
				return // gone
			}
		}
		if src, ok := pr.(collect.UnwindSource); ok && r.Stopped().IsZero() {
			r.session.TrackUnwindLater(pid, src)
		}
	}()
}

// execWatch is how long after an exec a process's mappings are re-read
// every millisecond (onExec).
const execWatch = 20 * time.Millisecond

// commandReadInterval is how often the ring buffer is read while recording
// a command and the processes it forks (collect.ReadInterval otherwise): a
// process must still exist when its first samples are read, for its
// mappings to be read. Those that live less than this lose their names.
const commandReadInterval = 100 * time.Millisecond

// goTagReadInterval is how often the ring buffer is read while the goroutine
// view runs (samples are marked with the goroutine its latest snapshot saw
// on the thread when they are read).
const goTagReadInterval = 100 * time.Millisecond

// goroutineMinInterval bounds how often the goroutine table is read.
const goroutineMinInterval = 10 * time.Millisecond

// goroutineWait is how long a launched command's runtime is waited for.
const goroutineWait = 5 * time.Second

// startGoroutines starts the goroutine view when the target is a Go
// program. For a gated target, gate is the shell's executable: wait until
// the process has exec'ed the command and its runtime has started.
func (r *Recording) startGoroutines(gate string) {
	interval := max(time.Second/time.Duration(r.opts.Freq), goroutineMinInterval)
	deadline := time.Now().Add(goroutineWait)
	var execAt time.Time // when a launched command was first seen exec'ed
	for {
		execed := gate == "" || r.deps.exe(r.pid) != gate
		if execed && gate != "" && execAt.IsZero() {
			execAt = time.Now()
		}
		if execed {
			var exe *goroutines.Exe
			if r.goexe != nil {
				exe = <-r.goexe
				r.goexe <- exe // for a retry
			}
			s, err := r.deps.goroutines(r.pid, interval, exe)
			if err == nil {
				r.gomu.Lock()
				defer r.gomu.Unlock()
				select {
				case <-r.gostop:
					s.Stop()
					return
				default:
				}
				r.gview = s
				if !execAt.IsZero() {
					// Before it, the shell at the gate: no goroutines
					// to miss.
					s.From(execAt)
				}
				tap := &goTap{s: s, agg: r.newAggregator()}
				if r.live != nil {
					tap.live = collect.NewLive(tap.agg, linux.Monotonic(), r.periodNs, r.opts.Live)
				}
				r.gotap.Store(tap)
				// Samples are marked with the goroutine of the latest
				// snapshot when they are read: read them soon after.
				r.session.SetReadInterval(goTagReadInterval)
				return
			}
			// A kernel thread has no executable (/proc/PID/exe): not Go.
			notGo := errors.Is(err, goview.ErrNotGo) || gate == "" && errors.Is(err, fs.ErrNotExist)
			if notGo || gate == "" || time.Now().After(deadline) {
				if !notGo {
					r.gomu.Lock()
					r.gonote = fmt.Sprintf("no goroutine view: %v", err)
					r.gomu.Unlock()
				}
				return
			}
			// Launched: the runtime may not have set up its goroutine
			// table yet.
		}
		// Until the command has exec'ed, often: when it did bounds the
		// goroutine view's coverage (From).
		wait := 20 * time.Millisecond
		if !execed {
			wait = 2 * time.Millisecond
		}
		select {
		case <-r.gostop:
			return
		case <-time.After(wait):
		}
	}
}

// stopGoroutines ends the goroutine snapshots.
func (r *Recording) stopGoroutines() {
	r.gomu.Lock()
	defer r.gomu.Unlock()
	select {
	case <-r.gostop:
	default:
		close(r.gostop)
	}
	if tap := r.gotap.Swap(nil); tap != nil {
		r.gotapDone = tap.agg
	}
	if r.gview != nil {
		if err := r.gview.Stop(); err != nil && r.deps.exists(r.pid) {
			r.gonote = fmt.Sprintf("the goroutine view stopped early: %v", err)
		}
	}
}

// cmdlines names several processes by their command lines.
func cmdlines(pids []int) string {
	if len(pids) == 1 {
		return cmdline(pids[0])
	}
	names := make([]string, len(pids))
	for i, p := range pids {
		names[i] = fmt.Sprintf("%d: %s", p, cmdline(p))
	}
	return strings.Join(names, "; ")
}

// PIDs are the processes recorded (not counting those they fork).
func (r *Recording) PIDs() []int { return append([]int(nil), r.pids...) }

// cmdline reads a process's command line for the profile's header: what
// was run, as ps shows it.
func cmdline(pid int) string {
	s, err := linux.CommandLine(pid)
	if err != nil {
		return fmt.Sprintf("pid %d", pid)
	}
	return s
}
