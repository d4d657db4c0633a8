package goroutines

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Goroutine is one live goroutine of the target.
type Goroutine struct {
	ID       uint64 // goid
	ParentID uint64 // goid of the creator (Go 1.21+; 0 when unknown)
	Status   Status
	// WaitReason is the runtime's wait reason ("chan receive", "IO wait",
	// "sync.Mutex.Lock", ...) when Status is Waiting, else "".
	WaitReason string
	// WaitSince is when the goroutine began to wait, on the runtime's
	// clock (nanotime: CLOCK_MONOTONIC on Linux), as the runtime's own
	// tracebacks show it ("[chan receive, 5 minutes]"): the runtime sets
	// it only when a garbage collection finds the goroutine waiting or in
	// a system call, to that collection's start (a lower bound of the
	// wait), and clears it when the goroutine runs again. 0: not known.
	WaitSince int64
	// GoPC is the return address of the go statement that created the
	// goroutine (look up GoPC-1 to name the creating function); StartPC is
	// the entry of the goroutine's function.
	GoPC, StartPC uint64
	// TID is the thread id of the M the goroutine is on (running, in a
	// system call, or locked to a thread), 0 if none.
	TID int
	// Stack holds return addresses, innermost first, unwound with frame
	// pointers from the registers the goroutine saved when it stopped
	// running (look up pc-1 to name the calling line). It is nil for a
	// running goroutine: its saved registers are stale, so its stack must
	// come from on-CPU samples of thread TID. A goroutine stopped at the
	// entry of a function (one that has not run yet, or was preempted in a
	// function prologue) has that entry first. Stack may be shared with
	// other snapshots: do not modify it.
	Stack []uint64
	// Truncated is set when Stack stopped at the depth limit or the
	// stack-read limit rather than at the goroutine's first frame.
	Truncated bool
	// System marks runtime-internal goroutines (entry function in package
	// runtime, other than runtime.main), as runtime.Stack hides them.
	System bool
	// Labels are the goroutine's pprof labels, sorted by key.
	Labels []Label
	Addr   uint64 // address of its runtime.g
	// Slot is the position of its g in the goroutine table (runtime.allgs),
	// which the runtime only appends to. The runtime reuses the g
	// of an exited goroutine for a new one, at the same slot: a slot with
	// the same ID is the same goroutine.
	Slot int

	labelsAddr uint64 // g.labels
}

// Snapshot is the goroutine table at one moment.
type Snapshot struct {
	Time       time.Time     // when the snapshot started
	Elapsed    time.Duration // how long it took
	Goroutines []Goroutine   // live goroutines in allgs order
	// Dropped counts goroutines whose reads stayed inconsistent (the
	// goroutine changed while it was read, or its stack did not unwind
	// within bounds) after every retry; they are not in Goroutines.
	Dropped int
	// Retried counts goroutine reads repeated because of an inconsistency.
	Retried int
	// CachedStacks counts goroutines whose stack was not read again
	// because their g had not changed since an earlier snapshot read it
	// (see Reader.SetStackCache).
	CachedStacks int
	// LabelErrors counts goroutines with labels that could not be read
	// (the label set changed while read, or is beyond the reader's limits).
	LabelErrors int
	// AllGs is the length of runtime.allgs (dead goroutines included).
	AllGs int
}

// maxAllgs bounds len(allgs) so a torn read cannot make us allocate
// gigabytes.
const maxAllgs = 1 << 22

// scratch holds buffers reused between snapshots.
type scratch struct {
	reads   []read
	gbufA   []byte
	gbufB   []byte
	stacks  []byte
	mbufs   []byte
	pending []gref
	plans   []gplan
}

// Snapshot reads the goroutine table once.
func (r *Reader) Snapshot() (Snapshot, error) { return r.SnapshotChunks(0, nil) }

// SnapshotChunks reads the goroutine table once, n goroutines at a time
// (n <= 0: all at once): after each chunk, with its goroutines read, labels
// included, it calls each (when not nil) with them and whether more chunks
// follow. each may pause, so that a large table is read in short bursts
// spread over time rather than in one long one that takes a CPU away from
// the target for milliseconds; the goroutines of a chunk are read when it
// comes. The returned Snapshot has every chunk's goroutines.
func (r *Reader) SnapshotChunks(n int, each func(chunk []Goroutine, more bool)) (Snapshot, error) {
	snap := Snapshot{Time: time.Now()}
	gps, err := r.readAllgs()
	if err != nil {
		return snap, err
	}
	snap.AllGs = len(gps)
	snap.Goroutines = make([]Goroutine, 0, len(gps))
	if n <= 0 {
		n = len(gps)
	}
	// One cache entry per allgs slot; a g past the end of a shorter allgs
	// (read while it grew) has none.
	if len(r.stacks) > len(gps) {
		clear(r.stacks[len(gps):])
		r.stacks = r.stacks[:len(gps)]
	}
	r.stacks = append(r.stacks, make([]cachedStack, len(gps)-len(r.stacks))...)
	var ptrs []uint64
	for lo := 0; lo < len(gps); lo += n {
		hi := min(lo+n, len(gps))
		start := len(snap.Goroutines)
		pending := r.scratch.pending[:0]
		for i := lo; i < hi; i++ {
			pending = append(pending, gref{gps[i], i})
		}
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > r.maxRetry {
				snap.Dropped += len(pending)
				break
			}
			if attempt > 0 {
				snap.Retried += len(pending)
			}
			pending = r.readGoroutines(pending, &snap, attempt == r.maxRetry)
		}
		r.scratch.pending = pending[:0]
		chunk := snap.Goroutines[start:]
		ptrs = ptrs[:0]
		for _, g := range chunk {
			ptrs = append(ptrs, g.labelsAddr)
		}
		snap.LabelErrors += r.readLabels(chunk, ptrs)
		if each != nil {
			each(chunk, hi < len(gps))
		}
	}
	for p, c := range r.labelSets {
		if c.seen != r.snapshots {
			delete(r.labelSets, p)
		}
	}
	r.snapshots++
	snap.Elapsed = time.Since(snap.Time)
	return snap, nil
}

// readAllgs returns the g pointers in runtime.allgs. The slice header is
// read again after the array, and the read repeated if it changed (allgadd
// was growing it).
func (r *Reader) readAllgs() ([]uint64, error) {
	var hdr, again [24]byte
	for attempt := 0; ; attempt++ {
		rs := []read{{addr: r.allgs, buf: hdr[:]}}
		r.mem.readAll(rs)
		if !rs[0].ok {
			if gone(r.pid) {
				return nil, fmt.Errorf("read runtime.allgs of process %d: %w", r.pid, ErrProcessGone)
			}
			return nil, fmt.Errorf("read runtime.allgs of process %d at %#x: not readable", r.pid, r.allgs)
		}
		ptr, n, c := word(hdr[:], 0), word(hdr[:], 8), word(hdr[:], 16)
		if n == 0 {
			return nil, nil
		}
		plausible := n <= uint64(r.maxAllgs) && n <= c && ptr != 0
		var buf []byte
		if plausible {
			buf = make([]byte, n*8)
			rs = []read{{addr: ptr, buf: buf}, {addr: r.allgs, buf: again[:]}}
			r.mem.readAll(rs)
			if rs[0].ok && rs[1].ok && hdr == again {
				gps := make([]uint64, 0, n)
				for i := 0; i < int(n); i++ {
					if gp := word(buf, i*8); gp != 0 {
						gps = append(gps, gp)
					}
				}
				return gps, nil
			}
		}
		if attempt == r.maxRetry {
			return nil, fmt.Errorf("process %d: runtime.allgs {%#x, %d, %d} did not read consistently", r.pid, ptr, n, c)
		}
	}
}

// gview is the part of a runtime.g that the reader uses.
type gview struct {
	goid, parent, status, wait, labels uint64
	waitsince                          uint64
	lo, hi, sp, pc, bp, m, gopc        uint64
	startpc                            uint64
}

func (r *Reader) parseG(b []byte) gview {
	o := r.layout.Offsets
	v := gview{
		goid:    word(b, o.GGoid),
		status:  word(b, o.GAtomicstatus) & 0xffffffff,
		wait:    uint64(b[o.GWaitreason]),
		lo:      word(b, o.GStackLo),
		hi:      word(b, o.GStackHi),
		sp:      word(b, o.GSchedSP),
		pc:      word(b, o.GSchedPC),
		bp:      word(b, o.GSchedBP),
		m:       word(b, o.GM),
		gopc:    word(b, o.GGopc),
		startpc: word(b, o.GStartpc),
		labels:  word(b, o.GLabels),
	}
	if ws := o.GWaitsince(); ws >= 0 && ws+8 <= len(b) {
		v.waitsince = word(b, ws)
	}
	if o.GParentGoid >= 0 {
		v.parent = word(b, o.GParentGoid)
	}
	return v
}

// sameG reports whether two reads of a g agree on what the snapshot uses.
func sameG(a, b gview) bool {
	return a.goid == b.goid && a.status == b.status && a.sp == b.sp && a.pc == b.pc &&
		a.bp == b.bp && a.m == b.m && a.lo == b.lo && a.hi == b.hi && a.wait == b.wait
}

// plausible rejects a g that cannot be a real one (torn or stale read).
func plausible(v gview) bool {
	st := Status(v.status &^ scanBit)
	return v.status&^scanBit <= uint64(DeadExtra) && v.status&scanBit == v.status&^0xfff &&
		(!st.exists() || (v.lo < v.hi && v.hi-v.lo <= 1<<30))
}

// isSystem reports whether the goroutine function at startpc is a runtime
// goroutine, caching the answer.
func (r *Reader) isSystem(startpc uint64) bool {
	if sys, ok := r.system[startpc]; ok {
		return sys
	}
	if r.table == nil {
		return false
	}
	_, _, name, ok := r.table.FuncRange(startpc - r.bias)
	sys := ok && strings.HasPrefix(name, "runtime.") && name != "runtime.main" && name != "runtime.handleAsyncEvent"
	r.system[startpc] = sys
	return sys
}

// ErrProcessGone is returned (wrapped) by Snapshot when the target has
// exited.
var ErrProcessGone = errors.New("process exited")

// gone reports whether pid has exited (no longer exists, or is a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}
