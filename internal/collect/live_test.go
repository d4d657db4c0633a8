package collect

import (
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// liveKernel names the kernel addresses of the live tests' stacks.
func liveKernel() *fakeKernel {
	return &fakeKernel{mapping: &profile.Mapping{File: "[kernel.kallsyms]"},
		syms: map[uint64]string{0xa: "compute", 0xb: "parse", 0xc: "do_nanosleep", 0xd: "pipe_read"}}
}

func liveSample(tid uint32, st profile.State, w time.Duration, leaf uint64) *RawSample {
	s := &RawSample{PID: 1, TID: tid, Comm: "app", Kernel: []uint64{leaf}}
	s.Weight[st] = uint64(w)
	return s
}

// thread is the totals Peek would give: cumulative times by state.
func liveThread(tid uint32, cpu, run, sleep time.Duration) *ThreadRecord {
	t := &ThreadRecord{PID: 1, TID: tid, Name: "app"}
	t.Time[profile.OnCPU], t.Time[profile.Runnable], t.Time[profile.Sleeping] = uint64(cpu), uint64(run), uint64(sleep)
	return t
}

// byFunc sums a window's samples by leaf function and state.
func byFunc(p *profile.Profile) map[string]map[profile.State]time.Duration {
	out := map[string]map[profile.State]time.Duration{}
	for _, s := range p.Samples {
		fn := s.Stack[0].Frames[0].Function
		if out[fn] == nil {
			out[fn] = map[profile.State]time.Duration{}
		}
		out[fn][s.State] += time.Duration(s.Value)
	}
	return out
}

func TestLiveBuckets(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	k := liveKernel()
	l := NewLive(a, 0, uint64(10*ms), 2)
	sec := uint64(time.Second)

	// Bucket 1: two timer samples (nominal 20 ms) for 30 ms of CPU; the
	// thread slept the rest, in a wait no sample has shown yet.
	a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xa))
	a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xb))
	l.Tick([]*ThreadRecord{liveThread(7, 30*ms, 0, 970*ms)}, sec)
	w := byFunc(l.Window(1, k, "app"))
	if w["compute"][profile.OnCPU] != 15*ms || w["parse"][profile.OnCPU] != 15*ms {
		t.Errorf("bucket 1 on-CPU %v: want compute and parse 15ms each, the thread's 30ms spread", w)
	}
	if w[UnseenOffCPUFunction][profile.Sleeping] != 970*ms {
		t.Errorf("bucket 1 sleeping %v: want 970ms under %s", w, UnseenOffCPUFunction)
	}

	// Bucket 2: the wait ends, and its sample carries the whole 1.5 s;
	// the bucket had 1 s of it.
	a.Add(liveSample(7, profile.Sleeping, 1500*ms, 0xc))
	l.Tick([]*ThreadRecord{liveThread(7, 30*ms, 0, 1970*ms)}, 2*sec)
	w = byFunc(l.Window(1, k, "app"))
	if w["do_nanosleep"][profile.Sleeping] != time.Second || len(w) != 1 {
		t.Errorf("bucket 2 %v: want do_nanosleep 1s and nothing else", w)
	}

	// Bucket 3: no sample; the thread sleeps on, in the stack it was last
	// seen sleeping in.
	l.Tick([]*ThreadRecord{liveThread(7, 30*ms, 0, 2970*ms)}, 3*sec)
	w = byFunc(l.Window(1, k, "app"))
	if w["do_nanosleep"][profile.Sleeping] != time.Second {
		t.Errorf("bucket 3 %v: want do_nanosleep 1s", w)
	}

	// The window keeps two buckets: 2 and 3.
	p := l.Window(10, k, "app")
	w = byFunc(p)
	if w["do_nanosleep"][profile.Sleeping] != 2*time.Second || w["compute"] != nil {
		t.Errorf("window %v: want do_nanosleep 2s, bucket 1 gone", w)
	}
	if p.Duration != 2*time.Second || len(p.Threads) != 1 || p.Threads[0].Time[profile.Sleeping] != 2*time.Second {
		t.Errorf("window duration %v, threads %+v: want 2s, one thread that slept 2s", p.Duration, p.Threads)
	}
	var total time.Duration
	for _, s := range p.Samples {
		total += time.Duration(s.Value)
	}
	if total != 2*time.Second {
		t.Errorf("window samples add up to %v, want the thread's 2s", total)
	}
}

// TestLiveUnsampledCPU: a thread that ran but that no timer caught in the
// bucket is shown as such, never under a stack it waited in.
func TestLiveUnsampledCPU(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	l := NewLive(a, 0, uint64(10*ms), 5)
	a.Add(liveSample(8, profile.Sleeping, 990*ms, 0xd))
	l.Tick([]*ThreadRecord{liveThread(8, 4*ms, 6*ms, 990*ms)}, uint64(time.Second))
	w := byFunc(l.Window(1, liveKernel(), "app"))
	if w[UnsampledFunction][profile.OnCPU] != 4*ms || w["pipe_read"][profile.OnCPU] != 0 {
		t.Errorf("%v: want 4ms on CPU under %s", w, UnsampledFunction)
	}
	if w["pipe_read"][profile.Sleeping] != 990*ms || w["pipe_read"][profile.Runnable] != 6*ms {
		t.Errorf("%v: want pipe_read 990ms sleeping and 6ms runnable (its latest stack)", w)
	}
}

// TestLiveWaitAcrossBuckets: a wait that spans buckets is counted once. Its
// first bucket gives the thread's sleep to the stack it was last seen
// waiting in; when the wait ends, its sample carries the whole wait, and
// the short waits after it in the same bucket keep their own time rather
// than a share of the long wait's.
func TestLiveWaitAcrossBuckets(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	k := liveKernel()
	l := NewLive(a, 0, uint64(10*ms), 5)
	sec := uint64(time.Second)
	// Bucket 1: a short nanosleep (sampled), then a long one begins (it
	// waits 1.2 s: 0.9 s in bucket 1, 0.3 s in bucket 2).
	a.Add(liveSample(9, profile.Sleeping, 100*ms, 0xc))
	l.Tick([]*ThreadRecord{liveThread(9, 0, 0, 1000*ms)}, sec)
	// Bucket 2: the long wait ends (its sample: 1.2 s), then 0.7 s of
	// short pipe_read waits.
	a.Add(liveSample(9, profile.Sleeping, 1200*ms, 0xc))
	for range 7 {
		a.Add(liveSample(9, profile.Sleeping, 100*ms, 0xd))
	}
	l.Tick([]*ThreadRecord{liveThread(9, 0, 0, 2000*ms)}, 2*sec)
	w := byFunc(l.Window(1, k, "app"))
	if w["do_nanosleep"][profile.Sleeping] != 300*ms || w["pipe_read"][profile.Sleeping] != 700*ms {
		t.Errorf("bucket 2 %v: want do_nanosleep 300ms (the end of the long wait) and pipe_read 700ms", w)
	}
	w = byFunc(l.Window(2, k, "app"))
	if w["do_nanosleep"][profile.Sleeping] != 1300*ms || w["pipe_read"][profile.Sleeping] != 700*ms {
		t.Errorf("both buckets %v: want do_nanosleep 1.3s and pipe_read 700ms", w)
	}
}

// A thread that moves on to a long wait has no sample of it until it ends:
// its time in the meantime is not the stack it last waited in, and Unseen
// lists it for its current stack. One whose waits end within the bucket
// (a sample since the latest tick) is not listed.
func TestLiveUnseenWaitInProgress(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	l := NewLive(a, 0, uint64(10*ms), 4)
	a.Add(liveSample(7, profile.Sleeping, 100*ms, 0xd)) // a short wait, ended
	a.Add(liveSample(8, profile.Sleeping, 100*ms, 0xd))
	a.Add(liveSample(9, profile.Sleeping, 100*ms, 0xd))
	first := []*ThreadRecord{liveThread(7, 0, 0, 100*ms), liveThread(8, 0, 0, 100*ms), liveThread(9, 0, 0, 100*ms)}
	if u := l.Unseen(first); len(u) != 0 {
		t.Errorf("unseen %v after samples of every wait", u)
	}
	l.Tick(first, uint64(time.Second))
	// Thread 7 sleeps on in a new wait (no sample yet); thread 8's waits
	// end and are sampled.
	a.Add(liveSample(8, profile.Sleeping, 900*ms, 0xd))
	// Thread 9's short wait ended and was sampled since the tick (a start
	// barrier), then it began a long one, 880 ms in at the next tick: its
	// 20 ms sample does not cover the 900 ms it gained.
	a.Add(liveSample(9, profile.Sleeping, 20*ms, 0xe))
	second := []*ThreadRecord{liveThread(7, 0, 0, time.Second), liveThread(8, 0, 0, time.Second), liveThread(9, 0, 0, time.Second)}
	u := l.Unseen(second)
	if u[7] != profile.Sleeping || u[9] != profile.Sleeping || len(u) != 2 {
		t.Errorf("unseen %v: want threads 7 and 9, sleeping", u)
	}
}

// TestLiveForget: a process that exited is forgotten whole (its samples,
// the stacks only it had, its threads' counts and its resolver), and the
// others' windows are what they were: a system-wide agent's memory follows
// the processes that run, not all that ever ran.
func TestLiveForget(t *testing.T) {
	const ms = time.Millisecond
	f := newFactory()
	a := NewAggregator(f.new)
	k := liveKernel()
	l := NewLive(a, 0, uint64(10*ms), 1)
	sec := uint64(time.Second)
	sample := func(pid, tid uint32, st profile.State, w time.Duration, leaf uint64) *RawSample {
		s := liveSample(tid, st, w, leaf)
		s.PID = pid
		return s
	}
	thread := func(pid, tid uint32, cpu, sleep time.Duration, exited bool) *ThreadRecord {
		r := liveThread(tid, cpu, 0, sleep)
		r.PID, r.Exited = pid, exited
		return r
	}
	// Process 1 runs on; process 2 shares a stack with it (compute) and
	// has one of its own (parse), then exits.
	a.Add(sample(2, 20, profile.Sleeping, 990*ms, 0xb))
	a.Add(sample(1, 10, profile.OnCPU, 10*ms, 0xa))
	a.Add(sample(2, 20, profile.OnCPU, 10*ms, 0xa))
	l.Tick([]*ThreadRecord{thread(1, 10, 10*ms, 990*ms, false), thread(2, 20, 10*ms, 990*ms, true)}, sec)
	if len(a.resolvers) != 2 || len(a.stacks) != 2 {
		t.Fatalf("before: %d resolvers, %d stacks; want 2 and 2", len(a.resolvers), len(a.stacks))
	}
	l.Forget(map[uint32]bool{2: true})
	if len(a.order) != 1 || len(a.entries) != 1 || len(a.stacks) != 1 || len(a.resolvers) != 1 || a.resolvers[2] != nil {
		t.Errorf("after: %d entries (%d keyed), %d stacks, resolvers %v: want process 1's one entry, its one stack, its resolver",
			len(a.order), len(a.entries), len(a.stacks), a.resolvers)
	}
	if _, ok := l.prevT[20]; ok || len(l.prev) != 1 || a.cpuNominal[20] != 0 || a.comm[20] != "" || a.lastAny[20] != nil {
		t.Errorf("thread 20 is still known: prevT %v, prev %d, cpuNominal %v", l.prevT, len(l.prev), a.cpuNominal)
	}
	// Later buckets: process 1 goes on, with a new stack whose number
	// must not be one the forgotten stack had left free.
	a.Add(sample(1, 10, profile.OnCPU, 10*ms, 0xa))
	a.Add(sample(1, 10, profile.Sleeping, 980*ms, 0xd))
	a.Add(sample(1, 10, profile.OnCPU, 10*ms, 0xc))
	l.Tick([]*ThreadRecord{thread(1, 10, 30*ms, 1970*ms, false)}, 2*sec)
	w := byFunc(l.Window(1, k, "app"))
	if w["compute"][profile.OnCPU] != 10*ms || w["do_nanosleep"][profile.OnCPU] != 10*ms || w["pipe_read"][profile.Sleeping] != 980*ms || len(w) != 3 {
		t.Errorf("process 1's window after the forgetting: %v; want compute and do_nanosleep 10ms on CPU, pipe_read 980ms asleep", w)
	}
	ids := map[uint32]bool{}
	for _, st := range a.stacks {
		if ids[st.id] {
			t.Errorf("two stacks numbered %d", st.id)
		}
		ids[st.id] = true
	}
}

// TestLiveCompact: a stack that no kept bucket has and that gained
// nothing lately is dropped (a long live recording holds its threads'
// recent stacks), the windows are unchanged, and when the stack comes
// back its time counts from then, not from its old total.
func TestLiveCompact(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	k := liveKernel()
	l := NewLive(a, 0, uint64(10*ms), 1)
	sec := uint64(time.Second)
	// Tick 1: compute (0xa) and parse (0xb); then parse alone.
	a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xa))
	a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xb))
	cpu := 20 * ms
	l.Tick([]*ThreadRecord{liveThread(7, cpu, 0, 0)}, sec)
	for i := uint64(2); i <= 5; i++ {
		a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xb))
		cpu += 10 * ms
		l.Tick([]*ThreadRecord{liveThread(7, cpu, 0, 0)}, i*sec)
		l.Compact(1)
	}
	if len(a.order) != 1 || len(a.stacks) != 1 {
		t.Fatalf("%d entries, %d stacks after compute's stack went idle: want parse's alone", len(a.order), len(a.stacks))
	}
	if w := byFunc(l.Window(1, k, "app")); w["parse"][profile.OnCPU] != 10*ms || len(w) != 1 {
		t.Errorf("window after compaction: %v, want parse 10ms", w)
	}
	// compute again: the bucket has its new 10 ms, not its old total.
	a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xa))
	cpu += 10 * ms
	l.Tick([]*ThreadRecord{liveThread(7, cpu, 0, 0)}, 6*sec)
	if w := byFunc(l.Window(1, k, "app")); w["compute"][profile.OnCPU] != 10*ms || len(w) != 1 {
		t.Errorf("window when compute comes back: %v, want compute 10ms", w)
	}
}

// A live view's tick that finds a thread woken from a long sleep but not
// on a CPU yet (/proc: R) does not count its sleep as runnable: the part
// since its latest resumption whose kind /proc does not say is left out
// until the resumption gives it. Counted as runnable, it was counted again
// as sleeping at the resumption (CI: the agent's windows added up to 168%
// of a crowd thread's life).
func TestSplitResumedLeavesRunnableOut(t *testing.T) {
	const ms = uint64(time.Millisecond)
	base := ThreadState{Based: true, InTS: 1000 * ms, LastExec: 50 * ms, RdOut: 7 * ms}
	st := base
	splitResumed(&st, 60*ms, 9*ms, 'S', 6000*ms)
	if st.Time[profile.OnCPU] != 10*ms || st.Time[profile.Runnable] != 2*ms || st.Time[profile.Sleeping] != 4988*ms {
		t.Errorf("asleep: %v, want 10ms on CPU, 2ms runnable, 4988ms sleeping", st.Time)
	}
	st = base
	splitResumed(&st, 60*ms, 9*ms, 'R', 6000*ms)
	if st.Time[profile.OnCPU] != 10*ms || st.Time[profile.Runnable] != 2*ms || st.Time[profile.Sleeping] != 0 {
		t.Errorf("woken: %v, want 10ms on CPU and the 2ms runnable that ended, the rest left out", st.Time)
	}
}

// A state's time that went down between two ticks (Peek's estimate of a
// wait in progress, corrected at the resumption) is not counted twice: the
// later tick counts only what passes the earlier total.
func TestLiveTimeThatWentDown(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	l := NewLive(a, 0, uint64(10*ms), 5)
	sec := uint64(time.Second)
	a.Add(liveSample(4, profile.Sleeping, 500*ms, 0xc))
	l.Tick([]*ThreadRecord{liveThread(4, 0, 0, 1000*ms)}, sec)
	// The wait in progress was left out (woken, not on a CPU yet).
	l.Tick([]*ThreadRecord{liveThread(4, 0, 0, 900*ms)}, 2*sec)
	// Resumed: its exact times.
	a.Add(liveSample(4, profile.Sleeping, 1500*ms, 0xc))
	l.Tick([]*ThreadRecord{liveThread(4, 0, 10*ms, 2990*ms)}, 3*sec)
	var total time.Duration
	for _, s := range l.Window(3, liveKernel(), "app").Samples {
		total += time.Duration(s.Value)
	}
	if total != 3*time.Second {
		t.Errorf("three buckets of one thread add up to %v, want 3s", total)
	}
}

// Under the budget of off-CPU stacks a thread's short waits are sampled in
// part, one period each (thin samples): the bucket's time in the state that
// no sample covers, less the wait in progress (which goes to the stack the
// thread was last seen waiting in, and is carried), goes to the thin
// samples in proportion, not all to the latest stack.
func TestLiveScalesThinSamples(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	k := liveKernel()
	l := NewLive(a, 0, uint64(10*ms), 5)
	sec := uint64(time.Second)
	thin := func(leaf uint64) *RawSample {
		s := liveSample(5, profile.Sleeping, 10*ms, leaf)
		s.Thin = true
		return s
	}
	// Bucket 1: 400 ms asleep, of which 40 ms in a wait still in
	// progress (at pipe_read, the latest stack); four thin samples taken
	// of the short waits' periods, one at do_nanosleep and three at
	// pipe_read.
	a.Add(thin(0xc))
	for range 3 {
		a.Add(thin(0xd))
	}
	th := liveThread(5, 0, 0, 400*ms)
	th.Waiting[profile.Sleeping] = uint64(40 * ms)
	l.Tick([]*ThreadRecord{th}, sec)
	w := byFunc(l.Window(1, k, "app"))
	// 360 ms uncovered: 40 the wait in progress (pipe_read), 320 to the
	// thin samples, a quarter and three quarters.
	if w["do_nanosleep"][profile.Sleeping] != 90*ms || w["pipe_read"][profile.Sleeping] != 310*ms {
		t.Errorf("bucket 1 %v: want do_nanosleep 90ms and pipe_read 310ms (not 10 and 390: all the uncovered time to the latest stack)", w)
	}
	// Bucket 2: the wait in progress ends after 60 ms (its exact sample:
	// the 40 ms bucket 1 counted and 20 of bucket 2's).
	a.Add(liveSample(5, profile.Sleeping, 60*ms, 0xd))
	l.Tick([]*ThreadRecord{liveThread(5, 0, 0, 420*ms)}, sec+uint64(20*ms))
	w = byFunc(l.Window(1, k, "app"))
	if w["pipe_read"][profile.Sleeping] != 20*ms || len(w) != 1 {
		t.Errorf("bucket 2 %v: want pipe_read 20ms alone (the wait's 40 ms in bucket 1 not counted twice)", w)
	}
}

// A thread's exit path (an exact entry, RawSample.Exact) keeps its time in
// a live bucket, under do_exit; the thread's timer samples of the bucket
// share the rest of its on-CPU time.
func TestLiveKeepsExitPathTime(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	k := liveKernel()
	l := NewLive(a, 0, uint64(10*ms), 5)
	for range 2 {
		a.Add(liveSample(5, profile.OnCPU, 10*ms, 0xa))
	}
	a.Add(&RawSample{PID: 1, TID: 5, Comm: "app", Exact: true, Kernel: []uint64{ExitPathPC},
		Weight: [profile.NumStates]uint64{profile.OnCPU: uint64(3 * ms)}})
	th := liveThread(5, 33*ms, 0, 0)
	th.Exited = true
	l.Tick([]*ThreadRecord{th}, uint64(time.Second))
	w := byFunc(l.Window(1, k, "app"))
	if w[ExitPathFunction][profile.OnCPU] != 3*ms || w["compute"][profile.OnCPU] != 30*ms {
		t.Errorf("window %v: want do_exit 3ms and compute 30ms (the exit path's time kept, the rest to the timer's samples)", w)
	}
}
