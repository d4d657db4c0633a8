package record

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/goview"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
)

// These tests run the recording sequence against a fake session, goroutine
// view and kernel, without root: they check what must happen in order.

// world is the fake outside world of one test, with a log of the calls
// that matter for order.
type world struct {
	mu  sync.Mutex
	log []string

	seedErr error
	exists  bool
	gone    map[int]bool // processes that do not exist, whatever exists says
	// exes are what /proc/PID/exe says, call after call (the last one
	// stays).
	exes []string
	// snaps are the threads' current stacks (SnapshotThreads).
	snaps []collect.ThreadSnapshot
	// goroutinesErr, when set, is what starting the goroutine view returns.
	goroutinesErr error

	s *fakeSession
	g *fakeSampler
}

func (w *world) record(what string) {
	w.mu.Lock()
	w.log = append(w.log, what)
	w.mu.Unlock()
}

func (w *world) index(what string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Index(w.log, what)
}

func (w *world) deps() deps {
	return deps{
		open: func(p collect.Plan) (session, error) {
			w.record("open")
			w.record(fmt.Sprintf("plan %v", p.PIDs))
			w.s = &fakeSession{w: w, samples: make(chan *collect.RawSample), acks: make(chan struct{}), done: make(chan struct{}), running: make(chan struct{})}
			return w.s, nil
		},
		goroutines: func(pid int, interval time.Duration, exe *goroutines.Exe) (goSampler, error) {
			w.record("goroutines.start")
			if w.goroutinesErr != nil {
				return nil, w.goroutinesErr
			}
			w.g = &fakeSampler{w: w, goid: map[int]uint64{11: 7}}
			return w.g, nil
		},
		kernel: func() (collect.KernelResolver, error) { return fakeKernel{}, nil },
		exists: func(p int) bool { return w.exists && !w.gone[p] },
		snapshot: func(pid int) ([]collect.ThreadSnapshot, error) {
			w.record("snapshot")
			return w.snaps, nil
		},
		exe: func(int) string {
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.exes) == 0 {
				return ""
			}
			e := w.exes[0]
			if len(w.exes) > 1 {
				w.exes = w.exes[1:]
			}
			return e
		},
	}
}

type fakeSession struct {
	w       *world
	samples chan *collect.RawSample
	acks    chan struct{}
	running chan struct{}
	done    chan struct{}
	result  *collect.Result
	// final is sent to the sink while Stop drains, like the stacks of the
	// threads still off CPU at the end.
	final *collect.RawSample
	// forgot are the processes Forget was given, call by call.
	forgot []map[uint32]bool
	// peek and now are what Peek returns.
	peek []*collect.ThreadRecord
	now  uint64
}

func (s *fakeSession) SeedThreads(pid int) error {
	s.w.record("seed")
	s.w.record(fmt.Sprintf("seed %d", pid))
	return s.w.seedErr
}

func (s *fakeSession) Run(sink func(*collect.RawSample)) {
	s.w.record("run")
	close(s.running)
	for x := range s.samples {
		sink(x)
		s.acks <- struct{}{}
	}
	close(s.done)
}

func (s *fakeSession) SeedAll() error {
	s.w.record("seed-all")
	return s.w.seedErr
}

func (s *fakeSession) SetReadInterval(time.Duration)      { s.w.record("read-interval") }
func (s *fakeSession) OnExec(func(uint32))                {}
func (s *fakeSession) OnFold(func(pid, tid, into uint32)) {}
func (s *fakeSession) Forget(pids map[uint32]bool)        { s.forgot = append(s.forgot, pids) }
func (s *fakeSession) Counts() (uint64, uint64)           { return 0, 0 }
func (s *fakeSession) Close()                             { s.w.record("close") }
func (s *fakeSession) StartNs() uint64                    { return 0 }
func (s *fakeSession) Drain()                             { s.w.record("drain") }
func (s *fakeSession) TrackUnwind(pid uint32, _ collect.UnwindSource) {
	s.w.record(fmt.Sprintf("unwind %d", pid))
}
func (s *fakeSession) TrackUnwindLater(pid uint32, _ collect.UnwindSource) {
	s.w.record(fmt.Sprintf("unwind-later %d", pid))
}
func (s *fakeSession) UnwindStats() (collect.UnwindStats, bool) { return collect.UnwindStats{}, false }
func (s *fakeSession) Peek() ([]*collect.ThreadRecord, uint64, error) {
	s.w.record("peek")
	return s.peek, s.now, nil
}

func (s *fakeSession) Stop() (*collect.Result, error) {
	s.w.record("session.stop")
	if s.final != nil {
		s.samples <- s.final
		<-s.acks
	}
	close(s.samples)
	<-s.done
	return s.result, nil
}

// send passes a sample to the recording as the ring buffer would.
func (s *fakeSession) send(x *collect.RawSample) {
	<-s.running
	s.samples <- x
	<-s.acks // added
}

type fakeSampler struct {
	w       *world
	goid    map[int]uint64
	stopped bool
	threads *profile.Profile // what Attach was given
}

func (g *fakeSampler) Active() bool   { return !g.stopped }
func (g *fakeSampler) From(time.Time) {}
func (g *fakeSampler) Running(tid int) uint64 {
	return g.goid[tid]
}
func (g *fakeSampler) Stop() error {
	g.w.record("goroutines.stop")
	g.stopped = true
	return nil
}
func (g *fakeSampler) Attach(p, threads *profile.Profile, r goview.Resolver) {
	g.threads = threads
}
func (g *fakeSampler) Mark(keep int) { g.w.record("goroutines.mark") }
func (g *fakeSampler) AttachWindow(p, threads *profile.Profile, r goview.Resolver, n int) {
	g.threads = threads
}

type fakeKernel struct{}

func (fakeKernel) Resolve(addr uint64) profile.Frame {
	return profile.Frame{Function: map[uint64]string{0xa: "compute", 0xb: "parse", 0xc: "do_nanosleep"}[addr]}
}
func (fakeKernel) KernelMapping() *profile.Mapping {
	return &profile.Mapping{File: "[kernel.kallsyms]"}
}

const (
	pid    = 10
	tid    = 11
	period = uint64(10 * time.Millisecond)
)

func onCPU(leaf uint64) *collect.RawSample {
	s := &collect.RawSample{PID: pid, TID: tid, Comm: "app", Kernel: []uint64{leaf}}
	s.Weight[profile.OnCPU] = period
	return s
}

func result(cpu time.Duration) *collect.Result {
	t := &collect.ThreadRecord{PID: pid, TID: tid, Name: "app", EndNs: uint64(time.Second)}
	t.Time[profile.OnCPU] = uint64(cpu)
	t.Time[profile.Sleeping] = uint64(time.Second - cpu)
	return &collect.Result{EndNs: uint64(time.Second), PeriodNs: period, Threads: []*collect.ThreadRecord{t}}
}

var opts = Options{Freq: 100, Goroutines: true, Command: "app", Program: linux.Program{Path: "/app", Exe: "/app"}}

func TestStartSeedsBeforeReading(t *testing.T) {
	w := &world{exists: true}
	r, err := start([]int{pid}, opts, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	<-w.s.running
	open, seed, run := w.index("open"), w.index("seed"), w.index("run")
	if open < 0 || !(open < seed && seed < run) {
		t.Errorf("calls %v: want open, then seed, then run", w.log)
	}
	// The goroutine view of a target that is not gated starts before
	// Start returns, and the ring is then read often, for the marks.
	if g, ri := w.index("goroutines.start"), w.index("read-interval"); g < 0 || ri < g {
		t.Errorf("calls %v: want the goroutine view started, then the read interval shortened", w.log)
	}
	r.Close()
}

// TestStartPIDs: several processes in one session, each seeded, the
// profile named after all of them.
func TestStartPIDs(t *testing.T) {
	w := &world{exists: true}
	o := opts
	o.Command = ""
	r, err := start([]int{pid, 200, 300}, o, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	<-w.s.running
	for _, want := range []string{fmt.Sprintf("plan [%d 200 300]", pid), fmt.Sprintf("seed %d", pid), "seed 200", "seed 300"} {
		if w.index(want) < 0 {
			t.Errorf("calls %v: no %q", w.log, want)
		}
	}
	if got := r.PIDs(); !slices.Equal(got, []int{pid, 200, 300}) {
		t.Errorf("PIDs() = %v", got)
	}
	if !strings.HasPrefix(r.Command(), fmt.Sprintf("%d: ", pid)) || !strings.Contains(r.Command(), "; 300: ") {
		t.Errorf("Command() = %q, want every process named", r.Command())
	}
	r.Close()
}

func TestStartExitedTarget(t *testing.T) {
	w := &world{seedErr: errors.New("seed: no such process"), exists: false}
	_, err := start([]int{pid}, opts, w.deps())
	if !errors.Is(err, ErrExited) {
		t.Fatalf("err = %v, want ErrExited", err)
	}
	if w.index("close") < 0 || w.index("run") >= 0 {
		t.Errorf("calls %v: want the session closed and never read", w.log)
	}
	// A target that still exists: the error is the seed's.
	w = &world{seedErr: errors.New("seed: permission denied"), exists: true}
	if _, err := start([]int{pid}, opts, w.deps()); err == nil || errors.Is(err, ErrExited) {
		t.Fatalf("err = %v, want the seed error", err)
	}
}

// TestStopOrder: the goroutine view stops before the session, so that the
// final stacks, which the session drains as it stops, are not marked with a
// snapshot that no longer runs; the window's samples weigh what the whole
// recording's do; notes added after Stop reach the profile.
func TestStopOrder(t *testing.T) {
	w := &world{exists: true}
	r, err := start([]int{pid}, opts, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	w.s.result = result(30 * time.Millisecond) // 3 periods of CPU for 2 samples: ×1.5
	w.s.send(onCPU(0xa))                       // in the window, goroutine 7
	w.s.final = onCPU(0xb)                     // drained at the end: not in the window
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if gs, ss := w.index("goroutines.stop"), w.index("session.stop"); gs < 0 || gs > ss {
		t.Errorf("calls %v: want the goroutine view stopped before the session", w.log)
	}
	if err := r.Stop(); err != nil || strings.Count(strings.Join(w.log, " "), "session.stop") != 1 {
		t.Errorf("a second Stop: err %v, calls %v; want nothing done", err, w.log)
	}
	r.Note("target process %d exited during the recording", pid)
	p, err := r.Profile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Notes, "target process 10 exited during the recording") {
		t.Errorf("notes %q: want the note added after Stop", p.Notes)
	}
	whole := map[string]int64{}
	for _, s := range p.Samples {
		if s.State == profile.OnCPU {
			whole[s.Stack[0].Frames[0].Function] += s.Value
		}
	}
	if whole["compute"]+whole["parse"] != int64(30*time.Millisecond) || whole["compute"] != int64(15*time.Millisecond) {
		t.Errorf("on-CPU time %v: want compute 15ms and parse 15ms, the thread's exact 30ms", whole)
	}
	threads := w.g.threads
	if threads == nil {
		t.Fatal("the goroutine view was not attached")
	}
	var window []*profile.Sample
	for _, s := range threads.Samples {
		if s.State == profile.OnCPU {
			window = append(window, s)
		}
	}
	if len(window) != 1 {
		t.Fatalf("window on-CPU samples %d, want 1 (the final stack came after the goroutine view stopped)", len(window))
	}
	if s := window[0]; s.GoID != 7 || s.Stack[0].Frames[0].Function != "compute" || s.Value != whole["compute"] {
		t.Errorf("window sample goid %d %s %v: want goroutine 7 in compute, weighing what the whole recording gives it (%v)",
			s.GoID, s.Stack[0].Frames[0].Function, time.Duration(s.Value), time.Duration(whole["compute"]))
	}
	if _, err := r.Profile(); err == nil {
		t.Error("a second Profile: want an error")
	}
}

func TestProfileBeforeStop(t *testing.T) {
	w := &world{exists: true}
	r, err := start([]int{pid}, opts, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Profile(); err == nil {
		t.Error("Profile before Stop: want an error")
	}
	r.Close()
}

// TestGatedWaitsForExec: a launched command's goroutine view looks at the
// process only once it has exec'ed past the gate, and never at the shell.
func TestGatedWaitsForExec(t *testing.T) {
	w := &world{exists: true, exes: []string{"/bin/sh", "/bin/sh", "/bin/sh", "/bin/sh", "/app"}}
	o := opts
	o.Gated = true
	r, err := start([]int{pid}, o, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.index("goroutines.start") < 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second start, if any
	w.mu.Lock()
	starts := strings.Count(strings.Join(w.log, " "), "goroutines.start")
	w.mu.Unlock()
	if starts != 1 {
		t.Errorf("calls %v: want the goroutine view started once, after the exec", w.log)
	}
	r.Close()
}

// TestNoGoroutineView: a failure to read a Go program's goroutines is a
// note, and the recording goes on without them.
func TestNoGoroutineView(t *testing.T) {
	w := &world{exists: true, goroutinesErr: errors.New("cannot read memory")}
	r, err := start([]int{pid}, opts, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	w.s.result = result(10 * time.Millisecond)
	w.s.send(onCPU(0xa))
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	p, err := r.Profile()
	if err != nil {
		t.Fatal(err)
	}
	if n := r.GoroutineNote(); n != "no goroutine view: cannot read memory" || !slices.Contains(p.Notes, n) {
		t.Errorf("goroutine note %q, notes %q", n, p.Notes)
	}
}

// TestLiveWindow: a live recording's ticks read the thread totals while it
// runs, and its window spreads them over the samples that arrived.
func TestLiveWindow(t *testing.T) {
	w := &world{exists: true}
	o := opts
	o.Live = 3
	o.Goroutines = false
	r, err := start([]int{pid}, o, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.s.send(onCPU(0xa))
	w.s.send(onCPU(0xa))
	w.s.peek, w.s.now = result(50*time.Millisecond).Threads, uint64(time.Second)
	if err := r.Tick(); err != nil {
		t.Fatal(err)
	}
	p := r.Window(10)
	var cpu int64
	for _, s := range p.Samples {
		if s.State == profile.OnCPU && s.Stack[0].Frames[0].Function == "compute" {
			cpu += s.Value
		}
	}
	if cpu != int64(50*time.Millisecond) || p.Duration != time.Second {
		t.Errorf("window: compute %v on CPU over %v; want the thread's exact 50ms over 1s", time.Duration(cpu), p.Duration)
	}
	if d, p := w.index("drain"), w.index("peek"); d < 0 || p < d {
		t.Errorf("calls %v: want the ring drained, then a peek at the thread table", w.log)
	}
}

// TestLiveSeesBlockedStacks: a thread blocked since before the recording
// began has no sample to show where; the live view reads its current
// stack once (a snapshot of the threads) and gives its time to it.
func TestLiveSeesBlockedStacks(t *testing.T) {
	w := &world{exists: true, snaps: []collect.ThreadSnapshot{
		{PID: pid, TID: tid, Comm: "app", State: collect.Sleeping, Kernel: []uint64{0xc}},
	}}
	o := opts
	o.Live, o.Goroutines = 3, false
	r, err := start([]int{pid}, o, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.s.peek, w.s.now = result(0).Threads, uint64(time.Second)
	if err := r.Tick(); err != nil {
		t.Fatal(err)
	}
	if w.index("snapshot") < 0 {
		t.Fatalf("calls %v: want a snapshot of the blocked thread's stack", w.log)
	}
	var sleeping time.Duration
	for _, s := range r.Window(3).Samples {
		if s.State == profile.Sleeping && s.Stack[0].Frames[0].Function == "do_nanosleep" {
			sleeping += time.Duration(s.Value)
		}
	}
	if sleeping != time.Second {
		t.Errorf("do_nanosleep has %v sleeping, want the thread's whole second", sleeping)
	}
}

// TestLiveForgetsExitedProcesses: with ForgetExited, a process whose
// threads have all exited, and that is gone, is forgotten once its last
// bucket is out of those kept, and not before; a live process never is,
// nor a process whose recorded threads exited but that still runs.
func TestLiveForgetsExitedProcesses(t *testing.T) {
	w := &world{exists: true, gone: map[int]bool{99: true}}
	o := opts
	o.Live, o.Goroutines, o.ForgetExited = 2, false, true
	r, err := start([]int{pid}, o, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	threads := result(10 * time.Millisecond).Threads
	threads = append(threads,
		&collect.ThreadRecord{PID: 99, TID: 990, Exited: true},
		&collect.ThreadRecord{PID: 98, TID: 980, Exited: true}) // 98 still runs
	w.s.peek = threads
	for tick := 1; tick <= 4; tick++ {
		w.s.now = uint64(tick) * uint64(time.Second)
		if err := r.Tick(); err != nil {
			t.Fatal(err)
		}
		want := 0
		if tick == 4 {
			want = 1
		}
		if len(w.s.forgot) != want {
			t.Fatalf("after tick %d: forgot %v, want %d call", tick, w.s.forgot, want)
		}
	}
	if f := w.s.forgot[0]; len(f) != 1 || !f[99] {
		t.Errorf("forgot %v, want process 99 alone", f)
	}
}
