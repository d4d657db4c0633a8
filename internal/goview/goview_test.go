package goview

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/profile"
)

func loc(fns ...string) *profile.Location {
	l := &profile.Location{}
	for _, f := range fns {
		l.Frames = append(l.Frames, profile.Frame{Function: f})
	}
	return l
}

var kmap = &profile.Mapping{Kernel: true, File: "[kernel.kallsyms]"}

func kloc(fn string) *profile.Location {
	return &profile.Location{Mapping: kmap, Frames: []profile.Frame{{Function: fn}}}
}

func TestGoroutineFunc(t *testing.T) {
	for _, tc := range []struct {
		stack       []*profile.Location
		start, fn   string
		isGoroutine bool
	}{
		// go s.run(g, f): the wrapper calls run, which the goroutine is.
		{[]*profile.Location{loc("main.compute"), loc("main.(*spawner).run"), loc("main.startCompute.gowrap1"), loc("runtime.goexit")},
			"main.startCompute.gowrap1", "main.(*spawner).run", true},
		// Inlined frames count, kernel frames do not.
		{[]*profile.Location{kloc("do_syscall_64"), loc("syscall.read", "main.reader"), loc("runtime.goexit")},
			"main.reader", "main.reader", true},
		// The scheduler's g0 stack is no goroutine's.
		{[]*profile.Location{loc("runtime.findRunnable"), loc("runtime.schedule"), loc("runtime.mstart")}, "", "", false},
		// A goroutine caught before it started: only its wrapper.
		{[]*profile.Location{loc("net/http.(*Server).Serve.gowrap3"), loc("runtime.goexit")},
			"net/http.(*Server).Serve.gowrap3", "net/http.(*Server).Serve.gowrap3", true},
	} {
		start, ok := goroutineStart(tc.stack)
		fn, _ := goroutineFunc(tc.stack, isGoWrapper)
		if ok != tc.isGoroutine || start != tc.start || fn != tc.fn {
			t.Errorf("%v: start %q fn %q ok %v; want %q %q %v", tc.stack, start, fn, ok, tc.start, tc.fn, tc.isGoroutine)
		}
	}
	for fn, want := range map[string]bool{"a.F.gowrap1": true, "a.F.gowrap12": true, "a.F.gowrapx": false, "a.F.func1": false, "gowrap1": false} {
		if isGoWrapper(fn) != want {
			t.Errorf("isGoWrapper(%q) != %v", fn, want)
		}
	}
}

func TestResolveWrappers(t *testing.T) {
	running := &profile.GoSample{Stack: []*profile.Location{loc("main.work"), loc("main.F.gowrap1"), loc("runtime.goexit")}, Func: "main.work", Value: 5}
	unstarted := &profile.GoSample{Stack: []*profile.Location{loc("main.F.gowrap1"), loc("runtime.goexit")}, Func: "main.F.gowrap1", Value: 1}
	resolveWrappers([]*profile.GoSample{running, unstarted}, isGoWrapper)
	if unstarted.Func != "main.work" {
		t.Errorf("a goroutine caught before it started: %q, want main.work", unstarted.Func)
	}
}

func TestInSyscall(t *testing.T) {
	if !inSyscall([]*profile.Location{kloc("ksys_read"), kloc("do_syscall_64"), loc("syscall.Syscall")}) {
		t.Error("a read in the kernel is a system call")
	}
	if inSyscall([]*profile.Location{kloc("irqentry_exit_to_user_mode"), loc("main.compute")}) {
		t.Error("a preemption is not a system call")
	}
}

func TestRuntimeSyscall(t *testing.T) {
	marked := []*profile.Location{kloc("ksys_read"), kloc("do_syscall_64"), loc("internal/runtime/syscall.Syscall6"),
		loc("syscall.RawSyscall6"), loc("syscall.Syscall"), loc("main.read"), loc("runtime.goexit")}
	if !runtimeSyscall(marked) {
		t.Error("a read through syscall.Syscall is one the runtime marks (_Gsyscall): the snapshots charge it")
	}
	raw := []*profile.Location{kloc("__x64_sys_clock_gettime"), kloc("do_syscall_64"), loc("internal/runtime/syscall.Syscall6"),
		loc("syscall.RawSyscall6"), loc("main.cpuTime"), loc("runtime.goexit")}
	if runtimeSyscall(raw) {
		t.Error("a raw system call leaves the goroutine _Grunning: only the thread samples see its time")
	}
	if runtimeSyscall([]*profile.Location{kloc("irqentry_exit_to_user_mode"), loc("syscall.Syscall")}) {
		t.Error("a preemption is not a system call")
	}
}

func TestGroups(t *testing.T) {
	gs := []*profile.GoSample{
		{GoID: 1, Func: "runtime.main", State: profile.GWaiting, WaitReason: "select", Value: 10},
		{GoID: 7, CreatedBy: "main.start", Func: "main.worker", State: profile.GWaiting, WaitReason: "chan receive", Value: 30},
		{GoID: 8, CreatedBy: "main.start", Func: "main.worker", State: profile.GWaiting, WaitReason: "sleep", Value: 10},
		{GoID: 8, CreatedBy: "main.start", Func: "main.worker", State: profile.GRunnable, Value: 5},
		{CreatedBy: "main.start", Func: "main.worker", State: profile.GRunning, Value: 5},
	}
	g := profile.Groups(gs)
	if len(g) != 2 || g[0].Key != "created by main.start" || g[0].Goroutines != 2 || g[0].Total != 50 ||
		g[0].Time[profile.GRunning] != 5 || g[0].Reasons["chan receive"] != 30 || g[0].Func != "main.worker" {
		t.Fatalf("groups %+v", g)
	}
	if g[1].Key != "main goroutine" || g[1].Goroutines != 1 {
		t.Errorf("main goroutine group %+v", g[1])
	}
}

// fakeResolver names addresses from a table.
type fakeResolver map[uint64]string

func (f fakeResolver) Resolve(addr uint64) (*profile.Mapping, []profile.Frame) {
	return &profile.Mapping{File: "/srv/app", Start: 0x400000, Limit: 0x800000}, []profile.Frame{{Function: f[addr]}}
}

// Attach turns the snapshots' entries and the thread samples of the window
// into the goroutine view.
func TestAttach(t *testing.T) {
	res := fakeResolver{0x1000: "runtime.gopark", 0x1fff: "main.wait", 0x2fff: "runtime.goexit"}
	app := &profile.Mapping{ID: 1, File: "/srv/app", Start: 0x400000, Limit: 0x800000}
	l := func(addr uint64, fn string) *profile.Location {
		return &profile.Location{Address: addr, Mapping: app, Frames: []profile.Frame{{Function: fn}}}
	}
	goexit := l(0x2fff, "runtime.goexit")
	compute := l(0x3fff, "main.compute")
	p := &profile.Profile{Mappings: []*profile.Mapping{app}}
	p.Samples = []*profile.Sample{{PID: 9, TID: 10, State: profile.OnCPU, Stack: []*profile.Location{compute, goexit}, Value: 100}}
	p.Locs = []*profile.Location{goexit, compute}
	for i, l := range p.Locs {
		l.ID = uint64(i + 1)
	}
	threads := &profile.Profile{Samples: []*profile.Sample{
		// Running goroutine 5 (the snapshot had it on thread 10).
		{PID: 9, TID: 10, Thread: "app", GoID: 5, State: profile.OnCPU, Stack: []*profile.Location{l(0x3fff, "main.compute"), l(0x2fff, "runtime.goexit")}, Value: 60},
		// Its thread waiting for a CPU: the goroutine is runnable.
		{PID: 9, TID: 10, Thread: "app", State: profile.Runnable, Stack: []*profile.Location{l(0x3fff, "main.compute"), l(0x2fff, "runtime.goexit")}, Value: 20},
		// In a system call the runtime marks (_Gsyscall): left to the snapshots.
		{PID: 9, TID: 11, State: profile.OnCPU, Stack: []*profile.Location{kloc("do_syscall_64"), l(0x4ffe, "syscall.Syscall"), l(0x4fff, "main.read"), l(0x2fff, "runtime.goexit")}, Value: 7},
		// The scheduler, and another process: not goroutines of this one.
		{PID: 9, TID: 12, State: profile.OnCPU, Stack: []*profile.Location{l(0x5fff, "runtime.schedule"), l(0x6fff, "runtime.mstart")}, Value: 9},
		{PID: 8, TID: 13, State: profile.OnCPU, Stack: []*profile.Location{l(0x3fff, "main.compute"), l(0x2fff, "runtime.goexit")}, Value: 11},
	}}
	s := &Sampler{pid: 9, funcs: map[string]map[string]int{"main.compute": {"main.start": 1}},
		byID: map[uint64]*known{5: {start: "main.compute", createdBy: "main.start", labels: map[string]string{"k": "v"}}}}
	s.order = []*entry{{goid: 6, state: profile.GWaiting, reason: "chan receive", stack: []uint64{0x1000, 0x2000, 0x3000}, value: 50,
		createdBy: "main.start", goFunction: "main.wait"}}
	s.info.Version = "go1.26.0"
	s.Attach(p, threads, res)
	if len(p.Goroutines) != 3 {
		t.Fatalf("%d goroutine samples, want 3 (parked, running, runnable)", len(p.Goroutines))
	}
	parked, run, runnable := p.Goroutines[0], p.Goroutines[1], p.Goroutines[2]
	if parked.GoID != 6 || parked.WaitReason != "chan receive" || parked.Func != "main.wait" || len(parked.Stack) != 3 ||
		parked.Stack[0].Frames[0].Function != "runtime.gopark" || parked.Stack[2] != goexit {
		t.Errorf("parked goroutine %+v (its root must reuse the thread view's location)", parked)
	}
	if run.State != profile.GRunning || run.GoID != 5 || run.Labels["k"] != "v" || run.Value != 60 || run.Stack[0] != compute {
		t.Errorf("running goroutine %+v", run)
	}
	if runnable.State != profile.GRunnable || runnable.GoID != 0 || runnable.CreatedBy != "main.start" || runnable.Value != 20 {
		t.Errorf("runnable goroutine %+v", runnable)
	}
	if p.GoInfo == nil || p.GoInfo.Version != "go1.26.0" {
		t.Errorf("GoInfo %+v", p.GoInfo)
	}
	for i, l := range p.Locs {
		if l.ID != uint64(i+1) {
			t.Fatalf("location %d has ID %d", i, l.ID)
		}
	}
}

// add charges each goroutine of a chunk to the entry of its (goroutine,
// state, reason, labels, stack); a goroutine parked where it was reuses its
// slot's entry, and a new goroutine in a reused slot gets its own.
func TestAdd(t *testing.T) {
	s := &Sampler{entries: map[string]*entry{}, funcs: map[string]map[string]int{}, seen: map[uint64]bool{}, byID: map[uint64]*known{}}
	parked := []uint64{0x1000, 0x2000}
	other := []uint64{0x1000, 0x3000}
	labels := []goroutines.Label{{Key: "k", Value: "v"}}
	running := map[int]uint64{}
	chan1 := goroutines.Goroutine{ID: 7, Slot: 0, Status: goroutines.Waiting, WaitReason: "chan receive", Stack: parked}
	sleep := goroutines.Goroutine{ID: 8, Slot: 1, Status: goroutines.Waiting, WaitReason: "sleep", Stack: other, Labels: labels}
	onCPU := goroutines.Goroutine{ID: 9, Slot: 2, Status: goroutines.Running, TID: 42}
	s.add([]goroutines.Goroutine{chan1, sleep, onCPU}, 10, running)
	s.add([]goroutines.Goroutine{chan1, sleep}, 10, running)
	// The same stack read again (an equal, not the same, slice): same entry.
	again := chan1
	again.Stack = append([]uint64(nil), parked...)
	s.add([]goroutines.Goroutine{again}, 5, running)
	// Goroutine 7 woke and now waits in select; goroutine 8's labels changed;
	// goroutine 9 exited and its g was reused by goroutine 10.
	sel := chan1
	sel.WaitReason = "select"
	relabeled := sleep
	relabeled.Labels = []goroutines.Label{{Key: "k", Value: "w"}}
	reused := goroutines.Goroutine{ID: 10, Slot: 2, Status: goroutines.Waiting, WaitReason: "chan receive", Stack: parked}
	s.add([]goroutines.Goroutine{sel, relabeled, reused}, 1, running)

	if running[42] != 9 {
		t.Errorf("running %v, want thread 42 running goroutine 9", running)
	}
	type want struct {
		goid   uint64
		reason string
		label  string
		value  int64
	}
	var got []want
	for _, e := range s.order {
		got = append(got, want{e.goid, e.reason, e.labels["k"], e.value})
	}
	exp := []want{{7, "chan receive", "", 25}, {8, "sleep", "v", 20}, {7, "select", "", 1}, {8, "sleep", "w", 1}, {10, "chan receive", "", 1}}
	if !slices.Equal(got, exp) {
		t.Errorf("entries\n got %v\nwant %v", got, exp)
	}
	if len(s.seen) != 4 {
		t.Errorf("%d goroutines seen, want 4", len(s.seen))
	}
}

// fakeClock is a clock whose time moves only when the sampler waits or a
// fake snapshot takes time. Once it reaches end, it stops: After never
// fires, and ended is closed.
type fakeClock struct {
	mu       sync.Mutex
	now, end time.Time
	cpu      time.Duration
	noCPU    bool // a thread CPU clock that cannot be read
	ended    chan struct{}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) ThreadCPU() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noCPU {
		return 0
	}
	return c.cpu
}

// advance moves wall time by wall and the thread's CPU time by cpu.
func (c *fakeClock) advance(wall, cpu time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.now.Before(c.end) {
		return
	}
	c.now = c.now.Add(wall)
	c.cpu += cpu
	if !c.now.Before(c.end) {
		c.now = c.end
		close(c.ended)
	}
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.advance(d, 0)
	if !c.Now().Before(c.end) {
		return nil // the recording has ended: wait for Stop
	}
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// fakeTable is a goroutine table of one parked goroutine whose reads take
// 150 µs of CPU, and as much wall time but for read number slow, which
// waits for a CPU for stall.
type fakeTable struct {
	c     *fakeClock
	reads int
	slow  int
	stall time.Duration
}

func (f *fakeTable) SnapshotChunks(n int, each func([]goroutines.Goroutine, bool)) (goroutines.Snapshot, error) {
	f.reads++
	wall := 150 * time.Microsecond
	if f.reads == f.slow {
		wall += f.stall
	}
	f.c.advance(wall, 150*time.Microsecond)
	gs := []goroutines.Goroutine{{ID: 1, Status: goroutines.Waiting, WaitReason: "chan receive", Stack: []uint64{0x1000, 0x2000}}}
	each(gs, false)
	return goroutines.Snapshot{Goroutines: gs}, nil
}

// sample runs the sampler over a fake recording of d whose read number
// slow waits stall for a CPU, and returns the profile's GoInfo.
func sample(t *testing.T, d time.Duration, slow int, stall time.Duration, noCPU bool) *profile.GoInfo {
	t.Helper()
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c := &fakeClock{now: start, end: start.Add(d), cpu: time.Second, noCPU: noCPU, ended: make(chan struct{})}
	s := newSampler(1, &fakeTable{c: c, slow: slow, stall: stall}, c, 10*time.Millisecond)
	s.active.Store(true)
	go s.loop()
	<-c.ended
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	p := &profile.Profile{Start: start, Duration: d}
	s.Attach(p, p, nil)
	var charged int64
	for _, g := range p.Goroutines {
		charged += g.Value
	}
	if p.GoInfo == nil || time.Duration(charged) != p.GoInfo.Covered {
		t.Fatalf("GoInfo %+v: the goroutine was charged %v", p.GoInfo, time.Duration(charged))
	}
	return p.GoInfo
}

// The snapshots' coverage is the time they charged.
func TestCoverage(t *testing.T) {
	const d = 5 * time.Second
	g := sample(t, d, 0, 0, false)
	c, ok := g.Coverage(d)
	t.Logf("%d snapshots every %v, covered %v (%.1f%%), longest gap %v", g.Snapshots, g.Interval, g.Covered, 100*c, g.LongestGap)
	if !ok || c < 0.99 || g.LowCoverage(d) || g.LongestGap > 30*time.Millisecond {
		t.Errorf("covered %v of %v (%.1f%%), longest gap %v", g.Covered, d, 100*c, g.LongestGap)
	}
}

// A snapshot that waits 90 ms for a CPU (it used 150 µs) does not stop the
// snapshots: they are paced by the CPU time they use. Paced by wall time,
// as before, the sampler waited 50 times 90 ms, past the end of the 5 s
// recording, which its 30 snapshots covered only the first 0.6 s of (the
// caddy recording that was read 30 times covered 0.86 s).
func TestPacedByCPUTime(t *testing.T) {
	const d = 5 * time.Second
	g := sample(t, d, 30, 90*time.Millisecond, false)
	c, ok := g.Coverage(d)
	t.Logf("CPU-paced: %d snapshots every %v, covered %v (%.1f%%), longest gap %v", g.Snapshots, g.Interval, g.Covered, 100*c, g.LongestGap)
	if !ok || c < 0.99 || g.LowCoverage(d) || g.LongestGap > 100*time.Millisecond {
		t.Errorf("CPU-paced: covered %v of %v (%.1f%%), longest gap %v", g.Covered, d, 100*c, g.LongestGap)
	}
	// 400 µs of CPU a snapshot (150 µs reading, 250 µs pausing) is 2% of
	// 20 ms.
	if g.Interval < 19*time.Millisecond || g.Interval > 21*time.Millisecond {
		t.Errorf("interval %v, want 20ms", g.Interval)
	}

	// Without a thread CPU clock, wall time paces them, as before.
	g = sample(t, d, 30, 90*time.Millisecond, true)
	c, ok = g.Coverage(d)
	t.Logf("wall-paced: %d snapshots every %v, covered %v (%.1f%%), longest gap %v", g.Snapshots, g.Interval, g.Covered, 100*c, g.LongestGap)
	if !ok || c > 0.15 || !g.LowCoverage(d) || g.Snapshots != 30 || g.LongestGap < 4*time.Second {
		t.Errorf("wall-paced: %d snapshots covered %v of %v (%.1f%%), longest gap %v; want 30 covering 0.6s",
			g.Snapshots, g.Covered, d, 100*c, g.LongestGap)
	}
}

func TestWaitAfter(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ busy, elapsed, want time.Duration }{
		{400 * time.Microsecond, 150 * time.Microsecond, 20*ms - 150*time.Microsecond}, // the budget: 2% of one CPU
		{100 * time.Microsecond, 0, 10 * ms},                                           // the interval
		{2 * ms, 30 * ms, 70 * ms},                                                     // a costly read
		{400 * time.Microsecond, 80 * ms, 0},                                           // a read that waited for a CPU: at once
	} {
		if got := waitAfter(10*ms, tc.busy, tc.elapsed); got != tc.want {
			t.Errorf("waitAfter(10ms, %v, %v) = %v, want %v", tc.busy, tc.elapsed, got, tc.want)
		}
	}
	if got := pauseAfter(ms); got != 49*ms {
		t.Errorf("pauseAfter(1ms) = %v, want 49ms", got)
	}
}

// TestAttachFrom: a launched command's recording began before the command
// exec'ed (From): that time is Before, left out of the coverage, and the
// longest gap counts from the exec, not from the recording's start.
func TestAttachFrom(t *testing.T) {
	start := time.Unix(1000, 0)
	s := &Sampler{funcs: map[string]map[string]int{}, byID: map[uint64]*known{}}
	s.info.Snapshots, s.info.Covered = 90, 1800*time.Millisecond
	s.firstAt = start.Add(210 * time.Millisecond)
	s.lastAt = start.Add(1990 * time.Millisecond)
	s.maxGap = 30 * time.Millisecond
	p := &profile.Profile{Start: start, Duration: 2 * time.Second}
	s.Attach(p, &profile.Profile{}, fakeResolver{})
	g := p.GoInfo
	if c, _ := g.Coverage(p.Duration); g.Before != 0 || g.LongestGap != 210*time.Millisecond || c != 0.9 {
		t.Errorf("attached: before %v, longest gap %v, coverage %.3f; want 0, 210ms, 0.9", g.Before, g.LongestGap, c)
	}

	s.From(start.Add(200 * time.Millisecond))
	s.Attach(p, &profile.Profile{}, fakeResolver{})
	g = p.GoInfo
	if c, _ := g.Coverage(p.Duration); g.Before != 200*time.Millisecond || g.LongestGap != 30*time.Millisecond || c != 1 ||
		g.Span(p.Duration) != 1800*time.Millisecond || g.SpanText() != "since the command started" {
		t.Errorf("launched: before %v, longest gap %v, coverage %.3f, span %v %q; want 200ms, 30ms, 1, 1.8s",
			g.Before, g.LongestGap, c, g.Span(p.Duration), g.SpanText())
	}
}
