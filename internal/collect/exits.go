package collect

import "github.com/wallprof/wallprof/internal/profile"

// MaxExitRecords is how many exited threads keep a record of their own.
// A program that starts and ends threads without pause (tens of thousands
// a second) would otherwise grow the recorder's memory by a record, and
// the samples kept under it, for every thread it ever ran: 2.7 GB after
// 30 s of 27,000 new threads a second. Past it, each exited thread's
// times and samples are added to one record per process and name.
const MaxExitRecords = 10000

// pidTID names a thread of a process.
type pidTID struct{ pid, tid uint32 }

// exitTable holds the final records of the threads that exited, one per
// thread id of a process: when the kernel gives an exited thread's id to a
// new thread of the same process (pid_max is 32,768 on many systems, and
// a program that churns threads reuses ids within seconds), the new
// thread's times are added to the id's record, as its samples are counted
// under the same id. Before, the later exit replaced the earlier one and
// its time was lost from the thread's total.
type exitTable struct {
	max    int
	byID   map[pidTID]*ThreadExit
	folds  map[foldKey]*ThreadExit
	next   uint32 // the next synthetic thread id, counting down from foldedTIDBase
	reused int    // exits added to an earlier record of their id
	folded int    // exits folded into a record of exited threads
}

type foldKey struct {
	pid  uint32
	comm string
}

// foldedTIDBase is the first synthetic thread id of a record of exited
// threads; the next ones count down. Real thread ids are below 2^22
// (PID_MAX_LIMIT).
const foldedTIDBase = 0xffffffff

// FoldedThreadsName is the name prefix of a record of exited threads.
const FoldedThreadsName = "[exited threads] "

func newExitTable(max int) exitTable {
	return exitTable{max: max, byID: map[pidTID]*ThreadExit{}, folds: map[foldKey]*ThreadExit{}, next: foldedTIDBase}
}

// add takes the final record of a thread that exited. It returns the
// synthetic thread id its record was folded into, with folded true, when
// the table is full and fold says folding is possible (the caller moves
// the thread's samples to that id).
func (t *exitTable) add(e *ThreadExit, fold bool) (into uint32, folded bool) {
	k := pidTID{e.PID, e.TID}
	if old := t.byID[k]; old != nil {
		old.merge(e)
		t.reused++
		return 0, false
	}
	if !fold || len(t.byID) < t.max {
		t.byID[k] = e
		return 0, false
	}
	fk := foldKey{e.PID, e.Comm}
	f := t.folds[fk]
	if f == nil {
		f = &ThreadExit{PID: e.PID, TID: t.next, Comm: FoldedThreadsName + e.Comm, TS: e.TS, State: ThreadState{FirstTS: e.State.FirstTS, PID: e.PID, Exited: true}}
		t.next--
		t.folds[fk] = f
		t.byID[pidTID{f.PID, f.TID}] = f
	}
	f.merge(e)
	t.folded++
	return f.TID, true
}

// addTail adds the CPU time a thread ran after its exit record to the
// record its exit went to: its id's, or else its process and name's
// record of exited threads. It returns that record's thread id, with ok
// false when there is none (its exit was lost, or its process forgotten).
func (t *exitTable) addTail(e *ThreadTail) (tid uint32, ok bool) {
	r := t.byID[pidTID{e.PID, e.TID}]
	if r == nil {
		r = t.folds[foldKey{e.PID, e.Comm}]
	}
	if r == nil {
		return 0, false
	}
	r.State.Time[profile.OnCPU] += e.Nanos
	return r.TID, true
}

// list returns the records.
func (t *exitTable) list() []*ThreadExit {
	out := make([]*ThreadExit, 0, len(t.byID))
	for _, e := range t.byID {
		out = append(out, e)
	}
	return out
}

// merge adds the times of o, a thread that exited, to e's.
func (e *ThreadExit) merge(o *ThreadExit) {
	for i := range e.State.Time {
		e.State.Time[i] += o.State.Time[i]
		e.State.Acc[i] += o.State.Acc[i]
	}
	if o.State.FirstTS != 0 && (e.State.FirstTS == 0 || o.State.FirstTS < e.State.FirstTS) {
		e.State.FirstTS = o.State.FirstTS
	}
	e.TS = max(e.TS, o.TS)
}

// record is the thread record of an exit.
func (e *ThreadExit) record() *ThreadRecord {
	return &ThreadRecord{PID: e.PID, TID: e.TID, Name: e.Comm, FirstNs: e.State.FirstTS,
		EndNs: e.TS, Exited: true, Time: e.State.Time}
}

// addTimes adds the times of exited threads that had r's id to r.
func (r *ThreadRecord) addTimes(e *ThreadExit) {
	for i := range r.Time {
		r.Time[i] += e.State.Time[i]
	}
	if e.State.FirstTS != 0 && e.State.FirstTS < r.FirstNs {
		r.FirstNs = e.State.FirstTS
	}
}

// forget drops the records of the threads of the processes in pids and
// returns their thread ids.
func (t *exitTable) forget(pids map[uint32]bool) []uint32 {
	var tids []uint32
	for k, e := range t.byID {
		if pids[k.pid] {
			delete(t.byID, k)
			tids = append(tids, e.TID)
		}
	}
	for k := range t.folds {
		if pids[k.pid] {
			delete(t.folds, k)
		}
	}
	return tids
}
