package collect

import (
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

func exitOf(pid, tid uint32, comm string, cpu, sleep uint64) *ThreadExit {
	e := &ThreadExit{PID: pid, TID: tid, Comm: comm, TS: 100}
	e.State.Time[profile.OnCPU], e.State.Time[profile.Sleeping] = cpu, sleep
	e.State.Acc[profile.Sleeping] = sleep / 2
	e.State.FirstTS = 10
	return e
}

// A thread id that the kernel gave to a new thread of the same process
// has one record, with both threads' times: before, the second exit
// replaced the first, whose time was lost.
func TestExitTableReusedIDs(t *testing.T) {
	tab := newExitTable(100)
	tab.add(exitOf(1, 7, "w", 5, 10), true)
	tab.add(exitOf(1, 7, "w", 3, 20), true)
	tab.add(exitOf(2, 7, "other", 1, 1), true) // another process's thread with the id
	if tab.reused != 1 || len(tab.byID) != 2 {
		t.Fatalf("reused %d, records %d: want 1 and 2", tab.reused, len(tab.byID))
	}
	e := tab.byID[pidTID{1, 7}]
	if e.State.Time[profile.OnCPU] != 8 || e.State.Time[profile.Sleeping] != 30 || e.State.Acc[profile.Sleeping] != 15 {
		t.Errorf("merged record %+v: want on-CPU 8, sleeping 30, its remainder 15", e.State)
	}
}

// Past the table's size, exited threads are folded into one record per
// process and name, with a synthetic id, and their times are whole.
func TestExitTableFolds(t *testing.T) {
	tab := newExitTable(2)
	for tid, comm := range map[uint32]string{1: "a", 2: "a"} {
		if _, folded := tab.add(exitOf(1, tid, comm, 1, 1), true); folded {
			t.Fatalf("thread %d folded below the table's size", tid)
		}
	}
	into3, f3 := tab.add(exitOf(1, 3, "a", 10, 0), true)
	into4, f4 := tab.add(exitOf(1, 4, "a", 20, 0), true)
	into5, f5 := tab.add(exitOf(1, 5, "b", 40, 0), true)
	if !f3 || !f4 || !f5 || into3 != into4 || into5 == into3 || into3 != foldedTIDBase {
		t.Fatalf("folds: %d %v, %d %v, %d %v: want a and a into %#x, b into another", into3, f3, into4, f4, into5, f5, uint32(foldedTIDBase))
	}
	if _, folded := tab.add(exitOf(1, 2, "a", 100, 0), true); folded {
		t.Errorf("an id with a record of its own was folded, not added to its record")
	}
	if _, folded := tab.add(exitOf(1, 6, "a", 1, 0), false); folded {
		t.Errorf("folded although the caller cannot move the samples")
	}
	got := map[uint32]*ThreadExit{}
	var cpu uint64
	for _, e := range tab.list() {
		got[e.TID] = e
		cpu += e.State.Time[profile.OnCPU]
	}
	if cpu != 1+1+10+20+40+100+1 {
		t.Errorf("on-CPU time of all records %d: want every thread's, 173", cpu)
	}
	if f := got[into3]; f == nil || f.Comm != FoldedThreadsName+"a" || f.State.Time[profile.OnCPU] != 30 {
		t.Errorf("the record of a's exited threads: %+v", f)
	}
	if tab.folded != 3 || tab.reused != 1 {
		t.Errorf("folded %d, reused %d: want 3 and 1", tab.folded, tab.reused)
	}
}

// Fold moves an exited thread's samples to its record of exited threads,
// merging those with the same state and stack, and the profile's on-CPU
// samples still add up to the record's exact time.
func TestAggregatorFold(t *testing.T) {
	a := NewAggregator(nil)
	k := []uint64{0xffff10}
	a.Add(mkSample(1, 10, "w", [5]uint64{profile.OnCPU: 10}, k, []uint64{0x1010}))
	a.Add(mkSample(1, 10, "w", [5]uint64{profile.Sleeping: 50}, k, []uint64{0x1020}))
	a.Add(mkSample(1, 20, "w", [5]uint64{profile.OnCPU: 30}, k, []uint64{0x1010}))
	a.Add(mkSample(1, 30, "w", [5]uint64{profile.OnCPU: 5}, k, []uint64{0x1010})) // lives on
	const into = foldedTIDBase
	a.Fold(1, 10, into)
	a.Fold(1, 20, into)
	a.Fold(2, 30, into) // another process: nothing of thread 30 moves
	checkEntries(t, a, []entryView{
		{1, into, "w", profile.OnCPU, "[ffff10]", "[1010]", 40},
		{1, into, "w", profile.Sleeping, "[ffff10]", "[1020]", 50},
		{1, 30, "w", profile.OnCPU, "[ffff10]", "[1010]", 5},
	})
	if a.cpuNominal[into] != 40 || a.cpuNominal[10] != 0 || a.perThread[into] != 3 {
		t.Errorf("per-thread counts after the fold: nominal %v, samples %v", a.cpuNominal, a.perThread)
	}
	// A remainder of the folded threads goes to their stack.
	if !a.AddRemainder(Remainder{PID: 1, TID: into, State: profile.Sleeping, Nanos: 7}) {
		t.Errorf("no stack for the folded threads' remainder")
	}
	res := &Result{Threads: []*ThreadRecord{{PID: 1, TID: into, Name: FoldedThreadsName + "w", Time: [profile.NumStates]uint64{profile.OnCPU: 400, profile.Sleeping: 57}},
		{PID: 1, TID: 30, Name: "w", Time: [profile.NumStates]uint64{profile.OnCPU: 5}}}}
	p := Build(res, a, nil, "w")
	var cpu, sleep int64
	for _, s := range p.Samples {
		if s.TID != into {
			continue
		}
		switch s.State {
		case profile.OnCPU:
			cpu += s.Value
		case profile.Sleeping:
			sleep += s.Value
		}
	}
	if cpu != 400 || sleep != 57 {
		t.Errorf("the folded threads' samples: on-CPU %d, sleeping %d; want their record's 400 and 57", cpu, sleep)
	}
}

// A live view is not shown a fold as a gain: what the folded entries and
// thread had at the last tick stays counted there.
func TestLiveFold(t *testing.T) {
	const ms = time.Millisecond
	a := NewAggregator(nil)
	l := NewLive(a, 0, uint64(10*ms), 4)
	a.Add(liveSample(7, profile.OnCPU, 10*ms, 0xa))
	a.Add(liveSample(8, profile.OnCPU, 10*ms, 0xa))
	l.Tick([]*ThreadRecord{liveThread(7, 20*ms, 0, 0), liveThread(8, 20*ms, 0, 0)}, uint64(time.Second))
	a.Fold(1, 7, foldedTIDBase)
	a.Fold(1, 8, foldedTIDBase)
	folded := liveThread(foldedTIDBase, 40*ms, 0, 0)
	l.Tick([]*ThreadRecord{folded}, uint64(2*time.Second))
	w := byFunc(l.Window(1, liveKernel(), "app"))
	if len(w) != 0 {
		t.Errorf("the bucket after the fold shows %v: want nothing, no thread ran", w)
	}
	a.Add(liveSample(9, profile.OnCPU, 10*ms, 0xa))
	a.Fold(1, 9, foldedTIDBase)
	folded = liveThread(foldedTIDBase, 55*ms, 0, 0)
	l.Tick([]*ThreadRecord{folded}, uint64(3*time.Second))
	w = byFunc(l.Window(1, liveKernel(), "app"))
	if w["compute"][profile.OnCPU] != 15*ms {
		t.Errorf("the last bucket shows %v: want compute 15ms, thread 9's time, folded", w)
	}
}

// The CPU time of a thread's exit path (ThreadTail) goes to the record its
// exit went to: its id's, or its process and name's record of exited
// threads; with neither (its exit was lost), nowhere.
func TestExitTableAddTail(t *testing.T) {
	tab := newExitTable(1)
	tab.add(exitOf(1, 7, "w", 5, 10), true)
	into, _ := tab.add(exitOf(1, 8, "w", 3, 0), true)
	for _, c := range []struct {
		tail   ThreadTail
		wantOK bool
		want   uint32
	}{
		{ThreadTail{PID: 1, TID: 7, Comm: "w", Nanos: 100}, true, 7},
		{ThreadTail{PID: 1, TID: 8, Comm: "w", Nanos: 1000}, true, into},
		{ThreadTail{PID: 1, TID: 9, Comm: "x", Nanos: 1}, false, 0},
		{ThreadTail{PID: 2, TID: 7, Comm: "w", Nanos: 1}, false, 0},
	} {
		got, ok := tab.addTail(&c.tail)
		if ok != c.wantOK || got != c.want {
			t.Errorf("addTail(%+v) = %d, %v; want %d, %v", c.tail, got, ok, c.want, c.wantOK)
		}
	}
	if cpu := tab.byID[pidTID{1, 7}].State.Time[profile.OnCPU]; cpu != 105 {
		t.Errorf("thread 7's on-CPU time %d, want 5+100", cpu)
	}
	if cpu := tab.byID[pidTID{1, into}].State.Time[profile.OnCPU]; cpu != 1003 {
		t.Errorf("the folded record's on-CPU time %d, want 3+1000", cpu)
	}
}

// An exit path's time is exact: it keeps its value under do_exit, and the
// thread's timer samples share the rest of its on-CPU time (and in a live
// window, Scale leaves it out of the factor). Spread as a nominal weight,
// a short thread's whole life went to do_exit or the exit path was spread
// over its user stacks.
func TestBuildKeepsExitPathTime(t *testing.T) {
	const period = 10_000_000
	a := NewAggregator(nil)
	for range 3 {
		a.Add(mkSample(1, 2, "t", [5]uint64{profile.OnCPU: period}, nil, []uint64{0xa}))
	}
	tail := &RawSample{PID: 1, TID: 2, Comm: "t", Exact: true, Kernel: []uint64{ExitPathPC},
		Weight: [5]uint64{profile.OnCPU: 4_000_000}}
	a.Add(tail)
	// A thread with no timer sample: its exit path, and the rest unsampled.
	a.Add(&RawSample{PID: 1, TID: 3, Comm: "u", Exact: true, Kernel: []uint64{ExitPathPC},
		Weight: [5]uint64{profile.OnCPU: 20_000}})
	res := &Result{EndNs: 1e9, PeriodNs: period, Threads: []*ThreadRecord{
		{PID: 1, TID: 2, Name: "t", EndNs: 1e9, Exited: true, Time: [5]uint64{36_000_000, 0, 964_000_000}},
		{PID: 1, TID: 3, Name: "u", EndNs: 1e9, Exited: true, Time: [5]uint64{50_000, 0, 999_950_000}},
	}}
	if f := a.Scale(res)[threadState{2, profile.OnCPU}]; f < 1.0666 || f > 1.0667 {
		t.Errorf("thread 2's on-CPU factor %v, want 32/30 (32 ms besides the exit path, three 10 ms samples)", f)
	}
	p := Build(res, a, nil, "")
	got := map[[2]string]int64{}
	for _, s := range p.Samples {
		if s.State == profile.OnCPU {
			got[[2]string{s.Thread, s.Stack[0].Frames[0].Function}] += s.Value
		}
	}
	want := map[[2]string]int64{
		{"t", "[unknown]+0xa"}: 32_000_000, {"t", ExitPathFunction}: 4_000_000,
		{"u", UnsampledFunction}: 30_000, {"u", ExitPathFunction}: 20_000,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s under %s: %d, want %d (all: %v)", k[0], k[1], got[k], v, got)
		}
	}
}
