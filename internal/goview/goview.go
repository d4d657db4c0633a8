// Package goview builds the goroutine view of a Go program's recording:
// each goroutine's time running, runnable (waiting for a P) and waiting
// (with the runtime's wait reason), from outside the process.
//
// Waiting and runnable time come from snapshots of the goroutine table
// (internal/goruntime/goroutines) taken at a fixed rate while recording:
// every goroutine that is not running at a snapshot is charged the time
// since the previous snapshot, with the stack it parked with. That weighs
// each goroutine by the time it spends in each state, so ten goroutines
// sleeping are ten times one goroutine's sleeping time; groups (by
// creation site) then say how many goroutines share it.
//
// The time of goroutines the runtime has running comes from the thread
// view, whose samples of a goroutine's stack (it ends in runtime.goexit)
// carry stacks and times (on a CPU: the timer's samples, each thread's
// exact CPU time spread over them; off CPU: exact waits, sampled by time):
// on a CPU is running; on the run queue of
// the kernel is runnable (waiting for a CPU, if not for a P). Saved
// registers of a running goroutine are stale, so snapshots never charge
// running goroutines; they charge system calls, with the runtime's state.
package goview

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
)

// ErrNotGo is wrapped by Start's error when the target is not a Go program.
var ErrNotGo = goroutines.ErrNotGo

// Sampler snapshots one process's goroutines until stopped.
type Sampler struct {
	pid      int
	r        *goroutines.Reader
	snap     snapshotter
	clock    clock
	interval time.Duration

	mu      sync.Mutex
	entries map[string]*entry
	order   []*entry
	funcs   map[string]map[string]int // goroutine function -> creator -> goroutines seen
	seen    map[uint64]bool           // goroutines already counted in funcs
	info    profile.GoInfo
	err     error // the error that ended the snapshots early, if any
	// firstAt and lastAt are when the first and the latest snapshot
	// began, maxGap the longest time between two; endAt when the
	// snapshots ended.
	firstAt, lastAt, endAt time.Time
	maxGap                 time.Duration
	// from is when the target could first have goroutines, if after the
	// recording began (From).
	from time.Time

	stop chan struct{}
	done chan struct{}
	key  []byte

	slots []slot // by goroutines.Goroutine.Slot
	// wrappers are the functions goroutines started in that the compiler
	// generated (Go 1.19–1.21: the closure of `go f(x)`, F.funcN).
	wrappers map[string]bool
	running  atomic.Pointer[map[int]uint64] // thread id -> goroutine the latest snapshot had running on it
	active   atomic.Bool                    // snapshots are being taken
	byID     map[uint64]*known              // what the snapshots learned of each goroutine

	// Buckets of the snapshots' time (Mark), for AttachWindow: each
	// entry's value and the coverage at the latest mark.
	marked      map[*entry]int64
	coveredAt   time.Duration
	snapshotsAt int
	buckets     []goBucket
}

// known is what the snapshots saw of one goroutine.
type known struct {
	start, createdBy string
	labels           map[string]string
}

// slot is what the previous snapshot charged for the goroutine in one slot
// of the goroutine table: a goroutine still parked where it was (the same
// stack and label slices, shared by the reader's caches) is charged to the
// same entry without building its key again.
type slot struct {
	goid   uint64
	e      *entry
	stack  []uint64
	labels []goroutines.Label
}

// same reports whether a and b are the same slice (not only equal).
func same[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// entry is aggregated time of one goroutine in one state with one stack.
type entry struct {
	goid       uint64
	state      profile.GState
	reason     string
	gopc       uint64
	startpc    uint64
	stack      []uint64
	value      int64
	createdBy  string
	goFunction string
	labels     map[string]string
}

// snapshotter reads the goroutine table (goroutines.Reader).
type snapshotter interface {
	SnapshotChunks(n int, each func(chunk []goroutines.Goroutine, more bool)) (goroutines.Snapshot, error)
}

// clock is what the snapshots are paced by.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	// ThreadCPU is the CPU time of the calling thread (0: unknown).
	ThreadCPU() time.Duration
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) ThreadCPU() time.Duration               { return linux.ThreadCPUTime() }

// Start opens the goroutine table of pid and snapshots it every interval
// until Stop. It fails, wrapping ErrNotGo, when pid is not a Go program.
func Start(pid int, interval time.Duration) (*Sampler, error) {
	return StartExe(pid, interval, nil)
}

// StartExe is Start with the target's executable already read (nil: read
// it now; goroutines.OpenExe).
func StartExe(pid int, interval time.Duration, exe *goroutines.Exe) (*Sampler, error) {
	r, err := goroutines.OpenExe(pid, exe)
	if err != nil {
		return nil, err
	}
	s := newSampler(pid, r, realClock{}, interval)
	s.r = r
	s.info.Version = r.GoVersion()
	s.active.Store(true)
	go s.loop()
	return s, nil
}

func newSampler(pid int, snap snapshotter, c clock, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, snap: snap, clock: c, interval: interval, entries: map[string]*entry{},
		funcs: map[string]map[string]int{}, seen: map[uint64]bool{}, byID: map[uint64]*known{}, stop: make(chan struct{}), done: make(chan struct{})}
	s.info.Interval = interval
	return s
}

// Active reports whether snapshots are still being taken: thread samples
// belong to the goroutine view only while they are.
func (s *Sampler) Active() bool { return s.active.Load() }

// Version returns the target's Go version.
func (s *Sampler) Version() string { return s.info.Version }

// Budget is the share of one CPU the snapshots may use: with many
// goroutines, they are taken less often than asked. At 10,000 goroutines a
// server's p99 latency at a constant request rate was 1.15 times its own
// without a profiler with 5%, and unchanged with 2% (doc/goroutines.md).
const Budget = 0.02

// Chunk is how many goroutines a snapshot reads at a time, and Burst how
// long the reader may run before it pauses, for as long as the budget asks
// (49 times the burst). A large goroutine table is so read over the whole
// interval in bursts of half a millisecond instead of taking a CPU from the
// target for milliseconds: at 10,000 goroutines, one 14 ms burst every
// 280 ms raised a server's p99 latency by about a fifth; half-millisecond
// bursts did not, 2 ms bursts did (doc/goroutines.md).
const (
	Chunk = 128
	Burst = 500 * time.Microsecond
)

// pauseCost is what one pause (between chunks, and between snapshots)
// costs the Go runtime of this process besides the reads (the timer,
// threads parked and woken: about ten context switches), counted against
// the budget. Measured on a 2-CPU VM: 150–180 µs a pause between chunks at
// 10,000 goroutines, about 300 µs a snapshot at 100 goroutines beyond the
// time the snapshot itself measured.
const pauseCost = 250 * time.Microsecond

// maxFailures is how many snapshots in a row may fail before the
// snapshots stop.
const maxFailures = 20

// burst is one stretch of reading, between pauses.
type burst struct {
	start time.Time
	cpu   time.Duration // the thread's CPU time at start (0: unknown)
}

// startBurst begins a burst. Its goroutine stays on its thread until
// endBurst, so that the thread's CPU clock measures the burst alone.
func (s *Sampler) startBurst() burst {
	runtime.LockOSThread()
	return burst{start: s.clock.Now(), cpu: s.clock.ThreadCPU()}
}

// endBurst ends a burst and returns the CPU time it used: not its wall
// time, which also holds the time wallprof waited for a CPU. On a 2-CPU
// machine busy with the target and its load, a snapshot of caddy's 20
// goroutines that used 0.2 ms of CPU sometimes took 50–70 ms: paced by
// wall time, the sampler then paused 50 times as long (2.5–3.4 s) and the
// rest of a 5 s recording had no snapshot (doc/goroutines.md).
func (s *Sampler) endBurst(b burst) time.Duration {
	defer runtime.UnlockOSThread()
	if b.cpu > 0 {
		if c := s.clock.ThreadCPU(); c > 0 {
			return max(c-b.cpu, 0)
		}
	}
	return s.clock.Now().Sub(b.start) // no thread CPU clock: wall time
}

// pauseAfter is how long to pause after reading that cost d (including
// pauseCost), so that reading uses at most Budget of one CPU.
func pauseAfter(d time.Duration) time.Duration {
	return time.Duration(float64(d)*(1/Budget)) - d
}

// waitAfter is how long to wait for the next snapshot, elapsed after the
// start of one whose reads and pauses cost busy of CPU: the rest of the
// interval, or longer if reading took more than the budget allows.
func waitAfter(interval, busy, elapsed time.Duration) time.Duration {
	return max(max(interval, time.Duration(float64(busy)/Budget))-elapsed, 0)
}

func (s *Sampler) loop() {
	defer close(s.done)
	defer s.active.Store(false)
	defer func() {
		s.mu.Lock()
		s.endAt = s.clock.Now()
		s.mu.Unlock()
	}()
	var first, last time.Time
	failures := 0
	for {
		t0 := s.clock.Now()
		w := s.interval
		if !last.IsZero() {
			w = t0.Sub(last)
		}
		// busy is the CPU time spent reading and adding, not pausing.
		busy := time.Duration(0)
		b := s.startBurst()
		running := map[int]uint64{}
		snap, err := s.snap.SnapshotChunks(Chunk, func(gs []goroutines.Goroutine, more bool) {
			s.add(gs, w, running)
			if !more || s.clock.Now().Sub(b.start) < Burst {
				return
			}
			d := s.endBurst(b) + pauseCost
			busy += d
			select {
			case <-s.stop: // finish this snapshot without pauses
			case <-s.clock.After(pauseAfter(d)):
			}
			b = s.startBurst()
		})
		busy += s.endBurst(b) + pauseCost // the wait for the next snapshot is a pause too
		if err != nil {
			failures++
			s.mu.Lock()
			s.info.Failed++
			if errors.Is(err, goroutines.ErrProcessGone) || failures >= maxFailures {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			// A failed read charges nobody: the next snapshot's weight
			// covers the time since the last good one.
			select {
			case <-s.stop:
				return
			case <-s.clock.After(s.interval):
			}
			continue
		}
		failures = 0
		if last.IsZero() {
			first = t0
		}
		s.finish(snap, running, w, t0)
		last = t0
		wait := waitAfter(s.interval, busy, s.clock.Now().Sub(t0))
		s.mu.Lock()
		if s.info.Snapshots > 1 {
			s.info.Interval = last.Sub(first) / time.Duration(s.info.Snapshots-1)
		}
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-s.clock.After(wait):
		}
	}
}

// Stop ends the snapshots. It returns the error that ended them early, or
// nil (also when the process exited: the recording ends with it).
func (s *Sampler) Stop() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	if s.r != nil {
		s.r.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil && !errors.Is(s.err, goroutines.ErrNotGo) && !errors.Is(s.err, goroutines.ErrProcessGone) {
		return s.err
	}
	return nil
}

// name returns the function at pc in the target, or "".
func (s *Sampler) name(pc uint64) string {
	if pc == 0 || s.r == nil {
		return ""
	}
	if _, _, fn, ok := s.r.Table().FuncRange(pc - s.r.LoadBias()); ok {
		return fn
	}
	return ""
}

// add charges w to each of gs, one chunk of a snapshot, and notes in
// running the goroutines it has on threads.
func (s *Sampler) add(gs []goroutines.Goroutine, w time.Duration, running map[int]uint64) {
	name := s.name
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range gs {
		g := &gs[i]
		if g.System {
			continue
		}
		for g.Slot >= len(s.slots) {
			s.slots = append(s.slots, slot{})
		}
		sl := &s.slots[g.Slot]
		if sl.goid != g.ID {
			*sl = slot{goid: g.ID}
			if !s.seen[g.ID] {
				s.seen[g.ID] = true
				s.creator(g, name)
				if s.r != nil && s.r.IsGoWrapper(g.StartPC) {
					if s.wrappers == nil {
						s.wrappers = map[string]bool{}
					}
					s.wrappers[name(g.StartPC)] = true
				}
			}
		}
		if g.TID != 0 && (g.Status == goroutines.Running || g.Status == goroutines.Copystack) {
			running[g.TID] = g.ID
			k := s.byID[g.ID]
			if k == nil {
				k = &known{start: name(g.StartPC), createdBy: nameCall(name, g.GoPC)}
				s.byID[g.ID] = k
			}
			if len(g.Labels) > 0 && k.labels == nil {
				k.labels = make(map[string]string, len(g.Labels))
				for _, l := range g.Labels {
					k.labels[l.Key] = l.Value
				}
			}
		}
		var st profile.GState
		reason := ""
		switch g.Status {
		case goroutines.Runnable, goroutines.Preempted:
			st = profile.GRunnable
		case goroutines.Waiting:
			st, reason = profile.GWaiting, g.WaitReason
		case goroutines.Syscall:
			st, reason = profile.GWaiting, "syscall"
		case goroutines.Running, goroutines.Copystack:
			continue // charged from the thread samples
		default:
			continue
		}
		if len(g.Stack) == 0 {
			continue
		}
		e := sl.e
		if e == nil || e.state != st || e.reason != reason || !same(sl.stack, g.Stack) || !same(sl.labels, g.Labels) {
			e = s.entry(g, st, reason)
			sl.e, sl.stack, sl.labels = e, g.Stack, g.Labels
		}
		e.value += int64(w)
		if e.createdBy == "" && e.goFunction == "" {
			e.createdBy = nameCall(name, g.GoPC)
			e.goFunction = name(g.StartPC)
		}
	}
}

// finish counts a snapshot begun at t0 whose chunks were added, each
// goroutine charged w, and publishes the goroutines it had on threads.
func (s *Sampler) finish(snap goroutines.Snapshot, running map[int]uint64, w time.Duration, t0 time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstAt.IsZero() {
		s.firstAt = t0
	} else {
		s.maxGap = max(s.maxGap, t0.Sub(s.lastAt))
	}
	s.lastAt = t0
	s.info.Covered += w
	s.info.Snapshots++
	s.info.Dropped += snap.Dropped
	s.info.Retried += snap.Retried
	n := 0
	for i := range snap.Goroutines {
		if !snap.Goroutines[i].System {
			n++
		}
	}
	s.info.MaxGoroutines = max(s.info.MaxGoroutines, n)
	s.running.Store(&running)
}

// Running returns the goroutine the latest snapshot had running on thread
// tid (0 if none).
func (s *Sampler) Running(tid int) uint64 {
	if m := s.running.Load(); m != nil {
		return (*m)[tid]
	}
	return 0
}

// nameCall names the function containing a return address.
func nameCall(name func(uint64) string, ret uint64) string {
	if ret == 0 {
		return ""
	}
	return name(ret - 1)
}

// creator records that a goroutine running fn was created by the function
// of its gopc.
func (s *Sampler) creator(g *goroutines.Goroutine, name func(uint64) string) {
	fn := name(g.StartPC)
	if fn == "" {
		return
	}
	m := s.funcs[fn]
	if m == nil {
		m = map[string]int{}
		s.funcs[fn] = m
	}
	m[nameCall(name, g.GoPC)]++
}

func (s *Sampler) entry(g *goroutines.Goroutine, st profile.GState, reason string) *entry {
	k := s.key[:0]
	k = binary.LittleEndian.AppendUint64(k, g.ID)
	k = binary.LittleEndian.AppendUint64(k, g.GoPC)
	k = binary.LittleEndian.AppendUint64(k, g.StartPC)
	k = append(k, byte(st))
	k = append(k, reason...)
	k = append(k, 0)
	for _, l := range g.Labels {
		k = append(k, l.Key...)
		k = append(k, 0)
		k = append(k, l.Value...)
		k = append(k, 0)
	}
	k = append(k, 0)
	for _, pc := range g.Stack {
		k = binary.LittleEndian.AppendUint64(k, pc)
	}
	s.key = k
	e := s.entries[string(k)]
	if e == nil {
		e = &entry{goid: g.ID, state: st, reason: reason, gopc: g.GoPC, startpc: g.StartPC, stack: append([]uint64(nil), g.Stack...)}
		if len(g.Labels) > 0 {
			e.labels = make(map[string]string, len(g.Labels))
			for _, l := range g.Labels {
				e.labels[l.Key] = l.Value
			}
		}
		s.entries[string(k)] = e
		s.order = append(s.order, e)
	}
	return e
}

// Resolver names the addresses of the target (symbolize.Process).
type Resolver interface {
	Resolve(addr uint64) (*profile.Mapping, []profile.Frame)
}

// Attach adds the goroutine view to p, the recording's thread view: the
// snapshots' runnable and waiting time, and the time of the goroutines the
// runtime had running from threads, the thread samples taken while the
// snapshots were (nil: p's own). Call it after Stop.
func (s *Sampler) Attach(p, threads *profile.Profile, r Resolver) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	start, d := p.Start, p.Duration
	if !start.IsZero() && s.from.After(start) && s.from.Sub(start) < d {
		info.Before = s.from.Sub(start)
		start, d = s.from, d-info.Before
	}
	info.LongestGap = s.longestGap(start, d)
	s.attach(p, threads, r, func(e *entry) int64 { return e.value }, info)
}

// From says when the target could first have goroutines: a launched
// command's exec. The time of the recording before it is left out of the
// coverage (profile.GoInfo.Before).
func (s *Sampler) From(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = t
}

// Mark closes a bucket of the snapshots' time, for views of the recent
// past of a running recording (wallprof top); the last keep are kept.
func (s *Sampler) Mark(keep int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marked == nil {
		s.marked = map[*entry]int64{}
	}
	b := goBucket{values: map[*entry]int64{}, covered: s.info.Covered - s.coveredAt, snapshots: s.info.Snapshots - s.snapshotsAt}
	for _, e := range s.order {
		if d := e.value - s.marked[e]; d > 0 {
			b.values[e] = d
			s.marked[e] = e.value
		}
	}
	s.coveredAt, s.snapshotsAt = s.info.Covered, s.info.Snapshots
	s.buckets = append(s.buckets, b)
	if len(s.buckets) > keep {
		s.buckets = s.buckets[len(s.buckets)-keep:]
	}
}

// goBucket is what the snapshots charged between two marks.
type goBucket struct {
	values    map[*entry]int64
	covered   time.Duration
	snapshots int
}

// AttachWindow is Attach for the last n buckets (Mark): p and threads are
// the window's thread profiles. It may be called while the snapshots run.
func (s *Sampler) AttachWindow(p, threads *profile.Profile, r Resolver, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bs := s.buckets
	if n < len(bs) {
		bs = bs[len(bs)-n:]
	}
	sums := map[*entry]int64{}
	info := s.info
	info.Covered, info.Snapshots = 0, 0
	for _, b := range bs {
		for e, v := range b.values {
			sums[e] += v
		}
		info.Covered += b.covered
		info.Snapshots += b.snapshots
	}
	s.attach(p, threads, r, func(e *entry) int64 { return sums[e] }, info)
}

func (s *Sampler) attach(p, threads *profile.Profile, r Resolver, value func(*entry) int64, info profile.GoInfo) {
	if threads == nil {
		threads = p
	}
	in := newInterner(p, s.pid, r)
	for _, e := range s.order {
		v := value(e)
		if v <= 0 {
			continue
		}
		g := &profile.GoSample{PID: s.pid, GoID: e.goid, State: e.state, WaitReason: e.reason,
			CreatedBy: e.createdBy, Func: e.goFunction, Labels: e.labels, Value: v}
		for i, pc := range e.stack {
			// stack[0] is where the goroutine will resume (an exact pc);
			// the others are return addresses.
			g.Stack = append(g.Stack, in.loc(pc, i == 0))
		}
		if fn, ok := goroutineFunc(g.Stack, s.isWrapper); ok {
			g.Func = fn
		}
		if g.Func == "runtime.main" {
			g.CreatedBy = "" // the main goroutine
		}
		p.Goroutines = append(p.Goroutines, g)
	}
	for _, ts := range threads.Samples {
		if ts.PID != s.pid {
			continue
		}
		// A goroutine the runtime has running (on an M, with a P) is on a
		// CPU, or its thread waits for one: the goroutine waits for the
		// CPU, runnable. Blocked in the kernel, it is in a system call,
		// which the snapshots charge with the runtime's own state.
		var st profile.GState
		switch ts.State {
		case profile.OnCPU:
			st = profile.GRunning
		case profile.Runnable:
			st = profile.GRunnable
		default:
			continue
		}
		if runtimeSyscall(ts.Stack) || hasFunc(ts.Stack, "runtime.mcall") {
			// In a system call the runtime knows of: the snapshots see
			// it (_Gsyscall). Under mcall: the goroutine is switching
			// out and this is the scheduler.
			continue
		}
		start, ok := goroutineStart(ts.Stack)
		if !ok || isSystemFunc(start) {
			continue // the scheduler, GC workers, signal handling: not a goroutine's own work
		}
		fn, _ := goroutineFunc(ts.Stack, s.isWrapper)
		g := &profile.GoSample{Stack: in.stack(ts.Stack), PID: s.pid, State: st, Func: fn,
			CreatedBy: s.likelyCreator(start), Value: ts.Value}
		// The goroutine the latest snapshot had on the thread, if the
		// stack is one of its function's: it may have changed since.
		if goid := ts.GoID; goid != 0 {
			if k := s.byID[goid]; k != nil && k.start == start {
				g.GoID, g.CreatedBy, g.Labels = goid, k.createdBy, k.labels
			}
		}
		if fn == "runtime.main" {
			g.CreatedBy = ""
		}
		p.Goroutines = append(p.Goroutines, g)
	}
	resolveWrappers(p.Goroutines, s.isWrapper)
	p.GoInfo = &info
}

// longestGap is the longest time without a snapshot in a recording that
// began at start (zero: unknown, from the first snapshot to the end of the
// snapshots) and lasted d. Call it with s.mu held.
func (s *Sampler) longestGap(start time.Time, d time.Duration) time.Duration {
	end := s.endAt
	if !start.IsZero() {
		end = start.Add(d)
	}
	if s.firstAt.IsZero() {
		return max(d, 0)
	}
	g := max(s.maxGap, end.Sub(s.lastAt))
	if !start.IsZero() {
		g = max(g, s.firstAt.Sub(start))
	}
	return g
}

// resolveWrappers names the function of goroutines caught before they
// started, whose stack is only their go-statement wrapper (F.gowrapN):
// the function that wrapper calls in the other goroutines.
func resolveWrappers(gs []*profile.GoSample, wrapper func(string) bool) {
	callee := map[string]map[string]int64{}
	for _, g := range gs {
		prev := ""
		rootFuncs(g.Stack, func(name string) bool {
			if prev != "" {
				m := callee[prev]
				if m == nil {
					m = map[string]int64{}
					callee[prev] = m
				}
				m[name] += g.Value
			}
			if !wrapper(name) {
				return false
			}
			prev = name
			return true
		})
	}
	for _, g := range gs {
		if !wrapper(g.Func) {
			continue
		}
		best := ""
		for f, v := range callee[g.Func] {
			if best == "" || v > callee[g.Func][best] || v == callee[g.Func][best] && f < best {
				best = f
			}
		}
		if best != "" {
			g.Func = best
		}
	}
}

// likelyCreator is the function that created most goroutines running fn.
func (s *Sampler) likelyCreator(fn string) string {
	best, n := "", 0
	for c, k := range s.funcs[fn] {
		if k > n || k == n && c < best {
			best, n = c, k
		}
	}
	return best
}

// syscallMarkers are the Go functions that tell the runtime a goroutine is
// entering a system call (entersyscall: the goroutine is _Gsyscall, and the
// snapshots charge its time in the call). A system call made without one
// (syscall.RawSyscall, the runtime's own futex or write, a vDSO fallback)
// leaves the goroutine _Grunning: only the thread samples see that time.
var syscallMarkers = []string{"syscall.Syscall", "syscall.Syscall6", "syscall.Syscall9", "syscall.syscall",
	"syscall.syscall6", "syscall.SyscallNoError", "runtime.cgocall", "runtime.entersyscall",
	"runtime.entersyscallblock", "runtime.reentersyscall"}

// runtimeSyscall reports whether a thread stack is in a system call that
// the Go runtime marked as one (syscallMarkers).
func runtimeSyscall(stack []*profile.Location) bool {
	if !inSyscall(stack) {
		return false
	}
	for _, fn := range syscallMarkers {
		if hasFunc(stack, fn) {
			return true
		}
	}
	return false
}

// inSyscall reports whether a thread stack is in a system call (its kernel
// part entered through the syscall entry).
func inSyscall(stack []*profile.Location) bool {
	for _, l := range stack {
		if l.Mapping == nil || !l.Mapping.Kernel {
			continue
		}
		for _, f := range l.Frames {
			if strings.HasPrefix(f.Function, "entry_SYSCALL") || f.Function == "do_syscall_64" {
				return true
			}
		}
	}
	return false
}

func hasFunc(stack []*profile.Location, fn string) bool {
	for _, l := range stack {
		for _, f := range l.Frames {
			if f.Function == fn {
				return true
			}
		}
	}
	return false
}

// rootFuncs calls fn with the functions of a stack's user frames above
// runtime.goexit, root first, until fn returns false; ok is false for
// stacks that are not a goroutine's (the scheduler's g0, signal
// handlers), which have no frame above runtime.goexit. It allocates
// nothing: it runs for every thread sample of a profile.
func rootFuncs(stack []*profile.Location, fn func(name string) bool) (ok bool) {
	seenExit := false
	for i := len(stack) - 1; i >= 0; i-- {
		l := stack[i]
		if l.Mapping != nil && l.Mapping.Kernel {
			continue
		}
		for j := len(l.Frames) - 1; j >= 0; j-- {
			name := l.Frames[j].Function
			if !seenExit {
				if name != "runtime.goexit" {
					return false
				}
				seenExit = true
				continue
			}
			ok = true
			if !fn(name) {
				return true
			}
		}
	}
	return ok
}

// goroutineStart returns the function the goroutine started in (its
// startpc's: for `go f(x)`, Go 1.21+ starts a wrapper, F.gowrapN).
func goroutineStart(stack []*profile.Location) (string, bool) {
	var start string
	ok := rootFuncs(stack, func(name string) bool {
		start = name
		return false
	})
	return start, ok
}

// goroutineFunc returns the goroutine's own function: the one it started
// in, or the function a go-statement wrapper (F.gowrapN) called.
func goroutineFunc(stack []*profile.Location, wrapper func(string) bool) (string, bool) {
	var f string
	ok := rootFuncs(stack, func(name string) bool {
		f = name
		return wrapper(name)
	})
	return f, ok
}

// isWrapper reports whether fn is a go-statement wrapper: by its name
// (Go 1.22+), or because a goroutine started in it and the function table
// marks it a wrapper (Go 1.19–1.21, F.funcN).
func (s *Sampler) isWrapper(fn string) bool {
	return isGoWrapper(fn) || s.wrappers[fn]
}

// isGoWrapper reports whether fn is the closure the compiler makes for a
// go statement with arguments (Go 1.21+: "pkg.F.gowrap1").
func isGoWrapper(fn string) bool {
	i := strings.LastIndex(fn, ".gowrap")
	if i < 0 {
		return false
	}
	for _, c := range fn[i+len(".gowrap"):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isSystemFunc reports whether fn is the function of a runtime goroutine
// (as runtime.Stack hides them): package runtime, but runtime.main.
func isSystemFunc(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") && fn != "runtime.main"
}

// interner adds locations to a profile, reusing those of the process's
// thread samples at the same address.
type interner struct {
	p      *profile.Profile
	r      Resolver
	byAddr map[uint64]*profile.Location // user locations of the process
	kernel map[uint64]*profile.Location
	maps   map[profile.Mapping]*profile.Mapping
}

func newInterner(p *profile.Profile, pid int, r Resolver) *interner {
	in := &interner{p: p, r: r, byAddr: map[uint64]*profile.Location{}, kernel: map[uint64]*profile.Location{},
		maps: map[profile.Mapping]*profile.Mapping{}}
	for _, s := range p.Samples {
		for _, l := range s.Stack {
			switch {
			case l.Mapping != nil && l.Mapping.Kernel:
				in.kernel[l.Address] = l
			case s.PID == pid:
				in.byAddr[l.Address] = l
			}
		}
	}
	for _, m := range p.Mappings {
		if m != nil {
			in.maps[mapKey(m)] = m
		}
	}
	return in
}

// stack returns a stack of p's locations for a stack of another profile
// of the same process (the thread samples of the snapshots' window).
func (in *interner) stack(st []*profile.Location) []*profile.Location {
	out := make([]*profile.Location, 0, len(st))
	for _, l := range st {
		kernel := l.Mapping != nil && l.Mapping.Kernel
		if !kernel {
			if pl, ok := in.byAddr[l.Address]; ok {
				out = append(out, pl)
				continue
			}
		} else if pl, ok := in.kernel[l.Address]; ok {
			out = append(out, pl)
			continue
		}
		c := &profile.Location{ID: uint64(len(in.p.Locs) + 1), Address: l.Address, Frames: l.Frames}
		if l.Mapping != nil {
			c.Mapping = in.mapping(l.Mapping)
		}
		in.p.Locs = append(in.p.Locs, c)
		if kernel {
			in.kernel[l.Address] = c
		} else {
			in.byAddr[l.Address] = c
		}
		out = append(out, c)
	}
	return out
}

// mapping returns p's mapping for m, adding it if needed.
func (in *interner) mapping(m *profile.Mapping) *profile.Mapping {
	k := mapKey(m)
	pm := in.maps[k]
	if pm == nil {
		c := *m
		c.ID = uint64(len(in.p.Mappings) + 1)
		pm = &c
		in.p.Mappings = append(in.p.Mappings, pm)
		in.maps[k] = pm
	}
	return pm
}

func mapKey(m *profile.Mapping) profile.Mapping {
	return profile.Mapping{Start: m.Start, Limit: m.Limit, Offset: m.Offset, File: m.File}
}

func (in *interner) loc(pc uint64, exact bool) *profile.Location {
	addr := pc
	if !exact && addr > 0 {
		addr-- // the call, not the instruction after it
	}
	if l, ok := in.byAddr[addr]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(in.p.Locs) + 1), Address: addr}
	var m *profile.Mapping
	if in.r != nil {
		m, l.Frames = in.r.Resolve(addr)
	}
	if len(l.Frames) == 0 {
		l.Frames = []profile.Frame{{Function: fmt.Sprintf("[unknown]+0x%x", addr)}}
	}
	if m != nil {
		l.Mapping = in.mapping(m)
	}
	in.byAddr[addr] = l
	in.p.Locs = append(in.p.Locs, l)
	return l
}
