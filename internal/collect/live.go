package collect

import (
	"sort"
	"time"

	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
)

// Peek returns every recorded thread's time from the start of the recording
// to now, without changing the recording: the intervals still open are
// closed in a copy, as Stop would close them now, and threads that exited
// keep their final totals. It is for views that refresh while the recording
// runs (wallprof top).
//
// In switch-time mode the thread table says whether a thread is on or off
// CPU and since when. In resume mode it holds the thread's counters at its
// latest resumption: the interval since is split from the counters as /proc
// shows them now (its CPU time, its schedstat run_delay, and its state for
// the kind of wait), which lag the kernel's by at most a tick.
func (s *Session) Peek() ([]*ThreadRecord, uint64, error) {
	live, err := s.readThreads()
	if err != nil {
		return nil, 0, err
	}
	now := linux.Monotonic()
	s.mu.Lock()
	exits := s.exits.list()
	s.mu.Unlock()
	out := make([]*ThreadRecord, 0, len(live)+len(exits))
	for tid, st := range live {
		if st.Exited {
			continue // its exit event has the totals
		}
		var waiting [profile.NumStates]uint64
		if s.resume {
			waiting = closeResumed(&st, tid, now)
		} else {
			waiting = closeInterval(&st, now)
		}
		out = append(out, &ThreadRecord{PID: st.PID, TID: tid, Name: s.threadName(st.PID, tid), FirstNs: st.FirstTS, EndNs: now,
			Time: st.Time, Waiting: waiting})
	}
	byID := map[pidTID]*ThreadRecord{}
	for _, r := range out {
		byID[pidTID{r.PID, r.TID}] = r
	}
	for _, e := range exits {
		if r := byID[pidTID{e.PID, e.TID}]; r != nil {
			// A new thread with a recycled id: the exited threads' times
			// are counted under the id, as their samples are.
			r.addTimes(e)
			continue
		}
		out = append(out, e.record())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out, now, nil
}

// threadName is a thread's name, read from /proc once.
func (s *Session) threadName(pid, tid uint32) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = map[uint32]string{}
	}
	n, ok := s.names[tid]
	if !ok {
		n = linux.ThreadName(int(pid), int(tid))
		s.names[tid] = n
	}
	return n
}

// closeResumed adds to st, a thread's record in resume mode, the interval
// since its latest resumption, from its counters in /proc (splitResumed),
// and returns the part of it off CPU: the wait it is in now (a thread that
// waited since is resumed since, and its record is newer).
func closeResumed(st *ThreadState, tid uint32, now uint64) (waiting [profile.NumStates]uint64) {
	if !st.Based || now <= st.InTS {
		return
	}
	c, err := linux.ReadTaskCounters(int(st.PID), int(tid))
	if err != nil {
		return // gone: its exit event will have the totals
	}
	state := byte('S')
	if t, err := linux.ReadTask(int(st.PID), int(tid)); err == nil {
		state = t.State
	}
	return splitResumed(st, c.ExecNs, c.RunDelayNs, state, now)
}

// splitResumed adds to st the interval since its latest resumption (InTS)
// to now: the CPU time its counter gained since (execNs), the waits for a
// CPU that ended since (runDelayNs, schedstat's, which counts a wait when
// it ends), and the rest off CPU in the kind of wait its /proc state
// letter says it is in now. A thread in state R (woken, not on a CPU yet,
// or preempted) is in a wait whose kind /proc does not say: blocked until
// a wake-up and runnable since, or runnable throughout. That part is left
// out until its resumption gives its exact split; counted as runnable, the
// whole of a 5 s sleep that a live view's tick caught in the instant after
// its wake-up was counted so, and then again as sleeping once the thread
// ran (the agent's windows added up to 168% of a thread's life, CI).
func splitResumed(st *ThreadState, execNs, runDelayNs uint64, state byte, now uint64) (waiting [profile.NumStates]uint64) {
	span := now - st.InTS
	cpu := min(sub(execNs, st.LastExec), span)
	off := span - cpu
	run := min(sub(runDelayNs, st.RdOut), off)
	st.Time[profile.OnCPU] += cpu
	st.Time[profile.Runnable] += run
	if state != 'R' {
		st.Time[stateOf(state)] += off - run
		waiting[stateOf(state)] += off - run
	}
	waiting[profile.Runnable] += run
	return waiting
}

// stateOf is the state a /proc state letter counts its thread in, for time
// it was not running.
func stateOf(c byte) profile.State {
	switch c {
	case 'R':
		return profile.Runnable
	case 'D':
		return profile.Disk
	case 'S', 'I':
		return profile.Sleeping
	}
	return profile.Other
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// UnseenOffCPUFunction names the frame that stands for off-CPU time of a
// thread whose stack in that state no sample has shown yet (a live view,
// before the thread's first wait ends).
const UnseenOffCPUFunction = "[off-CPU, stack not seen yet]"

// Live divides a running recording into buckets of time, for views of its
// recent past that refresh while it runs (wallprof top). Its aggregator
// keeps summing every sample for the whole recording; each Tick takes what
// each stack gained since the previous one, and the exact time each thread
// gained (Session.Peek), and makes the two agree:
//   - a thread's on-CPU time is spread over its timer samples of the
//     bucket (as Build does for a whole recording), or put under
//     UnsampledFunction when no timer caught it;
//   - its off-CPU samples arrive when a wait ends and carry the whole
//     wait; time no sample of the bucket covers goes to the stack the
//     thread was last seen waiting in, in that state (it is most likely
//     still there), and is remembered as carried over: when the samples
//     of a later bucket arrive, the time carried over is taken off them
//     first, from the largest (the wait that spanned the buckets carries
//     it), and only then are they scaled down to the time the bucket
//     really had. So a wait that spans buckets is not counted twice, and
//     the short waits that follow it in its last bucket keep their time.
//   - under the budget of off-CPU stacks (Plan.OffCPURate), a thread's
//     short waits are sampled in part (thin samples, one period each): the
//     time of its state no sample of the bucket covers, less the wait it
//     is in now (ThreadRecord.Waiting, which goes to its latest stack as
//     above), goes to its thin samples of the bucket in proportion, as
//     Build does for a whole recording (Aggregator.scaleThin); not to the
//     stack it was last seen in, which took it all before.
//
// So a bucket never holds more than the time its threads lived, and a
// thread blocked for a minute shows in every bucket of that minute.
// Calls must not overlap with the aggregator's Add.
type Live struct {
	a        *Aggregator
	keep     int
	startNs  uint64
	periodNs uint64
	prev     map[*aggEntry]int64
	prevThin map[*aggEntry]int64 // each entry's thin weight at the last tick
	prevT    map[uint32][profile.NumStates]uint64
	// prevFirst is each thread's FirstNs at the last tick: another is a
	// new record under its id.
	prevFirst map[uint32]uint64
	// extra are entries made here: the unsampled and unseen ones, and the
	// latest stack of a state applied to time no sample covers.
	extra map[extraKey]*aggEntry
	// carried is each thread's off-CPU time, by state, that buckets gave
	// to a stack because no sample covered it yet: the sample of the wait
	// it belongs to, when it ends, carries it again.
	carried map[threadState]int64
	buckets []*bucket         // oldest first
	pidOf   map[uint32]uint32 // each thread's process, as the latest tick saw it
	ticks   uint32            // Ticks so far
}

type bucket struct {
	startNs, endNs uint64
	values         map[*aggEntry]int64
	threads        map[uint32]*ThreadRecord // the time each thread gained
}

// NewLive keeps the last keep buckets of a recording that started at
// startNs (Session.StartNs), sampled every periodNs, summed by a.
func NewLive(a *Aggregator, startNs, periodNs uint64, keep int) *Live {
	l := &Live{a: a, keep: max(keep, 1), startNs: startNs, periodNs: periodNs, prev: map[*aggEntry]int64{},
		prevThin: map[*aggEntry]int64{}, prevT: map[uint32][profile.NumStates]uint64{}, prevFirst: map[uint32]uint64{},
		extra: map[extraKey]*aggEntry{}, carried: map[threadState]int64{},
		pidOf: map[uint32]uint32{}}
	a.live = l
	return l
}

// merged is told that Aggregator.Fold added entry src to dst: what src
// had at the last tick is dst's too, not a gain.
func (l *Live) merged(src, dst *aggEntry) {
	l.prev[dst] += l.prev[src]
	delete(l.prev, src)
	l.prevThin[dst] += l.prevThin[src]
	delete(l.prevThin, src)
}

// folded is told that thread tid's record and samples went to thread
// into: its totals at the last tick, and the time of its waits that
// buckets gave a stack already, are into's too.
func (l *Live) folded(tid, into uint32) {
	for st := range profile.NumStates {
		if c, ok := l.carried[threadState{tid, st}]; ok {
			l.carried[threadState{into, st}] += c
			delete(l.carried, threadState{tid, st})
		}
	}
	p, ok := l.prevT[tid]
	if !ok {
		return
	}
	q := l.prevT[into]
	for i := range q {
		q[i] += p[i]
	}
	l.prevT[into] = q
	delete(l.prevT, tid)
	delete(l.prevFirst, tid)
}

// Tick closes a bucket at now, with threads the totals Session.Peek gave
// at now.
func (l *Live) Tick(threads []*ThreadRecord, now uint64) {
	b := &bucket{startNs: l.startNs, endNs: now, values: map[*aggEntry]int64{}, threads: map[uint32]*ThreadRecord{}}
	if n := len(l.buckets); n > 0 {
		b.startNs = l.buckets[n-1].endNs
	}
	// What each stack gained, by thread and state.
	gained := map[threadState][]*aggEntry{}
	sum := map[threadState]int64{}
	exact := map[threadState]int64{} // exact entries' gains: times, kept as they are
	thin := map[*aggEntry]int64{}    // the thin weight each entry gained
	for _, e := range l.a.order {
		if e.dead {
			continue // Fold added it to another entry
		}
		d := e.value - l.prev[e]
		if d <= 0 {
			continue
		}
		l.prev[e] = e.value
		if g := e.thin - l.prevThin[e]; g > 0 {
			thin[e] = g
			l.prevThin[e] = e.thin
		}
		e.tick = l.ticks
		k := threadState{e.tid, e.state}
		b.values[e] = d
		if e.exact {
			exact[k] += d
			continue
		}
		gained[k] = append(gained[k], e)
		sum[k] += d
	}
	// What each thread gained.
	for _, t := range threads {
		var d [profile.NumStates]uint64
		p, seen := l.prevT[t.TID]
		for i := range d {
			d[i] = sub(t.Time[i], p[i])
		}
		if first, ok := l.prevFirst[t.TID]; seen && ok && first == t.FirstNs {
			// A state's time that went down (Peek's estimate of a wait
			// in progress, corrected at the thread's resumption) was
			// counted: only what passes it is new.
			for i := range p {
				p[i] = max(p[i], t.Time[i])
			}
			l.prevT[t.TID] = p
		} else {
			l.prevT[t.TID] = t.Time // its first tick, or a new record under the id
		}
		l.prevFirst[t.TID] = t.FirstNs
		l.pidOf[t.TID] = t.PID
		rec := *t
		rec.Time = d
		b.threads[t.TID] = &rec
		for st := range profile.NumStates {
			k := threadState{t.TID, st}
			want := max(int64(d[st])-exact[k], 0)
			es, have := gained[k], sum[k]
			if c := l.carried[k]; c > 0 && have > 0 && st != profile.OnCPU {
				// Earlier buckets counted part of these waits: take it
				// off, from the largest.
				sort.SliceStable(es, func(i, j int) bool { return b.values[es[i]] > b.values[es[j]] })
				for _, e := range es {
					x := min(c, b.values[e])
					b.values[e] -= x
					have -= x
					c -= x
					if c == 0 {
						break
					}
				}
				l.carried[k] = c
			}
			switch {
			case have > 0 && (st == profile.OnCPU || have > want):
				// Spread (on-CPU) or scale down (a wait that began
				// before the bucket and was not carried, as one
				// blocked since before the recording): the stacks'
				// shares stay.
				var given int64
				big := es[0]
				for _, e := range es {
					v := int64(float64(b.values[e]) * float64(want) / float64(have))
					b.values[e] = v
					given += v
					if v > b.values[big] {
						big = e
					}
				}
				b.values[big] += want - given
			case want > have:
				rest := want - have
				if st != profile.OnCPU {
					// Less the wait in progress, to the thin samples.
					rest -= spreadThin(b, es, thin, rest-min(rest, int64(t.Waiting[st])))
				}
				if rest > 0 {
					e := l.where(t, st)
					b.values[e] += rest
					if st != profile.OnCPU {
						l.carried[k] += rest
					}
				}
			}
			if t.Exited {
				delete(l.carried, k) // no sample will come
			}
		}
	}
	l.buckets = append(l.buckets, b)
	if len(l.buckets) > l.keep {
		l.buckets = l.buckets[len(l.buckets)-l.keep:]
	}
	l.ticks++
}

// Compact drops the aggregator's entries that a view of the kept buckets
// alone (the agent, top) no longer needs: those no kept bucket has, that
// gained nothing in the last idle ticks, and that are not a thread's latest
// stack in a state (where time no sample covers goes); and the entries Live
// made that no kept bucket has (made again when needed). A recording then
// holds the stacks its threads ran lately, not all they ever ran: a server's
// distinct stacks kept growing the agent's memory by 2 MB a minute. The
// aggregator's totals are then not the whole recording's.
func (l *Live) Compact(idle uint32) {
	keep := map[*aggEntry]bool{}
	for _, b := range l.buckets {
		for e := range b.values {
			keep[e] = true
		}
	}
	for _, e := range l.a.last {
		keep[e] = true
	}
	for _, e := range l.a.lastAny {
		keep[e] = true
	}
	for k, e := range l.extra {
		if !keep[e] && (k.base == nil || !keep[k.base]) {
			delete(l.extra, k)
		}
	}
	a := l.a
	order := a.order[:0]
	dropped := false
	for _, e := range a.order {
		if keep[e] || (!e.dead && l.ticks-e.tick <= idle) {
			order = append(order, e)
			continue
		}
		dropped = true
		delete(l.prev, e)
		delete(l.prevThin, e)
		if !e.dead {
			k := string(entryKey(a.key[:0], e.pid, e.tid, e.state, e.stack, e.goid, e.comm))
			if a.entries[k] == e {
				delete(a.entries, k)
			}
		}
	}
	if !dropped {
		return
	}
	clear(a.order[len(order):])
	a.order, a.dead = order, 0
	byTID := make(map[uint32][]*aggEntry, len(a.byTID))
	for _, e := range order {
		byTID[e.tid] = append(byTID[e.tid], e)
		if e.dead {
			a.dead++
		}
	}
	a.byTID = byTID
	a.sweepStacks()
}

// Forget drops all it and its aggregator hold of the processes in pids,
// which have exited and have no time in the buckets kept (Aggregator.Forget):
// a view of a long recording that sees processes come and go holds those
// that ran lately, not all that ever ran.
func (l *Live) Forget(pids map[uint32]bool) {
	if len(pids) == 0 {
		return
	}
	l.a.Forget(pids)
	for e := range l.prev {
		if pids[e.pid] {
			delete(l.prev, e)
		}
	}
	for e := range l.prevThin {
		if pids[e.pid] {
			delete(l.prevThin, e)
		}
	}
	for k, e := range l.extra {
		if pids[e.pid] {
			delete(l.extra, k)
		}
	}
	for tid, pid := range l.pidOf {
		if !pids[pid] {
			continue
		}
		delete(l.pidOf, tid)
		delete(l.prevT, tid)
		delete(l.prevFirst, tid)
		for st := range profile.NumStates {
			delete(l.carried, threadState{tid, st})
		}
	}
}

// spreadThin adds amount to the values in b of those of es that gained thin
// weight (thin), in proportion to it, and returns what it gave: amount, or
// 0 when none did.
func spreadThin(b *bucket, es []*aggEntry, thin map[*aggEntry]int64, amount int64) int64 {
	var total int64
	var big *aggEntry
	for _, e := range es {
		if g := thin[e]; g > 0 {
			total += g
			if big == nil || g > thin[big] {
				big = e
			}
		}
	}
	if total == 0 || amount <= 0 {
		return 0
	}
	var given int64
	for _, e := range es {
		if g := thin[e]; g > 0 {
			v := int64(float64(amount) * float64(g) / float64(total))
			b.values[e] += v
			given += v
		}
	}
	b.values[big] += amount - given
	return amount
}

// where is the stack that time of thread t in state st goes to when no
// sample of the bucket covers it: its latest sample in that state, else
// its latest stack in another state off CPU (a thread waiting for a CPU
// after a wake-up waits in the stack it slept in), else an entry that says its stack was
// not seen. On-CPU time is never given a stack no timer saw it in.
func (l *Live) where(t *ThreadRecord, st profile.State) *aggEntry {
	if st != profile.OnCPU {
		if e, ok := l.a.last[threadState{t.TID, st}]; ok {
			return e
		}
		for _, other := range []profile.State{profile.Sleeping, profile.Disk, profile.Other, profile.Runnable} {
			base, ok := l.a.last[threadState{t.TID, other}]
			if !ok {
				continue
			}
			k := extraKey{base: base, state: st}
			e, ok := l.extra[k]
			if !ok {
				e = &aggEntry{pid: base.pid, tid: base.tid, comm: base.comm, goid: base.goid, state: st,
					kernel: base.kernel, user: base.user}
				l.extra[k] = e
			}
			return e
		}
	}
	k := extraKey{tid: t.TID, state: st}
	if e, ok := l.extra[k]; ok {
		return e
	}
	e := &aggEntry{pid: t.PID, tid: t.TID, comm: t.Name, state: st, unsampled: true}
	if e.comm == "" {
		e.comm = l.a.comm[t.TID]
	}
	l.extra[k] = e
	return e
}

// extraKey names an entry made by Live: a stack seen in another state
// (base), or none (tid).
type extraKey struct {
	base  *aggEntry
	tid   uint32
	state profile.State
}

// Unseen lists the threads, of the totals Peek gave, whose off-CPU time
// since the latest tick has no stack to go to yet (no sample in that state
// or another off-CPU state): a thread blocked since before the recording
// began. Their current stacks, read otherwise (SnapshotThreads) and added
// as samples, give it one.
//
// It also lists the threads whose off-CPU time grew since the latest tick
// by more than their off-CPU samples since (by unseenSlack): a wait still
// in progress (its sample comes when it ends), whose stack is not the one
// the thread was last seen waiting in when it moved on to another wait (a
// phase that blocks for seconds after one that blocked elsewhere, even a
// short wait sampled since the tick: a thread's first wait at a start
// barrier, then its long one).
func (l *Live) Unseen(threads []*ThreadRecord) map[uint32]profile.State {
	offCPU := []profile.State{profile.Sleeping, profile.Disk, profile.Other, profile.Runnable}
	sampled := map[uint32]uint64{} // off-CPU time sampled since the latest tick
	for _, e := range l.a.order {
		if !e.dead && e.state != profile.OnCPU && e.value > l.prev[e] {
			sampled[e.tid] += uint64(e.value - l.prev[e])
		}
	}
	out := map[uint32]profile.State{}
	for _, t := range threads {
		p := l.prevT[t.TID]
		var grew uint64
		first := profile.NumStates
		for _, st := range offCPU {
			if t.Time[st] > p[st] {
				grew += t.Time[st] - p[st]
				if first == profile.NumStates {
					first = st
				}
			}
		}
		if first == profile.NumStates {
			continue
		}
		seen := false
		for _, other := range offCPU {
			if _, ok := l.a.last[threadState{t.TID, other}]; ok {
				seen = true
			}
		}
		if !seen || grew > sampled[t.TID]+uint64(unseenSlack) {
			out[t.TID] = first
		}
	}
	return out
}

// unseenSlack is how much more off-CPU time than its samples since the
// latest tick show a thread may have gained before Unseen lists it: the
// part of a wait still in progress at the tick that may go to the stack
// of the thread's previous wait.
const unseenSlack = 50 * time.Millisecond

// Buckets is how many buckets are kept.
func (l *Live) Buckets() int { return len(l.buckets) }

// Window returns the profile of the last n buckets (all kept, if fewer),
// symbolized.
func (l *Live) Window(n int, kernel KernelResolver, command string) *profile.Profile {
	return l.WindowOf(n, 0, kernel, command)
}

// WindowOf is Window for the threads of process pid alone (0: all).
func (l *Live) WindowOf(n, pid int, kernel KernelResolver, command string) *profile.Profile {
	res, entries := l.window(n, pid, true)
	return buildEntries(res, l.a, entries, kernel, command)
}

// Threads returns each thread's time in the last n buckets, and the time
// those buckets cover, without building a profile: cheap enough for a
// system-wide view of every process.
func (l *Live) Threads(n int) ([]*ThreadRecord, time.Duration) {
	res, _ := l.window(n, 0, false)
	return res.Threads, time.Duration(res.EndNs - res.StartNs)
}

// window sums the last n buckets: the threads of process pid (0: all), and
// with stacks, their entries.
func (l *Live) window(n, pid int, stacks bool) (*Result, []*aggEntry) {
	bs := l.buckets
	if n < len(bs) {
		bs = bs[len(bs)-n:]
	}
	res := &Result{PeriodNs: l.periodNs}
	if len(bs) == 0 {
		return res, nil
	}
	res.StartNs, res.EndNs = bs[0].startNs, bs[len(bs)-1].endNs
	sums := map[*aggEntry]int64{}
	var order []*aggEntry
	threads := map[uint32]*ThreadRecord{}
	for _, b := range bs {
		if stacks {
			for e, v := range b.values {
				if pid != 0 && e.pid != uint32(pid) {
					continue
				}
				if _, ok := sums[e]; !ok {
					order = append(order, e)
				}
				sums[e] += v
			}
		}
		for tid, t := range b.threads {
			if pid != 0 && t.PID != uint32(pid) {
				continue
			}
			s, ok := threads[tid]
			if !ok {
				c := *t
				threads[tid] = &c
				continue
			}
			for i := range s.Time {
				s.Time[i] += t.Time[i]
			}
			s.EndNs, s.Exited = t.EndNs, t.Exited
		}
	}
	entries := make([]*aggEntry, 0, len(order))
	for _, e := range order {
		if v := sums[e]; v > 0 {
			c := *e
			c.value, c.dead = v, false // what it gained then, before any Fold
			entries = append(entries, &c)
		}
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.value != b.value {
			return a.value > b.value
		}
		return a.tid < b.tid
	})
	for _, t := range threads {
		t.FirstNs = max(t.FirstNs, res.StartNs)
		if t.Name == "" {
			t.Name = l.a.comm[t.TID]
		}
		res.Threads = append(res.Threads, t)
	}
	sort.Slice(res.Threads, func(i, j int) bool { return res.Threads[i].TID < res.Threads[j].TID })
	return res, entries
}
