package collect

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// --- closeInterval ---

func TestCloseInterval(t *testing.T) {
	const end = 1000
	st := func(f func(*ThreadState)) ThreadState {
		s := ThreadState{Time: [5]uint64{1, 1, 1, 1, 1}, Acc: [5]uint64{2, 2, 2, 2, 2}}
		f(&s)
		return s
	}
	for _, c := range []struct {
		name     string
		in       ThreadState
		wantTime [5]uint64 // added to the starting values
		wantAcc  [5]uint64
	}{
		{"on CPU: open interval is on-CPU time, not accumulated off-CPU",
			st(func(s *ThreadState) { s.OnCPU, s.InTS = true, 400 }),
			[5]uint64{600}, [5]uint64{}},
		{"on CPU since after end: nothing",
			st(func(s *ThreadState) { s.OnCPU, s.InTS = true, 1200 }),
			[5]uint64{}, [5]uint64{}},
		{"sleeping, no wake-up: all blocked",
			st(func(s *ThreadState) { s.OutState, s.OutTS = profile.Sleeping, 300 }),
			[5]uint64{profile.Sleeping: 700}, [5]uint64{profile.Sleeping: 700}},
		{"disk, woken: blocked until the wake-up, runnable after",
			st(func(s *ThreadState) { s.OutState, s.OutTS, s.WakeTS = profile.Disk, 300, 800 }),
			[5]uint64{profile.Disk: 500, profile.Runnable: 200}, [5]uint64{profile.Disk: 500, profile.Runnable: 200}},
		{"other, woken at end",
			st(func(s *ThreadState) { s.OutState, s.OutTS, s.WakeTS = profile.Other, 300, end }),
			[5]uint64{profile.Other: 700}, [5]uint64{profile.Other: 700}},
		{"wake-up after end is clamped to end",
			st(func(s *ThreadState) { s.OutState, s.OutTS, s.WakeTS = profile.Sleeping, 300, 5000 }),
			[5]uint64{profile.Sleeping: 700}, [5]uint64{profile.Sleeping: 700}},
		{"wake-up before the switch-out counts from the switch-out",
			st(func(s *ThreadState) { s.OutState, s.OutTS, s.WakeTS = profile.Sleeping, 300, 100 }),
			[5]uint64{profile.Runnable: 700}, [5]uint64{profile.Runnable: 700}},
		{"preempted: all runnable, wake-up ignored",
			st(func(s *ThreadState) { s.OutState, s.OutTS, s.WakeTS = profile.Runnable, 250, 600 }),
			[5]uint64{profile.Runnable: 750}, [5]uint64{profile.Runnable: 750}},
		{"switched out after end: nothing",
			st(func(s *ThreadState) { s.OutState, s.OutTS = profile.Sleeping, 1500 }),
			[5]uint64{}, [5]uint64{}},
		{"exited: untouched",
			st(func(s *ThreadState) { s.Exited, s.OutState, s.OutTS = true, profile.Other, 300 }),
			[5]uint64{}, [5]uint64{}},
		{"exited while on CPU: untouched",
			st(func(s *ThreadState) { s.Exited, s.OnCPU, s.InTS = true, true, 300 }),
			[5]uint64{}, [5]uint64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.in
			closeInterval(&got, end)
			want := c.in
			for i := range want.Time {
				want.Time[i] += c.wantTime[i]
				want.Acc[i] += c.wantAcc[i]
			}
			if got != want {
				t.Errorf("time %v acc %v\nwant time %v acc %v", got.Time, got.Acc, want.Time, want.Acc)
			}
		})
	}
}

// --- trimScheduler ---

var testKernelMapping = &profile.Mapping{ID: 1, Kernel: true, File: "[kernel.kallsyms]"}
var testUserMapping = &profile.Mapping{ID: 2, File: "/bin/app"}

func kloc(fns ...string) *profile.Location {
	l := &profile.Location{Mapping: testKernelMapping}
	for _, fn := range fns {
		l.Frames = append(l.Frames, profile.Frame{Function: fn})
	}
	return l
}

func uloc(fn string) *profile.Location {
	return &profile.Location{Mapping: testUserMapping, Frames: []profile.Frame{{Function: fn}}}
}

func names(st []*profile.Location) []string {
	var out []string
	for _, l := range st {
		if len(l.Frames) == 0 {
			out = append(out, "<none>")
			continue
		}
		out = append(out, l.Frames[len(l.Frames)-1].Function)
	}
	return out
}

func TestTrimScheduler(t *testing.T) {
	pad := func(n int) []*profile.Location {
		var out []*profile.Location
		for i := 0; i < n; i++ {
			out = append(out, kloc(fmt.Sprintf("trace_%d", i)))
		}
		return out
	}
	cat := func(parts ...[]*profile.Location) []*profile.Location { return slices.Concat(parts...) }
	for _, c := range []struct {
		name  string
		stack []*profile.Location
		want  []string
	}{
		{"empty", nil, nil},
		{"no scheduler frame: unchanged",
			[]*profile.Location{kloc("do_sys_poll"), kloc("__x64_sys_poll"), uloc("main")},
			[]string{"do_sys_poll", "__x64_sys_poll", "main"}},
		{"cut up to the outermost scheduler function",
			[]*profile.Location{kloc("bpf_trace_run2"), kloc("__schedule"), kloc("schedule"),
				kloc("do_nanosleep"), kloc("hrtimer_nanosleep"), uloc("main")},
			[]string{"do_nanosleep", "hrtimer_nanosleep", "main"}},
		{"preemption from an interrupt",
			[]*profile.Location{kloc("__traceiter_sched_switch"), kloc("__schedule"),
				kloc("preempt_schedule_irq"), kloc("irqentry_exit"), kloc("asm_sysvec_apic_timer_interrupt"),
				uloc("spin")},
			[]string{"irqentry_exit", "asm_sysvec_apic_timer_interrupt", "spin"}},
		{"scheduler frame deeper in the stack is outermost",
			[]*profile.Location{kloc("__schedule"), kloc("schedule"), kloc("futex_wait"),
				kloc("schedule_preempt_disabled"), kloc("mutex_lock"), uloc("main")},
			[]string{"mutex_lock", "main"}},
		{"only scheduler frames: everything kernel goes",
			[]*profile.Location{kloc("__schedule"), kloc("schedule")},
			nil},
		{"only scheduler frames then user: user kept",
			[]*profile.Location{kloc("__schedule"), kloc("__cond_resched"), uloc("main")},
			[]string{"main"}},
		{"scheduler at index 15 (within the first 16) is cut",
			cat(pad(15), []*profile.Location{kloc("schedule"), kloc("do_wait")}),
			[]string{"do_wait"}},
		{"scheduler at index 16 is past the window",
			cat(pad(16), []*profile.Location{kloc("schedule"), kloc("do_wait")}),
			append(names(pad(16)), "schedule", "do_wait")},
		{"user frames are never touched",
			[]*profile.Location{uloc("schedule"), uloc("__schedule"), uloc("main")},
			[]string{"schedule", "__schedule", "main"}},
		{"search stops at the first user frame",
			[]*profile.Location{kloc("entry"), uloc("schedule"), kloc("schedule")},
			[]string{"entry", "schedule", "schedule"}},
		{"unsymbolized kernel frame (no mapping) stops the search",
			[]*profile.Location{{Frames: []profile.Frame{{Function: "[kernel]+0x1"}}}, kloc("schedule"), kloc("x")},
			[]string{"[kernel]+0x1", "schedule", "x"}},
		{"kernel frame without frames stops the search",
			[]*profile.Location{{Mapping: testKernelMapping}, kloc("schedule"), kloc("x")},
			[]string{"<none>", "schedule", "x"}},
		{"a new thread's first resumption: the tracing frames go, schedule_tail stays",
			[]*profile.Location{kloc("bpf_prog_2216287e3bf0e27f_on_resume [bpf]"), kloc("bpf_trace_run1"),
				kloc("__traceiter_sched_exit_tp"), kloc("schedule_tail"), kloc("ret_from_fork"), uloc("child")},
			[]string{"schedule_tail", "ret_from_fork", "child"}},
		{"the outermost inlined function names the location",
			[]*profile.Location{kloc("inlined_helper", "__schedule"), kloc("schedule", "do_poll"), kloc("x")},
			[]string{"do_poll", "x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.stack)
			got := trimScheduler(c.stack)
			if !slices.Equal(names(got), c.want) {
				t.Errorf("got %q, want %q", names(got), c.want)
			}
			if !slices.Equal(c.stack, in) {
				t.Errorf("input stack modified")
			}
			// What is left is a suffix of the input: frames are dropped, never reordered.
			if len(got) > 0 && got[len(got)-1] != c.stack[len(c.stack)-1] {
				t.Errorf("result is not a suffix of the input")
			}
		})
	}
}

// --- Aggregator ---

// fakeResolver is a ProcessResolver for tests. FixLeaf inserts fixFrame after
// the leaf; TrimStack cuts a stack before its first return address in
// garbage; Resolve names the addresses in syms; addresses in late are only
// known after Refresh.
type fakeResolver struct {
	pid       int
	mapping   *profile.Mapping
	syms      map[uint64]string
	late      map[uint64]string
	garbage   map[uint64]bool
	fixFrame  uint64
	fixCalls  int
	lastRegs  symbolize.Regs
	lastSnap  []byte
	resolved  []uint64
	refreshes int
}

func (r *fakeResolver) FixLeaf(regs symbolize.Regs, stack []byte, chain []uint64) []uint64 {
	r.fixCalls++
	r.lastRegs, r.lastSnap = regs, stack
	if r.fixFrame == 0 || len(chain) == 0 {
		return chain
	}
	return slices.Concat(chain[:1], []uint64{r.fixFrame}, chain[1:])
}

func (r *fakeResolver) TrimStack(stack []uint64) []uint64 {
	for i := 1; i < len(stack); i++ {
		if r.garbage[stack[i]] {
			return stack[:i]
		}
	}
	return stack
}

func (r *fakeResolver) Resolve(addr uint64) (*profile.Mapping, []profile.Frame) {
	r.resolved = append(r.resolved, addr)
	if fn, ok := r.syms[addr]; ok {
		return r.mapping, []profile.Frame{{Function: fn, File: "app.c", Line: int(addr & 0xff)}}
	}
	if r.late != nil {
		return nil, []profile.Frame{{Function: fmt.Sprintf("[unknown]+0x%x", addr)}}
	}
	return nil, nil
}

func (r *fakeResolver) Refresh() error {
	r.refreshes++
	if r.late == nil {
		return errors.New("no refresh")
	}
	for a, fn := range r.late {
		r.syms[a] = fn
	}
	r.late = nil
	return nil
}

type fakeKernel struct {
	mapping  *profile.Mapping
	syms     map[uint64]string
	resolved []uint64
}

func (k *fakeKernel) Resolve(addr uint64) profile.Frame {
	k.resolved = append(k.resolved, addr)
	if fn, ok := k.syms[addr]; ok {
		return profile.Frame{Function: fn}
	}
	return profile.Frame{Function: fmt.Sprintf("[kernel]+0x%x", addr)}
}

func (k *fakeKernel) KernelMapping() *profile.Mapping { return k.mapping }

// resolverFactory creates fake resolvers and counts the calls.
type resolverFactory struct {
	byPID map[int]*fakeResolver
	calls map[int]int
	fail  map[int]bool
}

func newFactory() *resolverFactory {
	return &resolverFactory{byPID: map[int]*fakeResolver{}, calls: map[int]int{}, fail: map[int]bool{}}
}

func (f *resolverFactory) new(pid int) (ProcessResolver, error) {
	f.calls[pid]++
	if f.fail[pid] {
		return nil, errors.New("process gone")
	}
	r, ok := f.byPID[pid]
	if !ok {
		r = &fakeResolver{pid: pid, syms: map[uint64]string{}}
		f.byPID[pid] = r
	}
	return r, nil
}

func mkSample(pid, tid uint32, comm string, w [5]uint64, kernel, user []uint64) *RawSample {
	return &RawSample{PID: pid, TID: tid, Comm: comm, Weight: w, Kernel: kernel, User: user,
		Regs: symbolize.Regs{IP: firstOr(user), SP: 0x7ff000}, Snap: []byte{1, 2, 3}}
}

func firstOr(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

type entryView struct {
	pid, tid     uint32
	comm         string
	state        profile.State
	kernel, user string
	value        int64
}

func view(a *Aggregator) []entryView {
	var out []entryView
	for _, e := range a.order {
		if e.dead {
			continue
		}
		out = append(out, entryView{e.pid, e.tid, e.comm, e.state,
			fmt.Sprintf("%x", e.kernel), fmt.Sprintf("%x", e.user), e.value})
	}
	return out
}

func checkEntries(t *testing.T, a *Aggregator, want []entryView) {
	t.Helper()
	got := view(a)
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n%s\nwant:\n%s", fmtEntries(got), fmtEntries(want))
	}
	if len(a.entries) != len(a.order)-a.dead {
		t.Errorf("%d entries in the map, %d in order (%d merged away)", len(a.entries), len(a.order), a.dead)
	}
}

func fmtEntries(es []entryView) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %+v\n", e)
	}
	return b.String()
}

func TestAggregatorAddSumsIdenticalStacks(t *testing.T) {
	a := NewAggregator(nil)
	k, u := []uint64{0xffff10, 0xffff20}, []uint64{0x1010, 0x1020}
	a.Add(mkSample(1, 2, "w", [5]uint64{profile.OnCPU: 10}, k, u))
	a.Add(mkSample(1, 2, "w", [5]uint64{profile.OnCPU: 20}, k, u))
	a.Add(mkSample(1, 2, "w", [5]uint64{profile.OnCPU: 5}, k, []uint64{0x1010, 0x1030})) // other stack
	a.Add(mkSample(1, 3, "w", [5]uint64{profile.OnCPU: 7}, k, u))                        // other thread
	a.Add(mkSample(1, 2, "renamed", [5]uint64{profile.OnCPU: 1}, k, u))                  // other name
	a.Add(mkSample(1, 2, "w", [5]uint64{profile.OnCPU: 100}, k, u))
	checkEntries(t, a, []entryView{
		{1, 2, "w", profile.OnCPU, "[ffff10 ffff20]", "[1010 1020]", 130},
		{1, 2, "w", profile.OnCPU, "[ffff10 ffff20]", "[1010 1030]", 5},
		{1, 3, "w", profile.OnCPU, "[ffff10 ffff20]", "[1010 1020]", 7},
		{1, 2, "renamed", profile.OnCPU, "[ffff10 ffff20]", "[1010 1020]", 1},
	})
	if a.perThread[2] != 5 || a.perThread[3] != 1 {
		t.Errorf("samples per thread: %v", a.perThread)
	}
	if a.comm[2] != "w" {
		t.Errorf("thread name = %q, want the latest, %q", a.comm[2], "w")
	}
}

func TestAggregatorKernelUserBoundary(t *testing.T) {
	// The same addresses split differently between kernel and user are
	// different stacks.
	a := NewAggregator(nil)
	a.Add(mkSample(1, 1, "t", [5]uint64{profile.Sleeping: 1}, []uint64{1, 2}, []uint64{3}))
	a.Add(mkSample(1, 1, "t", [5]uint64{profile.Sleeping: 1}, []uint64{1}, []uint64{2, 3}))
	if len(a.order) != 2 {
		t.Errorf("got %d entries, want 2:\n%s", len(a.order), fmtEntries(view(a)))
	}
}

func TestAggregatorAddSplitsStates(t *testing.T) {
	a := NewAggregator(nil)
	k, u := []uint64{0xffff10}, []uint64{0x1010}
	a.Add(mkSample(1, 2, "w", [5]uint64{0, 40, 30, 0, 0}, k, u))
	a.Add(mkSample(1, 2, "w", [5]uint64{0, 2, 0, 9, 0}, k, u))
	checkEntries(t, a, []entryView{
		{1, 2, "w", profile.Runnable, "[ffff10]", "[1010]", 42},
		{1, 2, "w", profile.Sleeping, "[ffff10]", "[1010]", 30},
		{1, 2, "w", profile.Disk, "[ffff10]", "[1010]", 9},
	})
	// A sample with no weight counts as a sample but adds no entry.
	a.Add(mkSample(1, 2, "w", [5]uint64{}, k, []uint64{0x9999}))
	if len(a.order) != 3 || a.perThread[2] != 3 {
		t.Errorf("zero-weight sample: %d entries, %d samples", len(a.order), a.perThread[2])
	}
}

func TestAggregatorCopiesStacks(t *testing.T) {
	a := NewAggregator(nil)
	k, u := []uint64{0xffff10}, []uint64{0x1010}
	a.Add(mkSample(1, 2, "w", [5]uint64{1}, k, u))
	k[0], u[0] = 0, 0
	checkEntries(t, a, []entryView{{1, 2, "w", profile.OnCPU, "[ffff10]", "[1010]", 1}})
}

func TestAggregatorFixLeaf(t *testing.T) {
	f := newFactory()
	f.byPID[10] = &fakeResolver{syms: map[uint64]string{}, fixFrame: 0xf1}
	f.fail[20] = true
	a := NewAggregator(f.new)
	s := mkSample(10, 11, "a", [5]uint64{profile.OnCPU: 5}, nil, []uint64{0x100, 0x200})
	a.Add(s)
	a.Add(mkSample(10, 12, "b", [5]uint64{profile.OnCPU: 5}, []uint64{0xffff}, nil)) // no user stack: no repair
	a.Add(mkSample(20, 21, "c", [5]uint64{profile.OnCPU: 5}, nil, []uint64{0x100, 0x200}))
	a.Add(mkSample(20, 22, "c", [5]uint64{profile.OnCPU: 5}, nil, []uint64{0x300}))
	checkEntries(t, a, []entryView{
		{10, 11, "a", profile.OnCPU, "[]", "[100 f1 200]", 5},
		{10, 12, "b", profile.OnCPU, "[ffff]", "[]", 5},
		{20, 21, "c", profile.OnCPU, "[]", "[100 200]", 5},
		{20, 22, "c", profile.OnCPU, "[]", "[300]", 5},
	})
	r := f.byPID[10]
	if r.fixCalls != 1 {
		t.Errorf("FixLeaf called %d times, want 1", r.fixCalls)
	}
	if r.lastRegs != s.Regs || string(r.lastSnap) != string(s.Snap) {
		t.Errorf("FixLeaf got regs %+v snap %v, want %+v %v", r.lastRegs, r.lastSnap, s.Regs, s.Snap)
	}
	if f.calls[10] != 1 || f.calls[20] != 1 {
		t.Errorf("resolvers created %v, want once per process (failures remembered)", f.calls)
	}
	if a.Resolver(20) != nil {
		t.Errorf("Resolver(20) = %v, want nil for a process that could not be read", a.Resolver(20))
	}
	if a.Resolver(10) != r {
		t.Errorf("Resolver(10) is not the process's resolver")
	}
}

// TestAggregatorTrimStack: user stacks are cut at their first implausible
// return address on arrival, after FixLeaf (whose frames are checked too),
// so that stacks differing only in garbage beyond their outermost frame add
// up to one entry.
func TestAggregatorTrimStack(t *testing.T) {
	f := newFactory()
	f.byPID[10] = &fakeResolver{syms: map[uint64]string{}, fixFrame: 0xf1,
		garbage: map[uint64]bool{0x6565547055776f71: true, 0xc000803977: true, 0xbad: true}}
	f.byPID[20] = &fakeResolver{syms: map[uint64]string{}, fixFrame: 0xbad,
		garbage: map[uint64]bool{0xbad: true}}
	a := NewAggregator(f.new)
	a.Add(mkSample(10, 11, "a", [5]uint64{profile.OnCPU: 5}, nil, []uint64{0x100, 0x200, 0x6565547055776f71, 0x300}))
	a.Add(mkSample(10, 11, "a", [5]uint64{profile.OnCPU: 5}, nil, []uint64{0x100, 0x200, 0xc000803977}))
	a.Add(mkSample(20, 21, "b", [5]uint64{profile.OnCPU: 5}, nil, []uint64{0x100, 0x200}))
	checkEntries(t, a, []entryView{
		{10, 11, "a", profile.OnCPU, "[]", "[100 f1 200]", 10},
		{20, 21, "b", profile.OnCPU, "[]", "[100]", 5},
	})
}

func TestAggregatorAddRemainder(t *testing.T) {
	a := NewAggregator(nil)
	kA, uA := []uint64{0xa0}, []uint64{0xa1}
	kB, uB := []uint64{0xb0}, []uint64{0xb1}
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.Sleeping: 100}, kA, uA))
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.Sleeping: 200}, kB, uB)) // latest sleeping stack
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.OnCPU: 50}, nil, uA))    // latest stack of any state

	// Same thread and state: the latest sample in that state takes it.
	if !a.AddRemainder(Remainder{PID: 1, TID: 2, State: profile.Sleeping, Nanos: 7}) {
		t.Fatal("sleeping remainder not added")
	}
	// No sample in that state: a new entry on the thread's latest stack.
	if !a.AddRemainder(Remainder{PID: 1, TID: 2, State: profile.Disk, Nanos: 9}) {
		t.Fatal("disk remainder not added")
	}
	// Now the disk entry is the latest in its state and takes the next one.
	if !a.AddRemainder(Remainder{PID: 1, TID: 2, State: profile.Disk, Nanos: 1}) {
		t.Fatal("second disk remainder not added")
	}
	// A thread without samples keeps the time in its totals only.
	if a.AddRemainder(Remainder{PID: 1, TID: 99, State: profile.OnCPU, Nanos: 5}) {
		t.Error("remainder of a thread without samples was added")
	}
	checkEntries(t, a, []entryView{
		{1, 2, "t", profile.Sleeping, "[a0]", "[a1]", 100},
		{1, 2, "t", profile.Sleeping, "[b0]", "[b1]", 207},
		{1, 2, "t", profile.OnCPU, "[]", "[a1]", 50},
		{1, 2, "t", profile.Disk, "[]", "[a1]", 10},
	})
	// Remainders are not samples.
	if a.perThread[2] != 3 {
		t.Errorf("samples of thread 2 = %d, want 3", a.perThread[2])
	}
}

func TestAggregatorAddRemainderMergesWithExistingStack(t *testing.T) {
	a := NewAggregator(nil)
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.Runnable: 10}, []uint64{0xa0}, nil))
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.OnCPU: 10}, []uint64{0xb0}, nil))
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.Runnable: 10}, []uint64{0xb0}, nil))
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.Sleeping: 10}, []uint64{0xc0}, nil))
	// The latest runnable sample is b0.
	a.AddRemainder(Remainder{PID: 1, TID: 2, State: profile.Runnable, Nanos: 3})
	checkEntries(t, a, []entryView{
		{1, 2, "t", profile.Runnable, "[a0]", "[]", 10},
		{1, 2, "t", profile.OnCPU, "[b0]", "[]", 10},
		{1, 2, "t", profile.Runnable, "[b0]", "[]", 13},
		{1, 2, "t", profile.Sleeping, "[c0]", "[]", 10},
	})
}

// --- Build ---

const (
	testStart = uint64(5_000_000_000)
	testDur   = uint64(1_000_000_000)
)

func buildFixture(t *testing.T) (*Result, *Aggregator, *resolverFactory, *fakeKernel) {
	t.Helper()
	f := newFactory()
	appMap := &profile.Mapping{Start: 0x1000, Limit: 0x9000, File: "/bin/app", BuildID: "abcd"}
	f.byPID[100] = &fakeResolver{mapping: appMap, syms: map[uint64]string{
		0x1100: "leaf_fn", // leaf, looked up as is
		0x11ff: "caller",  // return address 0x1200, looked up at -1
		0x12ff: "main",    // return address 0x1300
		0x1400: "blocker", // the user pc below a kernel stack: an exact pc, looked up as is
	}}
	km := &profile.Mapping{Start: 0xffffffff81000000, Limit: 0xffffffff82000000, File: "[kernel.kallsyms]", Kernel: true}
	kernel := &fakeKernel{mapping: km, syms: map[uint64]string{
		0xffffffff81000010: "bpf_trace_run2",
		0xffffffff8100001f: "__schedule",
		0xffffffff8100002f: "schedule",
		0xffffffff8100003f: "do_nanosleep",
		0xffffffff8100004f: "entry_SYSCALL_64",
	}}
	a := NewAggregator(f.new)
	// Thread 101: on CPU in leaf_fn <- caller <- main.
	a.Add(mkSample(100, 101, "main", [5]uint64{profile.OnCPU: 300_000_000}, nil, []uint64{0x1100, 0x1200, 0x1300}))
	a.Add(mkSample(100, 101, "main", [5]uint64{profile.OnCPU: 200_000_000}, nil, []uint64{0x1100, 0x1200, 0x1300}))
	// Thread 102: asleep, stack taken at a switch (inside the scheduler).
	sched := []uint64{0xffffffff81000010, 0xffffffff81000020, 0xffffffff81000030, 0xffffffff81000040, 0xffffffff81000050}
	a.Add(mkSample(100, 102, "sleeper", [5]uint64{profile.Sleeping: 400_000_000}, sched, []uint64{0x1400, 0x1300}))
	// Thread 102 again, at an address nothing covers.
	a.Add(mkSample(100, 102, "sleeper", [5]uint64{profile.Runnable: 50_000_000}, nil, []uint64{0xdead00, 0x1300}))
	// Thread 103: neither stack could be read.
	a.Add(&RawSample{PID: 100, TID: 103, Comm: "short", Weight: [5]uint64{profile.OnCPU: 100}, KernErr: -14, UserErr: -14})

	res := &Result{
		StartNs:   testStart,
		EndNs:     testStart + testDur,
		WallStart: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		PeriodNs:  10_101_010,
		Lost:      map[string]uint64{"ringbuf-full": 0, "kernel-stack-failed": 3},
		Cost:      profile.Cost{ProfilerCPU: time.Millisecond, BPFRunCount: 42},
		Remainders: []Remainder{
			{PID: 100, TID: 102, State: profile.Disk, Nanos: 2_000_000},
			{PID: 100, TID: 999, State: profile.Sleeping, Nanos: 3_000_000}, // no samples: dropped
		},
		Threads: []*ThreadRecord{
			// Listed out of order: Build sorts them.
			{PID: 100, TID: 103, Name: "", FirstNs: testStart + 200_000_000, EndNs: testStart + 700_000_000,
				Exited: true, Time: [5]uint64{100_000_000, 100_000_000, 300_000_000, 0, 0}},
			{PID: 100, TID: 102, Name: "sleeper", FirstNs: testStart, EndNs: testStart + testDur,
				Time: [5]uint64{100_000_000, 50_000_000, 840_000_000, 10_000_000, 0}},
			{PID: 100, TID: 101, Name: "main", FirstNs: testStart, EndNs: testStart + testDur,
				Time: [5]uint64{995_000_000, 5_000_000, 0, 0, 0}},
		},
	}
	return res, a, f, kernel
}

func stackNames(s *profile.Sample) []string {
	var out []string
	for _, l := range s.Stack {
		for _, fr := range l.Frames {
			out = append(out, fr.Function)
		}
	}
	return out
}

func TestBuild(t *testing.T) {
	res, a, f, kernel := buildFixture(t)
	p := Build(res, a, kernel, "app --flag")
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if p.Duration != time.Duration(testDur) || p.Period != 10_101_010 || p.Command != "app --flag" ||
		!p.Start.Equal(res.WallStart) {
		t.Errorf("header: start %v duration %v period %d command %q", p.Start, p.Duration, p.Period, p.Command)
	}
	if len(p.Lost) != 1 || p.Lost["kernel-stack-failed"] != 3 {
		t.Errorf("Lost = %v, want only the non-zero counter", p.Lost)
	}
	if p.Cost == nil || *p.Cost != res.Cost {
		t.Errorf("Cost = %+v, want %+v", p.Cost, res.Cost)
	}

	// Threads: sorted, offsets from the start, names filled in from samples.
	type th struct {
		tid        int
		name       string
		start, end time.Duration
		exited     bool
		samples    int
	}
	var gotTh []th
	for _, x := range p.Threads {
		gotTh = append(gotTh, th{x.TID, x.Name, x.Start, x.End, x.Exited, x.Samples})
	}
	wantTh := []th{
		{101, "main", 0, time.Second, false, 2},
		{102, "sleeper", 0, time.Second, false, 2},
		{103, "short", 200 * time.Millisecond, 700 * time.Millisecond, true, 1},
	}
	if !slices.Equal(gotTh, wantTh) {
		t.Errorf("threads = %+v\nwant %+v", gotTh, wantTh)
	}
	if p.Threads[1].Time[profile.Sleeping] != 840*time.Millisecond {
		t.Errorf("thread 102 sleeping = %v", p.Threads[1].Time[profile.Sleeping])
	}

	// Samples, in order of first appearance, with remainders folded in.
	type smp struct {
		tid   int
		state profile.State
		value int64
		stack string
	}
	var got []smp
	for _, s := range p.Samples {
		got = append(got, smp{s.TID, s.State, s.Value, strings.Join(stackNames(s), ";")})
	}
	want := []smp{
		// Two timer samples: the thread's exact CPU time, whatever their
		// nominal weights.
		{101, profile.OnCPU, 995_000_000, "leaf_fn;caller;main"},
		// Trimmed up to schedule; user frames below a kernel stack are not leaves.
		{102, profile.Sleeping, 400_000_000, "do_nanosleep;entry_SYSCALL_64;blocker;main"},
		{102, profile.Runnable, 50_000_000, "[unknown]+0xdead00;main"},
		{103, profile.OnCPU, 100_000_000, "[stack unavailable]"},
		// 102 ran 100ms, but no timer sample caught it: no stack is invented.
		{102, profile.OnCPU, 100_000_000, UnsampledFunction},
		// Disk remainder of 102: no disk sample, so on its latest stack.
		{102, profile.Disk, 2_000_000, "[unknown]+0xdead00;main"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("samples:\n%+v\nwant\n%+v", got, want)
	}

	// Addresses: the user pc as is (also below a kernel stack), callers at
	// return address - 1.
	r := f.byPID[100]
	for _, addr := range []uint64{0x1100, 0x11ff, 0x12ff, 0x1400, 0xdead00} {
		if !slices.Contains(r.resolved, addr) {
			t.Errorf("user address %#x never resolved (resolved %#x)", addr, r.resolved)
		}
	}
	for _, addr := range []uint64{0x1200, 0x1300, 0x13ff} {
		if slices.Contains(r.resolved, addr) {
			t.Errorf("return address %#x resolved as is", addr)
		}
	}
	if !slices.Contains(kernel.resolved, 0xffffffff81000010) || slices.Contains(kernel.resolved, 0xffffffff8100000f) ||
		!slices.Contains(kernel.resolved, 0xffffffff8100003f) {
		t.Errorf("kernel addresses resolved: %#x", kernel.resolved)
	}
}

func TestBuildLocations(t *testing.T) {
	res, a, _, kernel := buildFixture(t)
	p := Build(res, a, kernel, "")

	// IDs are 1..n in order, every location is used by pointer from p.Locs.
	inLocs := map[*profile.Location]bool{}
	seen := map[[2]uint64]bool{} // {kernel?0:1 pid-ish, address}
	for i, l := range p.Locs {
		if l.ID != uint64(i+1) {
			t.Errorf("location %d has ID %d", i, l.ID)
		}
		inLocs[l] = true
		if len(l.Frames) == 0 {
			t.Errorf("location %d has no frames", l.ID)
		}
		space := uint64(1)
		if l.Mapping != nil && l.Mapping.Kernel {
			space = 0
		}
		k := [2]uint64{space, l.Address}
		if l.Mapping == nil && l.Address == 0 {
			continue // a frame that stands for what has no stack
		}
		if seen[k] {
			t.Errorf("address %#x has two locations", l.Address)
		}
		seen[k] = true
	}
	for _, s := range p.Samples {
		for _, l := range s.Stack {
			if !inLocs[l] {
				t.Errorf("sample location %#x is not in p.Locs", l.Address)
			}
		}
	}
	// "main" (0x12ff) appears in four samples but once in p.Locs.
	var mains int
	for _, l := range p.Locs {
		if l.Frames[0].Function == "main" {
			mains++
			if l.Address != 0x12ff {
				t.Errorf("main's location address = %#x, want the call (0x12ff)", l.Address)
			}
		}
	}
	if mains != 1 {
		t.Errorf("%d locations for main, want 1", mains)
	}
	// 6 user locations (leaf_fn, caller, main, blocker, unknown, stack unavailable)
	// + 5 kernel ones (all looked up, even those trimmed) + the unsampled frame.
	if len(p.Locs) != 12 {
		t.Errorf("%d locations, want 12", len(p.Locs))
	}

	// Mappings: one copy each, IDs 1..n; kernel locations on the kernel mapping.
	for i, m := range p.Mappings {
		if m.ID != uint64(i+1) {
			t.Errorf("mapping %d has ID %d", i, m.ID)
		}
	}
	if len(p.Mappings) != 2 {
		t.Fatalf("%d mappings, want 2 (app, kernel)", len(p.Mappings))
	}
	for _, l := range p.Locs {
		fn := l.Frames[0].Function
		switch {
		case l.Address >= 0xffffffff81000000:
			if l.Mapping == nil || !l.Mapping.Kernel || l.Mapping.File != "[kernel.kallsyms]" {
				t.Errorf("kernel location %s has mapping %+v", fn, l.Mapping)
			}
		case strings.HasPrefix(fn, "["):
			if l.Mapping != nil {
				t.Errorf("unresolved location %s has mapping %+v", fn, l.Mapping)
			}
		default:
			if l.Mapping == nil || l.Mapping.File != "/bin/app" || l.Mapping.BuildID != "abcd" {
				t.Errorf("user location %s has mapping %+v", fn, l.Mapping)
			}
		}
		if l.Mapping != nil && l.Mapping != p.Mappings[l.Mapping.ID-1] {
			t.Errorf("location %s points to a mapping not in p.Mappings", fn)
		}
	}
}

func TestBuildUnresolvedAddresses(t *testing.T) {
	// No resolvers at all: user addresses are [unknown]+0x..., kernel ones [kernel]+0x...
	a := NewAggregator(nil)
	a.Add(mkSample(7, 7, "x", [5]uint64{profile.Sleeping: 10}, []uint64{0xffff0010, 0xffff0020}, []uint64{0x5000, 0x6000}))
	a.Add(mkSample(7, 7, "x", [5]uint64{profile.OnCPU: 10}, nil, []uint64{0x5000, 0x6000}))
	res := &Result{StartNs: 1, EndNs: 1 + 100, Threads: []*ThreadRecord{
		{PID: 7, TID: 7, FirstNs: 1, EndNs: 101, Time: [5]uint64{10, 0, 90, 0, 0}}}}
	p := Build(res, a, nil, "")
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	got := []string{strings.Join(stackNames(p.Samples[0]), ";"), strings.Join(stackNames(p.Samples[1]), ";")}
	want := []string{
		"[kernel]+0xffff0010;[kernel]+0xffff001f;[unknown]+0x5000;[unknown]+0x5fff",
		"[unknown]+0x5000;[unknown]+0x5fff",
	}
	if !slices.Equal(got, want) {
		t.Errorf("stacks = %q, want %q", got, want)
	}
	if len(p.Mappings) != 0 {
		t.Errorf("mappings = %v, want none", p.Mappings)
	}
	if p.Threads[0].Name != "x" {
		t.Errorf("thread name = %q, want the comm of its samples", p.Threads[0].Name)
	}
}

func TestBuildRefreshesOnUnknown(t *testing.T) {
	f := newFactory()
	f.byPID[5] = &fakeResolver{syms: map[uint64]string{}, late: map[uint64]string{0x7000: "dlopened"},
		mapping: &profile.Mapping{File: "/lib/plugin.so"}}
	a := NewAggregator(f.new)
	a.Add(mkSample(5, 5, "p", [5]uint64{profile.OnCPU: 1}, nil, []uint64{0x7000}))
	p := Build(&Result{Threads: []*ThreadRecord{{PID: 5, TID: 5, Time: [5]uint64{profile.OnCPU: 1}}}}, a, nil, "")
	if got := stackNames(p.Samples[0]); !slices.Equal(got, []string{"dlopened"}) {
		t.Errorf("stack = %q, want [dlopened] after a refresh", got)
	}
	if f.byPID[5].refreshes != 1 {
		t.Errorf("%d refreshes, want 1", f.byPID[5].refreshes)
	}
	if p.Samples[0].Stack[0].Mapping == nil || p.Samples[0].Stack[0].Mapping.File != "/lib/plugin.so" {
		t.Errorf("mapping = %+v", p.Samples[0].Stack[0].Mapping)
	}
}

func TestBuildEmpty(t *testing.T) {
	p := Build(&Result{StartNs: 10, EndNs: 20}, NewAggregator(nil), nil, "cmd")
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(p.Samples) != 0 || len(p.Threads) != 0 || p.Lost == nil || p.Cost == nil || p.Duration != 10 {
		t.Errorf("empty profile = %+v", p)
	}
}

func TestBuildValidateCatchesInconsistentThreads(t *testing.T) {
	// A sanity check of the fixture: Validate is not vacuous.
	res, a, _, kernel := buildFixture(t)
	res.Threads[2].Time[profile.OnCPU] /= 2
	if err := Build(res, a, kernel, "").Validate(); err == nil {
		t.Error("Validate accepted a thread accounting for half its lifetime")
	}
}

// TestBuildSpreadsCPUOverTimerSamples checks that a thread's exact CPU time
// is shared by its timer samples in proportion to their counts, to the
// nanosecond, and that a window's samples are scaled by the same factor.
func TestBuildSpreadsCPUOverTimerSamples(t *testing.T) {
	const period = 10_000_000
	newAgg := func(n map[uint64]int) *Aggregator {
		a := NewAggregator(nil)
		for pc, k := range n {
			for range k {
				a.Add(mkSample(1, 2, "t", [5]uint64{profile.OnCPU: period}, nil, []uint64{pc}))
			}
		}
		return a
	}
	res := &Result{StartNs: 0, EndNs: 10_000_000_000, PeriodNs: period, Threads: []*ThreadRecord{
		{PID: 1, TID: 2, Name: "t", EndNs: 10_000_000_000, Time: [5]uint64{1_000_000_007, 0, 9_000_000_000 - 7}},
	}}
	a := newAgg(map[uint64]int{0xa: 2, 0xb: 1})
	window := newAgg(map[uint64]int{0xa: 1})
	scale := a.Scale(res)
	p := Build(res, a, nil, "")
	byLeaf := map[string]int64{}
	var total int64
	for _, s := range p.Samples {
		byLeaf[s.Stack[0].Frames[0].Function] += s.Value
		total += s.Value
	}
	if total != 1_000_000_007 {
		t.Errorf("on-CPU samples add up to %d, want the thread's exact 1000000007", total)
	}
	a2, b2 := byLeaf["[unknown]+0xa"], byLeaf["[unknown]+0xb"]
	if a2 < 666_666_000 || a2 > 666_667_000 || b2 < 333_333_000 || b2 > 333_334_000 {
		t.Errorf("0xa got %d and 0xb %d, want 2/3 and 1/3 of 1000000007", a2, b2)
	}
	w := BuildWindow(res, window, scale, nil, "")
	if len(w.Samples) != 1 || w.Samples[0].Value < 333_333_000 || w.Samples[0].Value > 333_334_000 {
		t.Errorf("window sample = %+v, want one sample weighing a third of the thread's CPU time", w.Samples)
	}
}

// A timer sample of a thread id that no record has (a thread that exited,
// whose record was folded away before the sample was read) has no total
// to be scaled to: it is counted as lost, not kept at its nominal weight
// beside the exact totals (TestRecordThreadChurn found 20 ms of them).
func TestBuildDropsCPUSamplesWithoutThread(t *testing.T) {
	const period = 10_000_000
	a := NewAggregator(nil)
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.OnCPU: period}, nil, []uint64{0xa}))
	a.Add(mkSample(1, 3, "gone", [5]uint64{profile.OnCPU: period}, nil, []uint64{0xb}))
	a.Add(mkSample(1, 3, "gone", [5]uint64{profile.OnCPU: period}, nil, []uint64{0xc}))
	res := &Result{StartNs: 0, EndNs: 1_000_000_000, PeriodNs: period, Threads: []*ThreadRecord{
		{PID: 1, TID: 2, Name: "t", EndNs: 1_000_000_000, Time: [5]uint64{25_000_000, 0, 975_000_000}},
	}}
	p := Build(res, a, nil, "")
	var total int64
	for _, s := range p.Samples {
		if s.State == profile.OnCPU {
			total += s.Value
		}
	}
	if total != 25_000_000 {
		t.Errorf("on-CPU samples add up to %d, want the one thread's 25000000", total)
	}
	if got := p.Lost["cpu-sample-without-thread"]; got != 2 {
		t.Errorf("lost %v, want 2 samples without a thread", p.Lost)
	}
}

// Walk mode: a thread's off-CPU samples weigh the time since its previous
// walk (nominal) and are scaled, state by state, to its exact time in
// that state, as its timer samples are to its CPU time; a walk's carry
// (the thread still in the wait whose stack an earlier walk took) adds to
// that sample's weight; a state the thread spent time in but that no walk
// caught gets one sample under UnseenOffCPUFunction.
func TestBuildSpreadsWalkSamples(t *testing.T) {
	const ms = 1_000_000
	walk := func(st profile.State, w uint64, pc uint64) *RawSample {
		var ws [5]uint64
		ws[st] = w
		s := mkSample(1, 2, "t", ws, nil, []uint64{pc})
		s.Walk = true
		return s
	}
	carry := &RawSample{PID: 1, TID: 2, Carry: true, Walk: true, Weight: [5]uint64{profile.Sleeping: 10 * ms}}
	add := func(a *Aggregator) {
		for range 3 {
			a.Add(walk(profile.Sleeping, 10*ms, 0xc))
		}
		a.Add(walk(profile.Sleeping, 30*ms, 0xd))
		a.Add(carry)
	}
	res := &Result{EndNs: 10_000 * ms, PeriodNs: 10 * ms, Walk: true, Threads: []*ThreadRecord{
		{PID: 1, TID: 2, Name: "t", EndNs: 10_000 * ms, Time: [5]uint64{profile.OnCPU: 300 * ms, profile.Runnable: 700 * ms, profile.Sleeping: 9_000 * ms}},
	}}
	a := NewAggregator(nil)
	add(a)
	window := NewAggregator(nil)
	window.Add(walk(profile.Sleeping, 10*ms, 0xc))
	scale := a.Scale(res)
	p := Build(res, a, nil, "")
	got := map[string]int64{}
	var total int64
	for _, s := range p.Samples {
		got[fmt.Sprintf("%v %s", s.State, s.Stack[0].Frames[0].Function)] += s.Value
		total += s.Value
	}
	want := map[string]int64{
		"sleeping [unknown]+0xc":           9_000 * ms * 3 / 7,
		"sleeping [unknown]+0xd":           9_000 * ms * 4 / 7,
		"runnable " + UnseenOffCPUFunction: 700 * ms,
		"on-cpu " + UnsampledFunction:      300 * ms,
	}
	for k, v := range want {
		if d := got[k] - v; d < -2 || d > 2 {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if total != 10_000*ms {
		t.Errorf("the samples add up to %d, want the thread's exact %d", total, 10_000*ms)
	}
	if p.Recorder == nil || p.Recorder.Accounting != profile.AccountWalk {
		t.Errorf("recorder %+v, want accounting %q", p.Recorder, profile.AccountWalk)
	}
	w := BuildWindow(res, window, scale, nil, "")
	if len(w.Samples) != 1 || w.Samples[0].Value < 9_000*ms/7-2 || w.Samples[0].Value > 9_000*ms/7+2 {
		t.Errorf("window samples %+v, want one weighing a seventh of the thread's sleep", w.Samples)
	}
}

// Outside walk mode off-CPU weights are exact and are not scaled.
func TestBuildKeepsExactOffCPUWeights(t *testing.T) {
	const ms = 1_000_000
	a := NewAggregator(nil)
	a.Add(mkSample(1, 2, "t", [5]uint64{profile.Sleeping: 40 * ms}, nil, []uint64{0xc}))
	res := &Result{EndNs: 100 * ms, PeriodNs: 10 * ms, Threads: []*ThreadRecord{
		{PID: 1, TID: 2, Name: "t", EndNs: 100 * ms, Time: [5]uint64{profile.Sleeping: 100 * ms}},
	}}
	p := Build(res, a, nil, "")
	if len(p.Samples) != 1 || p.Samples[0].Value != 40*ms {
		t.Errorf("samples %+v, want the one sample at its exact 40 ms", p.Samples)
	}
}

// A walking recording's held weights (walk_hold: the walks that found a
// thread in the wait of its latest sample, still held at its exit or the
// end) come back as remainders: they go to that sample as nominal weight,
// scaled with the rest, and the whole recording's scale counts them.
func TestBuildGivesHeldWalkTimeToTheLatestSample(t *testing.T) {
	const ms = 1_000_000
	walk := func(w uint64, pc uint64) *RawSample {
		s := mkSample(1, 2, "t", [5]uint64{profile.Sleeping: w}, nil, []uint64{pc})
		s.Walk = true
		return s
	}
	a := NewAggregator(nil)
	a.Add(walk(10*ms, 0xc))
	a.Add(walk(10*ms, 0xd))
	window := NewAggregator(nil)
	window.Add(walk(10*ms, 0xc))
	res := &Result{EndNs: 4_000 * ms, PeriodNs: 10 * ms, Walk: true,
		Threads:    []*ThreadRecord{{PID: 1, TID: 2, Name: "t", EndNs: 4_000 * ms, Time: [5]uint64{profile.Sleeping: 4_000 * ms}}},
		Remainders: []Remainder{{PID: 1, TID: 2, State: profile.Sleeping, Nanos: 20 * ms}},
	}
	res = a.HoldWalkRemainders(res)
	if len(res.Remainders) != 0 {
		t.Fatalf("remainders left after holding them: %v", res.Remainders)
	}
	scale := a.Scale(res)
	p := Build(res, a, nil, "")
	got := map[string]int64{}
	for _, s := range p.Samples {
		got[s.Stack[0].Frames[0].Function] += s.Value
	}
	want := map[string]int64{"[unknown]+0xc": 1_000 * ms, "[unknown]+0xd": 3_000 * ms}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if d := got[k] - v; d < -2 || d > 2 {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	w := BuildWindow(res, window, scale, nil, "")
	if len(w.Samples) != 1 || w.Samples[0].Value < 1_000*ms-2 || w.Samples[0].Value > 1_000*ms+2 {
		t.Errorf("window samples %+v, want one of 1 s (a quarter of the sleep)", w.Samples)
	}
}

// A walk's carry that names where the thread waited at the walk's instant
// (it moved on before its stack was taken) goes to its sample at that
// place, not to its latest sample in the state: a thread that alternates
// between two waits of one state (a server's sleep and its condition wait)
// would otherwise give the first wait's time to the second.
func TestBuildGivesWalkCarryToItsPlace(t *testing.T) {
	const ms = 1_000_000
	at := func(w, pc, sp uint64, carry bool) *RawSample {
		s := mkSample(1, 2, "t", [5]uint64{profile.Sleeping: w}, nil, []uint64{pc})
		s.Walk, s.Carry = true, carry
		s.Regs = symbolize.Regs{IP: pc, SP: sp, BP: sp + 16}
		if carry {
			s.User = nil
		}
		return s
	}
	a := NewAggregator(nil)
	a.Add(at(10*ms, 0xc, 0x7000, false)) // the sleep
	a.Add(at(10*ms, 0xd, 0x7100, false)) // the condition wait, the latest
	a.Add(at(10*ms, 0xc, 0x7000, true))  // at the sleep, moved on
	a.Add(at(10*ms, 0xe, 0x7200, true))  // a place never sampled: the latest
	res := &Result{EndNs: 4_000 * ms, PeriodNs: 10 * ms, Walk: true,
		Threads: []*ThreadRecord{{PID: 1, TID: 2, Name: "t", EndNs: 4_000 * ms, Time: [5]uint64{profile.Sleeping: 4_000 * ms}}},
	}
	a.Scale(res)
	p := Build(res, a, nil, "")
	got := map[string]int64{}
	for _, s := range p.Samples {
		got[s.Stack[0].Frames[0].Function] += s.Value
	}
	want := map[string]int64{"[unknown]+0xc": 2_000 * ms, "[unknown]+0xd": 2_000 * ms}
	for k, v := range want {
		if d := got[k] - v; d < -2 || d > 2 {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// TestBuildScalesThinOffCPUSamples: the resumption accounting's off-CPU
// samples carry exact times; beyond its budget it leaves out samples of a
// single period (its thin ones). Each thread's thin samples of a state are
// then scaled to the time its exact ones (longer waits, carries,
// remainders) leave; when none was left out, every sample keeps its time.
func TestBuildScalesThinOffCPUSamples(t *testing.T) {
	const ms = 1_000_000
	off := func(w uint64, pc uint64, thin bool) *RawSample {
		s := mkSample(1, 2, "t", [5]uint64{profile.Sleeping: w}, nil, []uint64{pc})
		s.Thin = thin
		return s
	}
	build := func(dropped uint64) map[string]int64 {
		a := NewAggregator(nil)
		a.Add(off(10*ms, 0xc, true))
		a.Add(off(20*ms, 0xd, true))
		a.Add(off(50*ms, 0xe, false))
		a.Add(&RawSample{PID: 1, TID: 2, Carry: true, Weight: [5]uint64{profile.Sleeping: 10 * ms}}) // to 0xe, the latest
		res := &Result{EndNs: 1_000 * ms, PeriodNs: 10 * ms, Resume: true, DroppedOffCPU: dropped,
			Remainders: []Remainder{{PID: 1, TID: 2, State: profile.Sleeping, Nanos: 2 * ms}}, // to 0xe too
			Threads: []*ThreadRecord{{PID: 1, TID: 2, Name: "t", EndNs: 1_000 * ms,
				Time: [5]uint64{profile.OnCPU: 100 * ms, profile.Sleeping: 840 * ms, profile.Runnable: 60 * ms}}}}
		p := Build(res, a, nil, "")
		got := map[string]int64{}
		for _, s := range p.Samples {
			got[fmt.Sprintf("%v %s", s.State, s.Stack[0].Frames[0].Function)] += s.Value
		}
		return got
	}
	exact := build(0)
	if exact["sleeping [unknown]+0xc"] != 10*ms || exact["sleeping [unknown]+0xd"] != 20*ms || exact["sleeping [unknown]+0xe"] != 62*ms {
		t.Errorf("none left out: %v, want the samples' own times (10, 20 and 62 ms)", exact)
	}
	got := build(7)
	near := func(got, want int64) bool { return got-want >= -2 && got-want <= 2 }
	// 840 ms asleep: 62 exact at 0xe, the other 778 split 10:20.
	if !near(got["sleeping [unknown]+0xc"], 778*ms/3) || !near(got["sleeping [unknown]+0xd"], 778*ms*2/3) || got["sleeping [unknown]+0xe"] != 62*ms {
		t.Errorf("some left out: %v, want 0xe's 62 ms kept and the other 778 ms split 1:2", got)
	}
	if sum := got["sleeping [unknown]+0xc"] + got["sleeping [unknown]+0xd"] + got["sleeping [unknown]+0xe"]; sum != 840*ms {
		t.Errorf("asleep %d, want the thread's exact 840 ms", sum)
	}
}
