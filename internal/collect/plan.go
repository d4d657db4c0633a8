// Package collect records wall-clock samples with eBPF: it loads the program
// in ./bpf, attaches it, follows the target's threads, reads the ring buffer,
// and turns what it read into a profile.Profile.
//
// A Plan says what to record; it is pure and unit-tested. A Session touches
// the kernel. Build turns a session's Raw result into a profile, and is fed
// by recorded data in tests as well as by live sessions.
package collect

import (
	"errors"
	"fmt"
	"time"
)

// Frequency limits for -F.
const (
	DefaultFreq = 99
	MaxFreq     = 20000
)

// Plan describes one recording.
type Plan struct {
	PIDs        []int // processes to record
	FollowForks bool  // also record processes the targets fork
	// All records every process of the machine but wallprof's own
	// (PIDs is then empty): system-wide, as perf record -a.
	All      bool
	Freq     int           // sampling frequency in Hz of on-CPU stacks (off-CPU: OffCPUPeriodNs)
	Duration time.Duration // 0: until stopped or the target exits
	// Stats says how the run time of wallprof's BPF programs is measured.
	Stats StatsMode
	// Accounting says how off-CPU intervals are closed (default: see
	// AccountAuto).
	Accounting Accounting
	// Live: the recording is read in windows while it runs (top, the
	// agent), which walk mode does not support (its off-CPU samples are
	// scaled over the whole recording): AccountAuto does not walk.
	Live bool
	// NoRunDelay probes sched_wakeup for the end of a block even where
	// schedstat gives it (switch-time accounting; to compare).
	NoRunDelay bool
	// NoStagger enables the CPUs' sampling timers at one instant, not
	// apart (linux.OpenCPUClocks; to compare).
	NoStagger bool
	// WalkEvery is the mean interval between two walks (walk mode); 0:
	// WalkPeriodNs's default (to measure what the walks cost).
	WalkEvery time.Duration
	// WalkTimer runs the walks' first pass from a BPF timer where the
	// kernel allows it (Linux 6.7+; doc/walk-timer.md), rather than from
	// the walker's thread: far cheaper for wallprof, but not yet as exact
	// on the bursts workload, so not the default.
	WalkTimer bool
	// NoExitTP does not load the programs on sched_exit_tp: the way of
	// kernels before 6.16 (to compare).
	NoExitTP bool
	// FramePointersOnly walks user stacks by frame pointer alone, as
	// bpf_get_stack does, instead of with the .eh_frame tables of the
	// files the targets map (doc/unwind.md).
	FramePointersOnly bool
	// UnwindRows bounds the rows of the loaded unwind tables (8 bytes
	// each); 0: DefaultUnwindRows.
	UnwindRows int
	// RingBytes is the size of the ring buffer the programs send samples
	// through (a power of two, at least MinRingBytes); 0: DefaultRingBytes.
	// The reader is woken when a quarter of it is full; a smaller ring
	// costs less memory (its pages are mapped twice) and loses samples
	// sooner in a burst (counted). Samples are sent packed, a few hundred
	// bytes to a kilobyte each (2,664 at most).
	RingBytes int
	// OffCPURate bounds the off-CPU stacks taken at a resumption (the
	// resume accounting: top, the agent, record -a), per CPU per second: 0
	// for DefaultOffCPURate's, negative for no bound. Past it, a sample of
	// a single period in each state is not taken (Result.DroppedOffCPU);
	// longer waits' always are. (The walk takes at most one stack per
	// thread per walk, and only for threads that moved; the switch-time
	// accounting of older kernels has no bound.)
	OffCPURate int
	// BenchCut makes the switch program stop part way (1 to 6, see the
	// BPF source's bench_cut), to measure where its time goes; the
	// recording is then wrong. Benchmarks only.
	BenchCut int
}

// DefaultRingBytes and MinRingBytes bound Plan.RingBytes.
const (
	DefaultRingBytes = 4 << 20
	MinRingBytes     = 256 << 10
)

// ringBytes is the ring buffer's size.
func (p Plan) ringBytes() uint32 {
	if p.RingBytes <= 0 {
		return DefaultRingBytes
	}
	return uint32(p.RingBytes)
}

// ErrBadPlan wraps every plan validation error.
var ErrBadPlan = errors.New("invalid recording options")

// Validate checks the plan.
func (p Plan) Validate() error {
	if p.Freq < 1 || p.Freq > MaxFreq {
		return fmt.Errorf("%w: frequency %d Hz is out of range (1 to %d)", ErrBadPlan, p.Freq, MaxFreq)
	}
	if p.Duration < 0 {
		return fmt.Errorf("%w: negative duration %v", ErrBadPlan, p.Duration)
	}
	if len(p.PIDs) == 0 && !p.All {
		return fmt.Errorf("%w: no process to record", ErrBadPlan)
	}
	if n := p.RingBytes; n != 0 && (n < MinRingBytes || n > 1<<30 || n&(n-1) != 0) {
		return fmt.Errorf("%w: ring buffer of %d bytes: want a power of two from %d to %d", ErrBadPlan, n, MinRingBytes, 1<<30)
	}
	if len(p.PIDs) > 0 && p.All {
		return fmt.Errorf("%w: processes given for a system-wide recording", ErrBadPlan)
	}
	for _, pid := range p.PIDs {
		if pid <= 0 {
			return fmt.Errorf("%w: bad PID %d", ErrBadPlan, pid)
		}
	}
	return nil
}

// unwindRows is the capacity of the unwind tables.
func (p Plan) unwindRows() uint32 {
	if p.UnwindRows <= 0 {
		return DefaultUnwindRows
	}
	return uint32(min(p.UnwindRows, 1<<26))
}

// PeriodNs is the sampling period in nanoseconds.
func (p Plan) PeriodNs() uint64 {
	return uint64(time.Second) / uint64(p.Freq)
}

// MinOffCPUPeriod bounds OffCPUPeriodNs from below: at most one off-CPU
// stack per millisecond of a thread's off-CPU time, what -F 999 costs.
const MinOffCPUPeriod = time.Millisecond

// OffCPUPeriodNs is how much off-CPU time (per thread and state) one
// off-CPU stack sample stands for: a quarter of the sampling period, but
// not under MinOffCPUPeriod. Off-CPU intervals are sampled by how much time
// they add up to, one stack per period crossed, so the share of two waits
// of a few milliseconds each has a sampling error that shrinks with the
// number of samples; four times as many as the timer takes halve it, at
// no cost for a thread that blocks for long (one stack per wait at most).
func (p Plan) OffCPUPeriodNs() uint64 {
	return max(p.PeriodNs()/4, uint64(MinOffCPUPeriod))
}

// DefaultOffCPURate is the off-CPU stacks of a single period a second per
// CPU that the resumption accounting takes at most at rate hz
// (Plan.OffCPURate): twenty times the timer's rate, and at least 2,000. On
// a thread pool that wakes every millisecond (200 threads) 80,000 came due
// a second: the ring lost most of them, and reading their stacks (~10 µs
// each) cost the target a third of its CPU time.
func DefaultOffCPURate(hz int) int { return max(2000, 20*hz) }

// OffCPUCostNs is the credit, in nanoseconds of a CPU's time, that one
// off-CPU stack takes from the CPU's budget (the BPF program's
// off_cost_ns); 0 for no budget.
func (p Plan) OffCPUCostNs() uint64 {
	rate := p.OffCPURate
	if rate == 0 {
		rate = DefaultOffCPURate(p.Freq)
	}
	if rate < 0 {
		return 0
	}
	return uint64(time.Second) / uint64(rate)
}

// WalkPeriodNs is the mean interval between two walks of the threads in
// walk mode (AccountWalk): an eighth of the sampling period, but not under
// MinOffCPUPeriod. A walk samples each thread's state at an instant; the
// share of a wait of a few milliseconds among a thread's waits has a
// sampling error that shrinks with the number of walks, and a thread that
// stays in one wait costs a walk almost nothing (its stack is read once).
func (p Plan) WalkPeriodNs() uint64 {
	if p.WalkEvery > 0 {
		return uint64(p.WalkEvery)
	}
	return max(p.PeriodNs()/8, uint64(MinOffCPUPeriod))
}
