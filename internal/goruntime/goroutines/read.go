package goroutines

// gplan is one goroutine being read in a round.
type gplan struct {
	gp      uint64
	slot    int   // its index in allgs
	first   gview // as read
	v       gview // with bp derived where the runtime did not save it
	status  Status
	stack   int // index of its stack read in reads, -1 if none
	mread   int // index of its m.procid read, -1 if none
	reread  int // index of the second read of its g
	winBase uint64
	winLen  int // stack bytes to read from winBase
}

// stackBudget bounds the stack bytes read in one round; beyond it stacks
// are read only smallStack bytes deep (and come out Truncated if deeper).
const (
	stackBudget = 64 << 20
	smallStack  = 512
)

// readGoroutines reads the gs at the addresses in gps: each g, then (in
// one batch) the used part of every stack, the thread id of every M and
// each g again. Goroutines read consistently are appended to snap; the
// addresses of the others are returned for another round. In the last
// round, a stack whose frames stop fitting is kept up to there.
func (r *Reader) readGoroutines(gps []gref, snap *Snapshot, last bool) []gref {
	plans, retry := r.planRound(gps, snap)
	reads := r.readRound(plans)
	for i := range plans {
		p := &plans[i]
		g, ok := r.finish(p, reads, last)
		if !ok {
			retry = append(retry, gref{p.gp, p.slot})
			continue
		}
		snap.Goroutines = append(snap.Goroutines, g)
	}
	r.scratch.plans = plans[:0]
	return retry
}

// planRound reads every g once and decides what else to read for each.
// Goroutines whose stack is in the cache go straight to snap; those whose
// g is unreadable or implausible are returned in retry.
func (r *Reader) planRound(gps []gref, snap *Snapshot) (plans []gplan, retry []gref) {
	gs := r.layout.Offsets.GSize
	sc := &r.scratch
	sc.gbufA = grow(sc.gbufA, len(gps)*gs)
	reads := sc.reads[:0]
	for i, g := range gps {
		reads = append(reads, read{addr: g.gp, buf: sc.gbufA[i*gs : (i+1)*gs]})
	}
	r.mem.readAll(reads)
	sc.reads = reads

	plans = sc.plans[:0]
	budget := stackBudget
	for i, gr := range gps {
		gp := gr.gp
		v := r.parseG(reads[i].buf)
		if !reads[i].ok || !plausible(v) {
			retry = append(retry, gr) // rare: allocated only then
			continue
		}
		st := Status(v.status &^ scanBit)
		if !st.exists() {
			continue
		}
		p := gplan{gp: gp, slot: gr.slot, v: v, first: v, status: st, stack: -1, mread: -1}
		if st == Syscall && !r.layout.SyscallSavesBP() {
			p.v.bp = r.frameBP(v.pc, v.sp)
		}
		if c := &r.stacks[gr.slot]; c.gp == gp && v.m == 0 && c.v == v && r.snapshots-c.readAt < r.cacheAge+int(v.goid%16) {
			// Unchanged since a consistent read: same stack.
			snap.Goroutines = append(snap.Goroutines, r.goroutine(&p, 0, c.stack, c.truncated))
			snap.CachedStacks++
			continue
		}
		if st.hasStack() {
			if v := p.v; v.sp < v.lo || v.sp >= v.hi || (v.bp != 0 && (v.bp < v.sp || v.bp >= v.hi)) {
				retry = append(retry, gr)
				continue
			}
			p.winLen = int(min(p.v.hi-p.v.sp, uint64(r.maxStack)))
			if p.winLen > budget {
				p.winLen = min(p.winLen, smallStack)
			}
			budget -= p.winLen
		}
		plans = append(plans, p)
	}
	return plans, retry
}

// readRound reads, in one batch, the stack of every planned goroutine that
// has one, the thread id of every M, then every g again.
func (r *Reader) readRound(plans []gplan) []read {
	gs := r.layout.Offsets.GSize
	sc := &r.scratch
	total := 0
	for i := range plans {
		total += plans[i].winLen
	}
	sc.stacks = grow(sc.stacks, total)
	sc.mbufs = grow(sc.mbufs, 8*len(plans))
	sc.gbufB = grow(sc.gbufB, len(plans)*gs)
	reads := sc.reads[:0]
	off := 0
	for i := range plans {
		p := &plans[i]
		if p.status.hasStack() {
			p.stack, p.winBase = len(reads), p.v.sp
			reads = append(reads, read{addr: p.v.sp, buf: sc.stacks[off : off+p.winLen]})
			off += p.winLen
		}
		if p.v.m != 0 {
			p.mread = len(reads)
			reads = append(reads, read{addr: p.v.m + uint64(r.layout.Offsets.MProcid), buf: sc.mbufs[i*8 : i*8+8]})
		}
	}
	for i := range plans {
		plans[i].reread = len(reads)
		reads = append(reads, read{addr: plans[i].gp, buf: sc.gbufB[i*gs : (i+1)*gs]})
	}
	r.mem.readAll(reads)
	sc.reads = reads
	return reads
}

// finish validates a goroutine read by readGoroutines and builds its
// Goroutine; last says whether this is the last round.
func (r *Reader) finish(p *gplan, reads []read, last bool) (Goroutine, bool) {
	if !reads[p.reread].ok || !sameG(p.first, r.parseG(reads[p.reread].buf)) {
		return Goroutine{}, false
	}
	tid := 0
	if p.mread >= 0 {
		if !reads[p.mread].ok {
			return Goroutine{}, false
		}
		tid = int(word(reads[p.mread].buf, 0))
	}
	if p.stack < 0 {
		return r.goroutine(p, tid, nil, false), true
	}
	if !reads[p.stack].ok {
		return Goroutine{}, false
	}
	u := unwind(reads[p.stack].buf, p.winBase, p.v.hi, p.v.pc, p.v.bp, r.atEntry(p.v.pc), r.frame)
	if u.broken || (u.suspect && !last) {
		return Goroutine{}, false
	}
	if u.suspect {
		// Still so after every retry: keep the frames that fit.
		u.truncated = true
	} else if r.cacheAge > 0 && p.v.m == 0 {
		r.stacks[p.slot] = cachedStack{gp: p.gp, v: p.first, stack: u.stack, truncated: u.truncated, readAt: r.snapshots}
	} else {
		r.stacks[p.slot] = cachedStack{}
	}
	stack, truncated := u.stack, u.truncated
	return r.goroutine(p, tid, stack, truncated), true
}

// goroutine builds the Goroutine of a consistent read.
func (r *Reader) goroutine(p *gplan, tid int, stack []uint64, truncated bool) Goroutine {
	g := Goroutine{
		ID: p.v.goid, ParentID: p.v.parent, Status: p.status,
		GoPC: p.v.gopc, StartPC: p.v.startpc, Addr: p.gp, Slot: p.slot, TID: tid,
		System: r.isSystem(p.v.startpc), Stack: stack, Truncated: truncated,
		labelsAddr: p.v.labels,
	}
	if p.status == Waiting {
		g.WaitReason = r.layout.WaitReason(uint8(p.v.wait))
	}
	if p.status == Waiting || p.status == Syscall {
		g.WaitSince = int64(p.v.waitsince)
	}
	return g
}

// cachedStack is the stack of a goroutine that was not on a thread when it
// was read. While its g reads the same (goid, state, wait reason, saved
// pc/sp/bp, stack bounds), it has not run in between, or ran and stopped
// at the very same place, so its stack is the same; entries expire after
// cacheAge snapshots (plus up to 15, to spread the refreshes). The cache is
// indexed by the g's position in allgs, which the runtime only appends to.
type cachedStack struct {
	gp        uint64 // the g it belongs to; 0: none
	v         gview
	stack     []uint64
	truncated bool
	readAt    int // number of the snapshot that read it
}

// gref is a g to read and its index in allgs.
type gref struct {
	gp   uint64
	slot int
}

// atEntry reports whether the function at pc has not pushed anything yet
// (its pcsp value is 0 there): a goroutine stopped in a function's prologue
// by morestack (preempted, or its stack being grown), or switched to the
// system stack by runtime.systemstack, saved that pc with bp still the
// caller's frame pointer and its return address at sp.
func (r *Reader) atEntry(pc uint64) bool {
	if r.table == nil {
		return false
	}
	d, ok := r.table.SPDelta(pc - r.bias)
	return ok && d == 0
}

// frame describes how a stack is unwound.
type frame struct {
	maxDepth int
	// callerFrame returns the pcsp value of the function at return
	// address ret (what it had pushed below its own return address when
	// it made the call); nil skips the frame-layout checks.
	callerFrame func(ret uint64) (int64, bool)
	// goexit is the range of runtime.goexit, the only function a chain
	// may end in (return address in (start, end]).
	goexitStart, goexitEnd uint64
}

// unwound is the result of unwind.
type unwound struct {
	stack     []uint64
	truncated bool // stopped at maxDepth or at the end of the bytes read
	broken    bool // frame pointers not increasing within the stack: a torn read
	// suspect: a frame does not sit where its caller's frame size puts it
	// (a stack read while it changed, or a frame the check does not
	// understand); stack ends at that frame's return address.
	suspect bool
}

// unwind follows the frame-pointer chain from (pc, bp) through win, the
// stack memory from base (the saved sp), on a stack that ends at hi; if
// atEntry, the return address at sp comes first. Frame pointers must
// increase strictly and stay in the stack; the chain ends at a zero frame
// pointer. Each frame pointer must also be where the frame size of the
// function it returns to puts it: the caller's frame pointer is 8 bytes
// below its return address, which is its frame size above its stack
// pointer at the call, 16 bytes above the callee's frame pointer.
func unwind(win []byte, base, hi, pc, bp uint64, atEntry bool, f frame) unwound {
	u := unwound{stack: make([]uint64, 0, 16)}
	u.stack = append(u.stack, pc)
	if bp == 0 && !atEntry {
		// No chain to follow from a function that keeps no frame pointer
		// (runtime.systemstack_switch, for a goroutine in a syscall on a
		// runtime that does not save its bp): the stack is only its top.
		u.truncated = true
		return u
	}
	if atEntry && len(win) >= 8 {
		if ret := word(win, 0); ret != 0 {
			u.stack = append(u.stack, ret)
			if !f.fits(ret, base-8, bp) {
				u.suspect = true
				return u
			}
		}
	}
	end := base + uint64(len(win))
	for len(u.stack) < f.maxDepth {
		if bp == 0 {
			return u
		}
		if bp < base || bp+16 > hi {
			u.broken = true
			return u
		}
		if bp+16 > end {
			u.truncated = true // beyond the bytes read (maxStack)
			return u
		}
		next, ret := word(win, int(bp-base)), word(win, int(bp-base)+8)
		if ret == 0 {
			u.suspect = f.callerFrame != nil
			return u
		}
		u.stack = append(u.stack, ret)
		if next != 0 && next <= bp {
			u.broken = true
			return u
		}
		if f.frameless(ret) && next != 0 {
			// The function at ret had no frame (a leaf stopped by an
			// asynchronous preemption, say): the frame at bp was pushed
			// right below its stack pointer, where its return address is.
			if bp+24 > end {
				u.truncated = bp+24 <= hi
				u.broken = !u.truncated
				return u
			}
			ret = word(win, int(bp-base)+16)
			u.stack = append(u.stack, ret)
			bp += 8 // as if the frame at bp+8 had called it
		}
		if !f.fits(ret, bp, next) {
			u.suspect = true
			return u
		}
		bp = next
	}
	u.truncated = bp != 0
	return u
}

// frameless reports whether the function at return address ret had
// pushed nothing there (pcsp 0).
func (f frame) frameless(ret uint64) bool {
	if f.callerFrame == nil {
		return false
	}
	d, ok := f.callerFrame(ret)
	return ok && d == 0
}

// fits reports whether the frame of the function at return address ret,
// called from a frame whose frame pointer is at fp, has its frame pointer
// at next. A chain ends (next == 0) only in runtime.goexit, where every
// goroutine's first function returns.
func (f frame) fits(ret, fp, next uint64) bool {
	if f.callerFrame == nil {
		return true
	}
	d, ok := f.callerFrame(ret)
	if next == 0 {
		return ok && d == 0 && ret > f.goexitStart && ret <= f.goexitEnd
	}
	return ok && d >= 8 && next == fp+uint64(d)+8
}

// frameBP returns the frame pointer of the frame that is at pc with stack
// pointer sp: the pcsp table gives how much the function pushed below its
// return address, and the frame pointer was pushed last. It returns 0 (end
// of the chain) for a function without a frame.
func (r *Reader) frameBP(pc, sp uint64) uint64 {
	if r.table == nil {
		return 0
	}
	d, ok := r.table.SPDelta(pc - r.bias)
	if !ok || d < 16 {
		return 0
	}
	return sp + uint64(d) - 8
}

// grow returns b with length n, reallocating if its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, n+n/4)
	}
	return b[:n]
}
