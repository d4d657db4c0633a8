package collect

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// ProcessResolver symbolizes one process and repairs its leaf frames.
type ProcessResolver interface {
	symbolize.Resolver
	// Refresh re-reads the process's mappings (after dlopen or exec).
	Refresh() error
}

// KernelResolver symbolizes kernel addresses.
type KernelResolver interface {
	Resolve(addr uint64) profile.Frame
	KernelMapping() *profile.Mapping
}

// Aggregator sums samples by thread, state and stack as they arrive, so memory
// grows with the number of distinct stacks, not with the recording's length.
// User stacks are repaired (FixLeaf) and cut at their first implausible
// return address (TrimStack) on arrival, while the process, its mappings
// and its stack snapshot are at hand.
type Aggregator struct {
	newResolver func(pid int) (ProcessResolver, error)
	resolvers   map[uint32]ProcessResolver
	entries     map[string]*aggEntry
	// stacks interns the stacks (kernel and user addresses): a stack seen
	// on many threads, in many states, is held once, and an entry's key
	// names it by number. At -F 999 on a Go server most memory of a
	// recording was stacks copied per entry and again in its key.
	stacks  map[string]*aggStack
	skey    []byte
	comms   map[string]string // interned thread names
	order   []*aggEntry
	last    map[threadState]*aggEntry // the latest sample of each thread and state
	lastAny map[uint32]*aggEntry      // the latest sample of each thread
	// lastAt: per thread, its latest walk sample at each place (state and
	// saved user registers), for the walk's carries that name one.
	lastAt     map[uint32]map[place]*aggEntry
	comm       map[uint32]string
	perThread  map[uint32]int
	cpuSamples map[uint32]int   // per thread, its on-CPU (timer) samples
	cpuNominal map[uint32]int64 // per thread, the summed weights of its on-CPU (timer) samples
	// walkNominal: per thread and off-CPU state, the summed weights of the
	// samples of walk mode (RawSample.Walk), one nominal period each.
	walkNominal map[threadState]int64
	key         []byte
	carried     []Remainder // carried weights that came before any sample of their thread and state
	// OnProcess, when set, is called with each process's resolver when it
	// is created (on the reading goroutine: it must not block).
	OnProcess  func(pid uint32, r ProcessResolver)
	unwind     UnwindCounts
	entryCache map[pidAddr]bool // threadEntry's answers
	// byTID are the entries of each thread, for Fold; dead counts the
	// entries Fold merged into others, still in order until compacted.
	byTID map[uint32][]*aggEntry
	dead  int
	live  *Live // told of the entries and threads Fold merges
	// nextStack numbers the next interned stack (Forget deletes stacks,
	// so the map's size does not).
	nextStack uint32
}

// UnwindCounts are the samples whose user stack the in-kernel unwinder
// walked, by state (on-CPU, off-CPU) and by why it stopped, and those it
// did not walk (frame pointers: a process without tables).
type UnwindCounts struct {
	OnCPU, OffCPU     [NumUnwindStops]int64
	FPOnCPU, FPOffCPU int64
	// stopsAt counts the walks that stopped early by the outermost address
	// of their (trimmed) stack.
	stopsAt map[stopKey]int64
}

type stopKey struct {
	pid  uint32
	addr uint64
	leaf bool // the stack's only frame: addr is a pc, not a return address
	on   bool
	why  int
}

// UnwindCounts returns the counts of the samples added so far. A walk that
// stopped early but whose stack's outermost frame is where a thread begins
// (threadEntries) counts as whole: it is checked here, by name, once per
// address, rather than while samples arrive.
func (a *Aggregator) UnwindCounts() UnwindCounts {
	c := a.unwind
	c.stopsAt = nil
	for k, n := range a.unwind.stopsAt {
		if !a.threadEntry(k.pid, a.resolvers[k.pid], k.addr, k.leaf) {
			continue
		}
		if k.on {
			c.OnCPU[k.why] -= n
			c.OnCPU[UnwindEnd] += n
		} else {
			c.OffCPU[k.why] -= n
			c.OffCPU[UnwindEnd] += n
		}
	}
	return c
}

// threadEntries are the functions a thread's stack begins with: a walk
// that stopped after reaching one of them (a frame pointer left set past a
// Go thread's runtime.mstart leads to unreadable memory) has the whole
// stack.
var threadEntries = map[string]bool{
	"_start": true, "clone": true, "clone3": true, "start_thread": true, "__libc_start_main": true,
	"runtime.goexit": true, "runtime.mstart": true, "runtime.rt0_go": true, "runtime.goexit.abi0": true,
	"runtime.mstart.abi0": true, "runtime.rt0_go.abi0": true, "crosscall1": true,
}

// threadEntry reports whether the outermost frame of a user stack is where
// a thread begins; it remembers the answer per address.
func (a *Aggregator) threadEntry(pid uint32, r ProcessResolver, addr uint64, leaf bool) bool {
	if r == nil {
		return false
	}
	k := pidAddr{pid, addr}
	if v, ok := a.entryCache[k]; ok {
		return v
	}
	if !leaf {
		addr-- // a return address: look up the call
	}
	_, frames := r.Resolve(addr)
	v := len(frames) > 0 && threadEntries[frames[len(frames)-1].Function]
	if a.entryCache == nil {
		a.entryCache = map[pidAddr]bool{}
	}
	a.entryCache[k] = v
	return v
}

type pidAddr struct {
	pid  uint32
	addr uint64
}

func (c *UnwindCounts) add(s *RawSample, user []uint64) {
	on := s.Weight[profile.OnCPU] > 0
	why, ok := s.UnwindStop()
	if ok && why != UnwindEnd && len(user) > 0 {
		if c.stopsAt == nil {
			c.stopsAt = map[stopKey]int64{}
		}
		c.stopsAt[stopKey{s.PID, user[len(user)-1], len(user) == 1, on, why}]++
	}
	switch {
	case !ok && on:
		c.FPOnCPU++
	case !ok:
		c.FPOffCPU++
	case on:
		c.OnCPU[why]++
	default:
		c.OffCPU[why]++
	}
}

// aggStack is one interned stack; kernel and user share one array, and
// are never modified.
type aggStack struct {
	id           uint32
	kernel, user []uint64
}

type aggEntry struct {
	pid, tid     uint32
	comm         string
	goid         uint64 // RawSample.GoID
	state        profile.State
	stack        uint32 // the interned stack's number
	kernel, user []uint64
	value        int64
	thin         int64  // of value, the weight of thin samples (RawSample.Thin)
	unsampled    bool   // on-CPU time of a thread that no timer sample caught
	exact        bool   // its value is a time, not nominal (RawSample.Exact)
	dead         bool   // merged into another entry by Fold
	tick         uint32 // the live view's latest tick at which it gained (Live.Compact)
}

// NewAggregator returns an aggregator that creates a resolver for each
// process the first time it sees one of its samples. newResolver may be nil
// (no symbolization, no leaf repair).
func NewAggregator(newResolver func(pid int) (ProcessResolver, error)) *Aggregator {
	return &Aggregator{
		newResolver: newResolver,
		resolvers:   map[uint32]ProcessResolver{},
		entries:     map[string]*aggEntry{},
		stacks:      map[string]*aggStack{},
		comms:       map[string]string{},
		comm:        map[uint32]string{},
		perThread:   map[uint32]int{},
		cpuSamples:  map[uint32]int{},
		cpuNominal:  map[uint32]int64{},
		walkNominal: map[threadState]int64{},
		last:        map[threadState]*aggEntry{},
		lastAny:     map[uint32]*aggEntry{},
		lastAt:      map[uint32]map[place]*aggEntry{},
		byTID:       map[uint32][]*aggEntry{},
	}
}

type threadState struct {
	tid   uint32
	state profile.State
}

// Release drops what the aggregator holds (its samples, stacks and the
// processes' resolvers, with the files they read), once the profile has
// been built from it; it is empty after.
func (a *Aggregator) Release() {
	*a = *NewAggregator(a.newResolver)
}

// Resolver returns the resolver of pid, creating it if needed (nil if the
// process cannot be read).
func (a *Aggregator) Resolver(pid uint32) ProcessResolver {
	if r, ok := a.resolvers[pid]; ok {
		return r
	}
	var r ProcessResolver
	if a.newResolver != nil {
		if pr, err := a.newResolver(int(pid)); err == nil {
			r = pr
		}
	}
	a.resolvers[pid] = r
	if r != nil && a.OnProcess != nil {
		a.OnProcess(pid, r)
	}
	return r
}

// Add adds one sample.
func (a *Aggregator) Add(s *RawSample) {
	if s.Carry {
		// Time whose stack is unknown: to the thread's latest sample in
		// the same state, as it is now.
		for st, w := range s.Weight {
			if w == 0 {
				continue
			}
			r := Remainder{PID: s.PID, TID: s.TID, State: profile.State(st), Nanos: w}
			if e, ok := a.lastAt[s.TID][place{r.State, s.Regs}]; ok && s.Walk && s.Regs.IP != 0 {
				// Where the thread waited at the walk's instant, which
				// an earlier walk took the stack of.
				e.value += int64(w)
				a.walkNominal[threadState{s.TID, r.State}] += int64(w)
			} else if e, ok := a.last[threadState{s.TID, r.State}]; ok {
				e.value += int64(w)
				if s.Walk {
					a.walkNominal[threadState{s.TID, r.State}] += int64(w)
				}
			} else if !s.Walk {
				// (A walk's carry before any sample of its thread
				// and state is left out: its weight is nominal, and
				// the state's samples stand for its time.)
				a.carried = append(a.carried, r)
			}
		}
		return
	}
	user := s.User
	r := a.Resolver(s.PID)
	if r != nil && len(user) > 0 {
		user = r.TrimStack(r.FixLeaf(s.Regs, s.Snap, user))
	}
	if len(s.User) > 0 {
		a.unwind.add(s, user)
	}
	if s.Exact {
		for st, w := range s.Weight {
			if w > 0 {
				a.addExact(s, profile.State(st), int64(w))
			}
		}
		return
	}
	a.comm[s.TID] = s.Comm
	a.perThread[s.TID]++
	if s.Weight[profile.OnCPU] > 0 {
		a.cpuSamples[s.TID]++
	}
	for st, w := range s.Weight {
		if w == 0 {
			continue
		}
		a.add(s, profile.State(st), s.Kernel, user, int64(w))
	}
}

func (a *Aggregator) add(s *RawSample, st profile.State, kernel, user []uint64, w int64) {
	sk := a.skey[:0]
	sk = append(sk, byte(len(kernel)))
	for _, addr := range kernel {
		sk = binary.LittleEndian.AppendUint64(sk, addr)
	}
	for _, addr := range user {
		sk = binary.LittleEndian.AppendUint64(sk, addr)
	}
	a.skey = sk
	stack := a.stacks[string(sk)]
	if stack == nil {
		both := make([]uint64, 0, len(kernel)+len(user))
		both = append(append(both, kernel...), user...)
		stack = &aggStack{id: a.nextStack, kernel: both[:len(kernel):len(kernel)], user: both[len(kernel):]}
		a.stacks[string(sk)] = stack
		a.nextStack++
	}
	a.key = entryKey(a.key[:0], s.PID, s.TID, st, stack.id, s.GoID, s.Comm)
	e, ok := a.entries[string(a.key)]
	if ok {
		e.value += w
	} else {
		comm, ok := a.comms[s.Comm]
		if !ok {
			comm = s.Comm
			a.comms[comm] = comm
		}
		e = &aggEntry{pid: s.PID, tid: s.TID, comm: comm, goid: s.GoID, state: st, stack: stack.id,
			kernel: stack.kernel, user: stack.user, value: w}
		a.entries[string(a.key)] = e
		a.order = append(a.order, e)
		a.byTID[s.TID] = append(a.byTID[s.TID], e)
	}
	if st != profile.OnCPU && s.Thin {
		e.thin += w
	}
	if st == profile.OnCPU {
		a.cpuNominal[s.TID] += w
	} else if s.Walk {
		a.walkNominal[threadState{s.TID, st}] += w
	}
	a.last[threadState{s.TID, st}] = e
	a.lastAny[s.TID] = e
	if s.Walk && s.Regs.IP != 0 {
		at := a.lastAt[s.TID]
		if at == nil {
			at = map[place]*aggEntry{}
			a.lastAt[s.TID] = at
		}
		at[place{st, s.Regs}] = e
	}
}

// addExact adds w, a time, to the entry of s's thread, state and stack,
// which holds exact times alone (its stack, ExitPathPC, is no sample's):
// it is not scaled, not in the thread's nominal weight, and no remainder
// or carry goes to it.
func (a *Aggregator) addExact(s *RawSample, st profile.State, w int64) {
	a.key = entryKey(a.key[:0], s.PID, s.TID, st, exitPathStack, 0, s.Comm)
	if e, ok := a.entries[string(a.key)]; ok {
		e.value += w
		return
	}
	comm, ok := a.comms[s.Comm]
	if !ok {
		comm = s.Comm
		a.comms[comm] = comm
	}
	e := &aggEntry{pid: s.PID, tid: s.TID, comm: comm, state: st, stack: exitPathStack,
		kernel: exitPathKernel, value: w, exact: true}
	a.entries[string(a.key)] = e
	a.order = append(a.order, e)
	a.byTID[s.TID] = append(a.byTID[s.TID], e)
}

// ExitPathPC stands, in a kernel stack, for the code a thread runs after
// its exit record: do_exit's teardown of its memory, files and links
// (ThreadTail). It is named ExitPathFunction in a profile.
const ExitPathPC = ^uint64(0)

// ExitPathFunction names the frame of a thread's exit path (ExitPathPC):
// the kernel function it runs in, with its callees.
const ExitPathFunction = "do_exit"

// exitPathStack is the interned stack number of the exit path's entries
// (no interned stack has it: they count up from 0).
const exitPathStack = ^uint32(0)

var exitPathKernel = []uint64{ExitPathPC}

// place is where a thread waits: its state and saved user registers.
type place struct {
	state profile.State
	regs  symbolize.Regs
}

// Forget drops all the aggregator holds of the processes in pids, which
// have exited: their samples, the stacks no other process has, their
// threads' counts, and their resolvers with the files those read. It
// returns their threads' ids (those whose every sample was theirs). For a
// recording looked at through its live windows alone (the agent), once
// the processes' last window is out: a long system-wide recording would
// otherwise hold every process that ever ran.
func (a *Aggregator) Forget(pids map[uint32]bool) map[uint32]bool {
	if len(pids) == 0 {
		return nil
	}
	gone := map[uint32]bool{}  // threads of the processes
	other := map[uint32]bool{} // thread ids that another process's samples have
	order := a.order[:0]
	a.dead = 0
	for _, e := range a.order {
		if !pids[e.pid] {
			order = append(order, e)
			other[e.tid] = true
			if e.dead {
				a.dead++
			}
			continue
		}
		gone[e.tid] = true
		if !e.dead {
			k := string(entryKey(a.key[:0], e.pid, e.tid, e.state, e.stack, e.goid, e.comm))
			if a.entries[k] == e {
				delete(a.entries, k)
			}
		}
	}
	clear(a.order[len(order):])
	a.order = order
	for tid := range gone {
		es := a.byTID[tid][:0]
		for _, e := range a.byTID[tid] {
			if !pids[e.pid] {
				es = append(es, e)
			}
		}
		if len(es) == 0 {
			delete(a.byTID, tid)
		} else {
			a.byTID[tid] = es
		}
		for st := range profile.NumStates {
			if e, ok := a.last[threadState{tid, st}]; ok && pids[e.pid] {
				delete(a.last, threadState{tid, st})
			}
		}
		if e, ok := a.lastAny[tid]; ok && pids[e.pid] {
			delete(a.lastAny, tid)
		}
		for k, e := range a.lastAt[tid] {
			if pids[e.pid] {
				delete(a.lastAt[tid], k)
			}
		}
		if other[tid] {
			delete(gone, tid)
			continue
		}
		delete(a.perThread, tid)
		delete(a.cpuSamples, tid)
		delete(a.cpuNominal, tid)
		a.forgetWalk(tid)
		delete(a.comm, tid)
	}
	// The walks that stopped at where a thread begins count as whole:
	// decided now, while the resolvers are here (UnwindCounts).
	for k, n := range a.unwind.stopsAt {
		if !pids[k.pid] {
			continue
		}
		if a.threadEntry(k.pid, a.resolvers[k.pid], k.addr, k.leaf) {
			if k.on {
				a.unwind.OnCPU[k.why] -= n
				a.unwind.OnCPU[UnwindEnd] += n
			} else {
				a.unwind.OffCPU[k.why] -= n
				a.unwind.OffCPU[UnwindEnd] += n
			}
		}
		delete(a.unwind.stopsAt, k)
	}
	for k := range a.entryCache {
		if pids[k.pid] {
			delete(a.entryCache, k)
		}
	}
	for pid := range pids {
		if c, ok := a.resolvers[pid].(io.Closer); ok {
			c.Close() // its files go back to the cache
		}
		delete(a.resolvers, pid)
	}
	carried := a.carried[:0]
	for _, r := range a.carried {
		if !pids[r.PID] {
			carried = append(carried, r)
		}
	}
	a.carried = carried
	a.sweepStacks()
	return gone
}

// sweepStacks drops the interned stacks and names no entry has any more.
func (a *Aggregator) sweepStacks() {
	used := make(map[uint32]bool, len(a.order))
	comms := make(map[string]string, len(a.comms))
	for _, e := range a.order {
		used[e.stack] = true
		comms[e.comm] = e.comm
	}
	for k, st := range a.stacks {
		if !used[st.id] {
			delete(a.stacks, k)
		}
	}
	a.comms = comms
}

// entryKey appends the key of an entry to k.
func entryKey(k []byte, pid, tid uint32, st profile.State, stack uint32, goid uint64, comm string) []byte {
	k = binary.LittleEndian.AppendUint32(k, pid)
	k = binary.LittleEndian.AppendUint32(k, tid)
	k = append(k, byte(st))
	k = binary.LittleEndian.AppendUint32(k, stack)
	k = binary.LittleEndian.AppendUint64(k, goid)
	return append(k, comm...)
}

// Fold moves the samples of thread tid of process pid, which exited, to
// thread into (its process's record of exited threads: Session.OnFold),
// adding them to the samples already there with the same state and stack,
// so that a program that keeps starting threads costs memory by distinct
// stack, not by thread.
func (a *Aggregator) Fold(pid, tid, into uint32) {
	moved := map[*aggEntry]*aggEntry{}
	var keep []*aggEntry // another process's thread that had the id
	for _, e := range a.byTID[tid] {
		if e.dead {
			continue
		}
		if e.pid != pid {
			keep = append(keep, e)
			continue
		}
		delete(a.entries, string(entryKey(a.key[:0], e.pid, e.tid, e.state, e.stack, e.goid, e.comm)))
		a.key = entryKey(a.key[:0], e.pid, into, e.state, e.stack, e.goid, e.comm)
		if d := a.entries[string(a.key)]; d != nil {
			d.value += e.value
			e.dead = true
			a.dead++
			moved[e] = d
			if a.live != nil {
				a.live.merged(e, d)
			}
			continue
		}
		e.tid = into
		a.entries[string(a.key)] = e
		a.byTID[into] = append(a.byTID[into], e)
		moved[e] = e
	}
	if len(keep) > 0 {
		a.byTID[tid] = keep
	} else {
		delete(a.byTID, tid)
	}
	for st := range profile.NumStates {
		if e, ok := a.last[threadState{tid, st}]; ok && moved[e] != nil {
			delete(a.last, threadState{tid, st})
			a.last[threadState{into, st}] = moved[e]
		}
	}
	if e, ok := a.lastAny[tid]; ok && moved[e] != nil {
		delete(a.lastAny, tid)
		a.lastAny[into] = moved[e]
	}
	for k, e := range a.lastAt[tid] {
		if moved[e] != nil {
			delete(a.lastAt[tid], k) // its thread's places end with it
		}
	}
	if len(a.lastAt[tid]) == 0 {
		delete(a.lastAt, tid)
	}
	if len(keep) == 0 {
		// The counts by thread id are the thread's (none of another
		// process's thread that had the id is left).
		a.perThread[into] += a.perThread[tid]
		a.cpuSamples[into] += a.cpuSamples[tid]
		a.cpuNominal[into] += a.cpuNominal[tid]
		for st := profile.State(0); st < profile.NumStates; st++ {
			if n, ok := a.walkNominal[threadState{tid, st}]; ok {
				a.walkNominal[threadState{into, st}] += n
			}
		}
		delete(a.perThread, tid)
		delete(a.cpuSamples, tid)
		delete(a.cpuNominal, tid)
		a.forgetWalk(tid)
		delete(a.comm, tid)
		if a.live != nil {
			a.live.folded(tid, into)
		}
	}
	if a.dead > 1024 && a.dead > len(a.order)/2 {
		live := a.order[:0]
		for _, e := range a.order {
			if !e.dead {
				live = append(live, e)
			}
		}
		clear(a.order[len(live):])
		a.order, a.dead = live, 0
	}
}

// UnsampledFunction names the frame that stands for on-CPU time of a thread
// that no timer sample caught (its bursts added up to less than a sampling
// period or two): its stack was never observed, so none is invented.
const UnsampledFunction = "[on-CPU, not sampled]"

// Scale is, per thread and state, the factor from the nominal weight of its
// samples (one sampling period each: the timer's on CPU, the walks' off CPU
// in walk mode) to its exact time in that state.
type Scale map[threadState]float64

// Scale returns the factors that make the sampled states of each thread of
// res add up to its exact time in them.
func (a *Aggregator) Scale(res *Result) Scale {
	out := Scale{}
	exact := a.exactTimes()
	for _, t := range res.Threads {
		for st := profile.State(0); st < profile.NumStates; st++ {
			if n := a.nominal(t.TID, st); n > 0 {
				k := threadState{t.TID, st}
				out[k] = float64(max(int64(t.Time[st])-exact[k], 0)) / float64(n)
			}
		}
	}
	return out
}

// exactTimes sums, per thread and state, the times of its exact entries
// (RawSample.Exact): the part of its time that needs no sample.
func (a *Aggregator) exactTimes() map[threadState]int64 {
	out := map[threadState]int64{}
	for _, e := range a.order {
		if e.exact && !e.dead {
			out[threadState{e.tid, e.state}] += e.value
		}
	}
	return out
}

// nominal is the summed nominal weight of thread tid's samples in state st,
// 0 where its samples there carry exact times.
func (a *Aggregator) nominal(tid uint32, st profile.State) int64 {
	if st == profile.OnCPU {
		return a.cpuNominal[tid]
	}
	return a.walkNominal[threadState{tid, st}]
}

// sampled reports whether the samples of state st are nominal and scaled to
// the threads' times: on CPU always, off CPU in walk mode.
func sampled(res *Result, st profile.State) bool {
	return st == profile.OnCPU || res.Walk
}

func (a *Aggregator) forgetWalk(tid uint32) {
	for st := profile.State(0); st < profile.NumStates; st++ {
		delete(a.walkNominal, threadState{tid, st})
	}
}

// spread gives each thread's exact time in a sampled state (on CPU; off
// CPU too in walk mode) to its samples of that state in proportion to
// their counts: the share of a function within a thread is the share of
// the thread's samples that caught it, perf's estimate, unbiased at any
// rate, and the thread's total stays the kernel's. Time on CPU is never
// given to a stack seen off CPU. A thread that spent time in a state but
// that no sample caught there gets one sample under UnsampledFunction.
// Rounding goes to the thread's largest sample, so totals are exact to the
// nanosecond.
func (a *Aggregator) spread(res *Result) {
	byThread := map[threadState][]*aggEntry{}
	exact := a.exactTimes()
	for _, e := range a.order {
		if sampled(res, e.state) && !e.unsampled && !e.dead && !e.exact {
			k := threadState{e.tid, e.state}
			byThread[k] = append(byThread[k], e)
		}
	}
	for _, t := range res.Threads {
		for st := profile.State(0); st < profile.NumStates; st++ {
			if !sampled(res, st) {
				continue
			}
			k := threadState{t.TID, st}
			total := max(int64(t.Time[st])-exact[k], 0)
			es := byThread[k]
			delete(byThread, k)
			n := a.nominal(t.TID, st)
			if len(es) == 0 || n <= 0 {
				if total > 0 {
					e := &aggEntry{pid: t.PID, tid: t.TID, comm: t.Name, state: st, value: total, unsampled: true}
					if e.comm == "" {
						e.comm = a.comm[t.TID]
					}
					a.order = append(a.order, e)
				}
				for _, e := range es {
					e.value = 0
				}
				continue
			}
			var given int64
			big := es[0]
			for _, e := range es {
				e.value = int64(float64(e.value) * float64(total) / float64(n))
				given += e.value
				if e.value > big.value {
					big = e
				}
			}
			big.value += total - given
		}
	}
	// Samples of a thread id that no record has (none should be left: the
	// kernel side drops a thread's samples from its exit on) are in no
	// thread's total: they are counted as lost rather than kept at a
	// nominal weight that the totals do not have.
	for k, es := range byThread {
		for _, e := range es {
			e.dead = true
			a.dead++
			if res.Lost == nil {
				res.Lost = map[string]uint64{}
			}
			if k.state == profile.OnCPU {
				res.Lost["cpu-sample-without-thread"]++
			} else {
				res.Lost["walk-sample-without-thread"]++
			}
		}
	}
}

// scale multiplies the sampled states' samples of each thread by its factor
// in s (threads without one keep their nominal weights).
func (a *Aggregator) scale(s Scale) {
	for _, e := range a.order {
		if f, ok := s[threadState{e.tid, e.state}]; ok && !e.unsampled && !e.dead && !e.exact {
			e.value = int64(float64(e.value) * f)
		}
	}
}

// AddRemainder adds time that no sample represents to the latest sample of
// the same thread and state (or, failing that, to the thread's latest stack
// in that state): the stack a thread was last seen in is the likeliest one
// for the few milliseconds after it. A thread with no sample at all keeps the
// time in its totals only.
func (a *Aggregator) AddRemainder(r Remainder) bool {
	if e, ok := a.last[threadState{r.TID, r.State}]; ok {
		e.value += int64(r.Nanos)
		return true
	}
	e, ok := a.lastAny[r.TID]
	if !ok {
		return false
	}
	a.add(&RawSample{PID: e.pid, TID: e.tid, Comm: e.comm, GoID: e.goid}, r.State, e.kernel, e.user, int64(r.Nanos))
	return true
}

// Build turns a recording's result and its aggregated samples into a
// symbolized profile: each thread's on-CPU samples add up to its exact CPU
// time (spread), its off-CPU samples and remainders to its off-CPU time.
func Build(res *Result, a *Aggregator, kernel KernelResolver, command string) *profile.Profile {
	res = a.HoldWalkRemainders(res)
	thinned := !res.Walk && res.DroppedOffCPU > 0
	if thinned {
		// The exact times first: remainders and carries are part of
		// what the thin samples are scaled against.
		for _, r := range append(a.carried, res.Remainders...) {
			a.AddRemainder(r)
		}
		a.carried = nil
		c := *res
		c.Remainders = nil
		res = &c
	}
	a.spread(res)
	if thinned {
		a.scaleThin(res)
	}
	return build(res, a, kernel, command)
}

// scaleThin gives each thread's off-CPU time in a state that its exact
// samples (more than a period each, remainders, carries, the end's) do not
// hold to its thin samples there, in proportion to their weights: the
// resumption accounting's budget left out some samples of one period, and
// which it left out depends on the time, not on where the thread waited.
// A thread none of whose thin samples was left out gets its samples'
// own times back.
func (a *Aggregator) scaleThin(res *Result) {
	type sums struct{ exact, thin int64 }
	by := map[threadState]*sums{}
	for _, e := range a.order {
		if e.state == profile.OnCPU || e.dead || e.unsampled || e.thin == 0 {
			continue
		}
		k := threadState{e.tid, e.state}
		if by[k] == nil {
			by[k] = &sums{}
		}
	}
	for _, e := range a.order {
		if s := by[threadState{e.tid, e.state}]; s != nil && !e.dead && !e.unsampled {
			s.exact += e.value - e.thin
			s.thin += e.thin
		}
	}
	factor := map[threadState]float64{}
	for _, t := range res.Threads {
		for st := profile.Runnable; st < profile.NumStates; st++ {
			k := threadState{t.TID, st}
			s := by[k]
			if s == nil {
				continue
			}
			if target := int64(t.Time[st]) - s.exact; target > s.thin {
				factor[k] = float64(target) / float64(s.thin)
			}
		}
	}
	// Rounding goes to the thread's largest thin sample of the state, so
	// that its samples add up to its time to the nanosecond.
	left := map[threadState]int64{}
	big := map[threadState]*aggEntry{}
	for k, s := range by {
		if _, ok := factor[k]; ok {
			left[k] = s.thin
		}
	}
	for _, t := range res.Threads {
		for st := profile.Runnable; st < profile.NumStates; st++ {
			k := threadState{t.TID, st}
			if _, ok := factor[k]; ok {
				left[k] = int64(t.Time[st]) - by[k].exact
			}
		}
	}
	for _, e := range a.order {
		k := threadState{e.tid, e.state}
		if f, ok := factor[k]; ok && e.thin > 0 && !e.dead && !e.unsampled {
			add := int64(float64(e.thin) * f)
			e.value += add - e.thin
			left[k] -= add
			if b := big[k]; b == nil || e.thin > b.thin {
				big[k] = e
			}
		}
	}
	for k, e := range big {
		e.value += left[k]
	}
	for _, e := range a.order {
		e.thin = 0
	}
}

// HoldWalkRemainders gives a walking recording's remainders (the weights a
// thread's walks held for its latest sample of a state, walk_hold, still
// held at its exit or the end) to those samples as the walks' carries are,
// nominal weights to be scaled with them; it returns res without them.
// Build calls it; a caller that takes Scale first calls it before.
func (a *Aggregator) HoldWalkRemainders(res *Result) *Result {
	if !res.Walk || len(res.Remainders) == 0 {
		return res
	}
	for _, r := range res.Remainders {
		a.Add(&RawSample{PID: r.PID, TID: r.TID, Carry: true, Walk: true, Weight: weightIn(r.State, r.Nanos)})
	}
	c := *res
	c.Remainders = nil
	return &c
}

// weightIn is a sample weight of w in state st alone.
func weightIn(st profile.State, w uint64) (weight [profile.NumStates]uint64) {
	weight[st] = w
	return weight
}

// BuildWindow builds the profile of samples aggregated over part of a
// recording (the goroutine view's window), scaling on-CPU samples by the
// whole recording's factors (Aggregator.Scale of its aggregator, taken
// before Build), so that a sample weighs the same in both profiles.
func BuildWindow(res *Result, a *Aggregator, scale Scale, kernel KernelResolver, command string) *profile.Profile {
	a.scale(scale)
	return build(res, a, kernel, command)
}

func build(res *Result, a *Aggregator, kernel KernelResolver, command string) *profile.Profile {
	for _, r := range append(a.carried, res.Remainders...) {
		a.AddRemainder(r)
	}
	return buildEntries(res, a, a.order, kernel, command)
}

// buildEntries builds the profile of entries, aggregated by a, with the
// threads of res.
func buildEntries(res *Result, a *Aggregator, entries []*aggEntry, kernel KernelResolver, command string) *profile.Profile {
	p := &profile.Profile{
		Start:    res.WallStart,
		Duration: time.Duration(res.EndNs - res.StartNs),
		Period:   int64(res.PeriodNs),
		Command:  command,
		Lost:     map[string]uint64{},
	}
	for k, v := range res.Lost {
		if v > 0 {
			p.Lost[k] = v
		}
	}
	cost := res.Cost
	p.Cost = &cost
	p.Recorder = &profile.Recorder{Accounting: profile.AccountSwitchTime, Kernel: res.Kernel}
	if res.Resume {
		p.Recorder.Accounting = profile.AccountResumption
	}
	if res.Walk {
		p.Recorder.Accounting = profile.AccountWalk
		if res.WalkTimer {
			p.Recorder.Accounting = profile.AccountWalkTimer
		}
	}
	b := &builder{p: p, a: a, kernel: kernel, locs: map[locKey]*profile.Location{}, maps: map[*profile.Mapping]*profile.Mapping{}}
	for _, e := range entries {
		if !e.dead {
			p.Samples = append(p.Samples, b.sample(e))
		}
	}
	for _, t := range res.Threads {
		p.Threads = append(p.Threads, b.thread(res, t))
	}
	p.SortThreads()
	return p
}

type locKey struct {
	pid  uint32 // 0 for the kernel
	addr uint64
}

type builder struct {
	p      *profile.Profile
	a      *Aggregator
	kernel KernelResolver
	locs   map[locKey]*profile.Location
	maps   map[*profile.Mapping]*profile.Mapping
	kmap   *profile.Mapping

	unsampled [2]*profile.Location
}

func (b *builder) sample(e *aggEntry) *profile.Sample {
	s := &profile.Sample{PID: int(e.pid), TID: int(e.tid), Thread: e.comm, GoID: e.goid, State: e.state, Value: e.value}
	if e.unsampled {
		s.Stack = []*profile.Location{b.unsampledLoc(e.state)}
		return s
	}
	if e.exact {
		s.Stack = []*profile.Location{b.exitPathLoc()}
		return s
	}
	for i, addr := range e.kernel {
		s.Stack = append(s.Stack, b.kernelLoc(addr, i == 0))
	}
	// Off-CPU samples, taken at a switch, start inside the scheduler. An
	// on-CPU sample is where the timer found the CPU: if that was the
	// scheduler, the scheduler ran.
	if e.state != profile.OnCPU {
		s.Stack = trimScheduler(s.Stack)
	}
	r := b.a.resolvers[e.pid]
	for i, addr := range e.user {
		// user[0] is the thread's saved instruction pointer, an exact pc
		// (the interrupted instruction, or the one after the syscall);
		// the others are return addresses.
		s.Stack = append(s.Stack, b.userLoc(e.pid, r, addr, i == 0))
	}
	if len(s.Stack) == 0 {
		// The stacks could not be read: keep the time, under a frame that says so.
		s.Stack = append(s.Stack, b.userLoc(e.pid, nil, 0, true))
	}
	return s
}

// unsampledLoc is the location of UnsampledFunction (on CPU) or
// UnseenOffCPUFunction: no address, no mapping.
func (b *builder) unsampledLoc(st profile.State) *profile.Location {
	i, name := 0, UnsampledFunction
	if st != profile.OnCPU {
		i, name = 1, UnseenOffCPUFunction
	}
	if b.unsampled[i] == nil {
		b.unsampled[i] = &profile.Location{ID: uint64(len(b.p.Locs) + 1), Frames: []profile.Frame{{Function: name}}}
		b.p.Locs = append(b.p.Locs, b.unsampled[i])
	}
	return b.unsampled[i]
}

// exitPathLoc is the location of ExitPathFunction: in the kernel's
// mapping, with no address (no one instruction).
func (b *builder) exitPathLoc() *profile.Location {
	key := locKey{0, ExitPathPC}
	if l, ok := b.locs[key]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(b.p.Locs) + 1), Frames: []profile.Frame{{Function: ExitPathFunction}}}
	if b.kernel != nil {
		if b.kmap == nil {
			b.kmap = b.addMapping(b.kernel.KernelMapping())
		}
		l.Mapping = b.kmap
	}
	b.locs[key] = l
	b.p.Locs = append(b.p.Locs, l)
	return l
}

func (b *builder) kernelLoc(addr uint64, leaf bool) *profile.Location {
	if !leaf && addr > 0 {
		addr-- // look up the call, not the instruction after it
	}
	key := locKey{0, addr}
	if l, ok := b.locs[key]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(b.p.Locs) + 1), Address: addr}
	if b.kernel != nil {
		if b.kmap == nil {
			b.kmap = b.addMapping(b.kernel.KernelMapping())
		}
		l.Mapping = b.kmap
		l.Frames = []profile.Frame{b.kernel.Resolve(addr)}
	} else {
		l.Frames = []profile.Frame{{Function: fmt.Sprintf("[kernel]+0x%x", addr)}}
	}
	b.locs[key] = l
	b.p.Locs = append(b.p.Locs, l)
	return l
}

func (b *builder) userLoc(pid uint32, r ProcessResolver, addr uint64, leaf bool) *profile.Location {
	if !leaf && addr > 0 {
		addr--
	}
	key := locKey{pid, addr}
	if l, ok := b.locs[key]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(b.p.Locs) + 1), Address: addr}
	var frames []profile.Frame
	var m *profile.Mapping
	if r != nil {
		m, frames = r.Resolve(addr)
		if m == nil && len(frames) > 0 && isUnknown(frames[0].Function) {
			// Maybe mapped after we read the maps (dlopen, exec): look again.
			if r.Refresh() == nil {
				m, frames = r.Resolve(addr)
			}
		}
	}
	if len(frames) == 0 {
		if addr == 0 {
			frames = []profile.Frame{{Function: "[stack unavailable]"}}
		} else {
			frames = []profile.Frame{{Function: fmt.Sprintf("[unknown]+0x%x", addr)}}
		}
	}
	l.Frames = frames
	l.Mapping = b.addMapping(m)
	b.locs[key] = l
	b.p.Locs = append(b.p.Locs, l)
	return l
}

func isUnknown(fn string) bool {
	return len(fn) > 9 && fn[:9] == "[unknown]"
}

func (b *builder) addMapping(m *profile.Mapping) *profile.Mapping {
	if m == nil {
		return nil
	}
	if c, ok := b.maps[m]; ok {
		return c
	}
	c := *m
	c.ID = uint64(len(b.p.Mappings) + 1)
	b.maps[m] = &c
	b.p.Mappings = append(b.p.Mappings, &c)
	return &c
}

func (b *builder) thread(res *Result, t *ThreadRecord) *profile.Thread {
	th := &profile.Thread{PID: int(t.PID), TID: int(t.TID), Name: t.Name, Exited: t.Exited,
		Samples: b.a.perThread[t.TID], CPUSamples: b.a.cpuSamples[t.TID]}
	if th.Name == "" {
		th.Name = b.a.comm[t.TID]
	}
	if t.FirstNs > res.StartNs {
		th.Start = time.Duration(t.FirstNs - res.StartNs)
	}
	if t.EndNs > res.StartNs {
		th.End = time.Duration(t.EndNs - res.StartNs)
	}
	for i, v := range t.Time {
		th.Time[i] = time.Duration(v)
	}
	return th
}

// SortedThreads is a helper for tests: thread records by TID.
func SortedThreads(ts []*ThreadRecord) []*ThreadRecord {
	out := append([]*ThreadRecord(nil), ts...)
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out
}

// schedulerFuncs are the kernel functions through which every thread leaves
// a CPU. An off-CPU stack taken inside the scheduler (at a preemption) starts
// with them and with the tracing machinery that ran the probe; trimming up to
// the outermost of them leaves the function that blocked or was preempted as
// the leaf, as in stacks taken from a sleeping task.
var schedulerFuncs = map[string]bool{
	"__schedule": true, "schedule": true, "preempt_schedule": true, "preempt_schedule_irq": true,
	"preempt_schedule_common": true, "preempt_schedule_notrace": true, "__cond_resched": true,
	"schedule_preempt_disabled": true,
}

// tracingFrame reports whether fn is the tracing machinery that called
// wallprof's program (a tracepoint's iterator, BPF's trampoline for it) or
// one of wallprof's programs: the top of a stack taken inside the program
// rather than at a switch (a new thread's first resumption, which no
// switch-out preceded).
func tracingFrame(fn string) bool {
	for _, p := range []string{"bpf_prog_", "bpf_trace_run", "__traceiter_", "__bpf_trace_"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// trimScheduler drops the leaf frames up to the outermost scheduler function
// (or tracing frame) among the first few frames of a kernel stack.
func trimScheduler(stack []*profile.Location) []*profile.Location {
	cut := -1
	for i := 0; i < len(stack) && i < 16; i++ {
		l := stack[i]
		if l.Mapping == nil || !l.Mapping.Kernel || len(l.Frames) == 0 {
			break
		}
		if fn := l.Frames[len(l.Frames)-1].Function; schedulerFuncs[fn] || tracingFrame(fn) {
			cut = i
		}
	}
	return stack[cut+1:]
}
