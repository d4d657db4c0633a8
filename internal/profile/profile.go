// Package profile is wallprof's wall-clock profile model: stacks weighted by
// time, each sample tagged with the thread and the scheduler state the time
// was spent in, plus exact per-thread totals measured from scheduler
// timestamps.
//
// Contract:
//   - Sample values are nanoseconds of wall-clock time. A sample in state
//     OnCPU is on-CPU time; any other state is off-CPU time.
//   - Stacks are leaf first. A Location may expand to several Frames when
//     functions were inlined; Frames are innermost first.
//   - Threads holds the exact totals per thread. For a thread alive for the
//     whole recording, OnCPU+Runnable+Blocked() equals Duration (the
//     invariant checked by Validate).
//   - Sample totals per thread and state approximate the exact totals to
//     within one sampling period per state: stacks are sampled, time is not.
package profile

import (
	"fmt"
	"path"
	"sort"
	"time"
)

// State is where a thread's time went.
type State uint8

// The states a sample can be in. Values are stable: they are written to
// files as their String form and the BPF program uses the same numbers.
const (
	OnCPU    State = iota // running on a CPU
	Runnable              // on a run queue, waiting for a CPU (after a wake-up or a preemption)
	Sleeping              // blocked in an interruptible sleep (TASK_INTERRUPTIBLE): sleep, poll, pipe, socket, futex
	Disk                  // blocked in an uninterruptible sleep (TASK_UNINTERRUPTIBLE): typically disk I/O
	Other                 // blocked in another kernel state (stopped, traced, parked...)
	NumStates
)

var stateNames = [NumStates]string{"on-cpu", "runnable", "sleeping", "disk", "other"}

func (s State) String() string {
	if s < NumStates {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ParseState is the inverse of State.String.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// OffCPU reports whether time in s is off-CPU time.
func (s State) OffCPU() bool { return s != OnCPU }

// Blocked reports whether s is one of the blocked kinds.
func (s State) Blocked() bool { return s >= Sleeping && s < NumStates }

// Mapping is one mapped file of the profiled process (or the kernel).
type Mapping struct {
	ID      uint64 // stable, 1-based
	Start   uint64
	Limit   uint64
	Offset  uint64
	File    string
	BuildID string
	Kernel  bool
}

// Frame is one function at a location. Names are never truncated.
type Frame struct {
	Function string // demangled name; for an unknown address "module+0xoffset"
	File     string
	Line     int
}

// Location is one address in a stack.
type Location struct {
	ID      uint64 // stable, 1-based
	Mapping *Mapping
	Address uint64
	Frames  []Frame // innermost first; len>1 when functions were inlined
}

// Sample is a stack and the time spent in it, in one thread and state.
type Sample struct {
	Stack  []*Location // leaf first
	PID    int
	TID    int
	Thread string // thread name (comm)
	// GoID is the goroutine the goroutine view saw on the thread when the
	// sample was taken (0: unknown); set only in the view's window profile.
	GoID   uint64
	State  State
	Value  int64             // nanoseconds
	Labels map[string]string // extra string labels (goroutine information in later stages)
}

// Thread holds the exact time totals of one thread over the recording,
// measured from scheduler timestamps.
type Thread struct {
	PID     int
	TID     int
	Name    string
	Start   time.Duration // offset from Profile.Start at which the thread was first seen (0 if it existed at start)
	End     time.Duration // offset at which it exited, or Profile.Duration
	Exited  bool
	Time    [NumStates]time.Duration
	Samples int // number of stack samples taken
	// CPUSamples of them are on-CPU: the timer's, over which the thread's
	// exact CPU time is spread.
	CPUSamples int
}

// Wall is the thread's total accounted time.
func (t *Thread) Wall() time.Duration {
	var s time.Duration
	for _, d := range t.Time {
		s += d
	}
	return s
}

// Blocked is the thread's time in any blocked state.
func (t *Thread) Blocked() time.Duration {
	return t.Time[Sleeping] + t.Time[Disk] + t.Time[Other]
}

// Lifetime is the span of the recording the thread was alive for.
func (t *Thread) Lifetime() time.Duration { return t.End - t.Start }

// Profile is one wall-clock recording.
type Profile struct {
	Start    time.Time
	Duration time.Duration
	Period   int64 // sampling period in nanoseconds (1e9 / frequency)
	Command  string
	// Program is the path the profiled program was run as ("" when
	// unknown): for a program run through a symlink, the symlink's path,
	// not the file it leads to. Its executable's mappings carry this name
	// (see NameProgram), and pprof's main mapping is the first of them.
	Program  string
	Mappings []*Mapping
	Locs     []*Location
	Samples  []*Sample
	// Goroutines is the goroutine view of a Go program (nil otherwise), and
	// GoInfo how it was read.
	Goroutines []*GoSample
	GoInfo     *GoInfo
	Threads    []*Thread
	// Lost counts what was lost during the recording, by cause
	// ("ringbuf-full", "stack-read-failed", "thread-map-full", ...).
	Lost map[string]uint64
	// Cost is what wallprof itself consumed over the recording, when known.
	Cost *Cost
	// Notes are free-form remarks (target exited, etc.) carried into the file.
	Notes []string
	// Recorder says how the recording was made, when known.
	Recorder *Recorder
}

// How a recording measured off-CPU time (see doc/recorder.md).
const (
	// AccountResumption: at each thread's resumption (sched_exit_tp),
	// from the kernel's per-task counters; Linux 6.16+ with schedstat.
	AccountResumption = "resumption"
	// AccountSwitchTime: at every sched_switch and the switch-in after it.
	AccountSwitchTime = "switch-time"
	// AccountWalk: no program at a switch; every sampling period the
	// threads' counters are read and the stacks of those off CPU taken.
	AccountWalk = "walk"
	// AccountWalkTimer: AccountWalk, each walk's first pass run by a BPF
	// timer in the kernel (Linux 6.7+; doc/walk-timer.md).
	AccountWalkTimer = "walk-timer"
)

// Recorder is how a recording was made, for whoever reads the file later.
type Recorder struct {
	Accounting string // AccountResumption, AccountSwitchTime, AccountWalk or AccountWalkTimer
	Kernel     string // the recording machine's kernel release (uname -r)
}

// Cost is the profiler's own resource use during a recording.
type Cost struct {
	// ProfilerCPU is the wallprof process's user+system CPU time while it
	// recorded, from the probes' attachment to the start of Stop.
	ProfilerCPU time.Duration
	// StartupCPU is its CPU time before that: loading the BPF programs
	// (the kernel's verifier runs in the process) and attaching them. It
	// is spent before a launched command starts, once per recording.
	StartupCPU  time.Duration
	BPFRunTime  time.Duration // run time of wallprof's BPF programs (kernel BPF statistics)
	BPFRunCount uint64
	// BPFStatsShare is the share of the recording during which the kernel's
	// BPF statistics were on: 1 means BPFRunTime is exact, less than 1 that
	// it was extrapolated from that share, 0 that it was not measured.
	BPFStatsShare float64
	TargetCPU     time.Duration // the target's CPU time over the same window
}

// NameProgram records that the profiled program was run as path, a name
// of the executable file exe (the same file, or a symlink to it). It sets
// Program and renames the user mappings of exe to path, so that the
// program is named as it was run everywhere a mapping's file is shown
// (pprof's "File:", unsymbolized frames, --focus on file names): a profile
// of Debian's redis-server says redis-server, not redis-check-rdb, the
// file its symlink leads to. Other mappings keep their file's name.
func (p *Profile) NameProgram(path, exe string) {
	if path == "" {
		return
	}
	p.Program = path
	if exe == "" || exe == path {
		return
	}
	for _, m := range p.Mappings {
		if m != nil && !m.Kernel && m.File == exe {
			m.File = path
		}
	}
}

// SortThreads orders threads by PID then TID.
func (p *Profile) SortThreads() {
	sort.Slice(p.Threads, func(i, j int) bool {
		a, b := p.Threads[i], p.Threads[j]
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.TID < b.TID
	})
}

// TotalByState sums sample values per state.
func (p *Profile) TotalByState() [NumStates]int64 {
	var t [NumStates]int64
	for _, s := range p.Samples {
		if s.State < NumStates {
			t[s.State] += s.Value
		}
	}
	return t
}

// InvariantTolerance is the relative error allowed between a full-lifetime
// thread's accounted time and the recording's duration.
const InvariantTolerance = 0.02

// Validate checks the model's invariants: every full-lifetime thread accounts
// for the recording's duration within InvariantTolerance, no thread accounts
// for more than its lifetime, and every sample has a state and a stack.
func (p *Profile) Validate() error {
	for _, t := range p.Threads {
		life := t.Lifetime()
		if life <= 0 {
			continue
		}
		wall := t.Wall()
		diff := float64(wall-life) / float64(life)
		if diff < 0 {
			diff = -diff
		}
		if diff > InvariantTolerance {
			return fmt.Errorf("thread %d (%s): on-CPU+runnable+blocked = %v, but it was alive for %v (%.1f%% apart)",
				t.TID, t.Name, wall, life, 100*diff)
		}
	}
	for i, s := range p.Samples {
		if s.State >= NumStates {
			return fmt.Errorf("sample %d has unknown state %d", i, s.State)
		}
		if len(s.Stack) == 0 {
			return fmt.Errorf("sample %d has an empty stack", i)
		}
		if s.Value < 0 {
			return fmt.Errorf("sample %d has negative value %d", i, s.Value)
		}
	}
	return nil
}

// UnknownName names a location that has no symbol: "module+0xoffset" (the
// file offset, for user code; the address, for the kernel), or "0xaddress"
// without a mapping. Every output uses it, so names agree across formats.
func (l *Location) UnknownName() string {
	m := l.Mapping
	if m == nil || m.File == "" {
		return fmt.Sprintf("0x%x", l.Address)
	}
	off := l.Address
	if !m.Kernel && l.Address >= m.Start {
		off = l.Address - m.Start + m.Offset
	}
	return fmt.Sprintf("%s+0x%x", path.Base(m.File), off)
}
