package latency

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/latency/bpf"
	"github.com/wallprof/wallprof/internal/linux"
)

// This file splits the calls whose goroutine stopped running on the way
// (doc/latency-split.md, "Where a goroutine that stops spends the call"):
// their thread's counters cannot, since the goroutine may have run on
// other threads and its threads other goroutines. Instead the goroutine
// table is read every interval (the goroutine view's reader: no probe in
// the scheduler, whose every goroutine switch would cost a uprobe hit),
// and each such call, sent by the RET probe with its goroutine id, start
// and end, gets the states its goroutine was seen in between: running,
// runnable, in a system call, or waiting, by the runtime's wait reason.

// States of a sample that are not a wait reason.
const (
	StateRunning  = "running"
	StateRunnable = "runnable"
	StateSyscall  = "syscall"
)

const (
	// waitKeep is how many samples each goroutine keeps: a call longer
	// than that many intervals is split by its last ones.
	waitKeep = 1024
	// stateMissing marks a sample in which the goroutine was not read.
	stateMissing = 0xffff
)

// The flags of a call the probes send, as in latency.bpf.c.
const (
	callStopped = 1
	callSlow    = 2
)

type waitKey struct {
	fn, bucket int
	state      uint16
}

// cpuSample is an on-CPU sample of a goroutine in an open call.
type cpuSample struct {
	time  int64  // CLOCK_MONOTONIC ns
	stack uint32 // its number in stackList
}

type goStates struct {
	first  int      // the sample sequence number of states[0]
	states []uint16 // one per sample from first on
	stacks []uint32 // with the slow calls' profile: the stack's number in each (0: none)
	last   int      // the last sample it was seen in
}

// WaitSampler samples a process's goroutine states for the calls that
// stopped. Start it with StartWaits, read it with Report, stop it with
// Stop.
type WaitSampler struct {
	interval time.Duration
	reader   *goroutines.Reader
	ring     *ringbuf.Reader
	t0       time.Time
	mono0    int64

	mu       sync.Mutex
	states   []string
	stateIdx map[string]uint16
	times    []int64 // the samples' times (CLOCK_MONOTONIC ns), from sequence number base on
	base     int
	seq      int // the next sample's sequence number
	byGoid   map[uint64]*goStates
	pending  []bpf.LatencyStoppedCall
	counts   map[waitKey]uint64
	calls    map[[2]int]uint64 // fn, log2 bucket: stopped calls
	sampled  map[[2]int]uint64 // of which seen in at least one sample
	unread   map[[2]int]uint64 // samples during a call that did not read its goroutine
	failed   int               // samples that could not be read
	// firstTime and lastTime are the first and latest samples' times:
	// their mean spacing is what a sample stands for (the reads come
	// later than asked when reading takes long).
	firstTime, lastTime int64
	// The slow calls' profile (StartWaits with slow set): the stacks seen,
	// and the samples of the slow calls by function, state and stack.
	slow      bool
	stackIdx  map[string]uint32
	stackList [][]uint64         // by number - 1
	slowCount map[slowKey]uint64 // the reads not running
	slowCalls map[int]uint64     // per function
	// The on-CPU samples of goroutines in an open call (Options.CPUPeriod):
	// the running reads of a function's slow calls say how long they ran,
	// the samples taken during them where.
	cpu       *ringbuf.Reader
	cpuByGoid map[uint64][]cpuSample
	cpuPeriod time.Duration
	cpuTaken  uint64                    // on-CPU samples received
	slowRuns  map[int]uint64            // per function: its slow calls' running reads
	slowCPU   map[int]map[uint32]uint64 // per function and stack: on-CPU samples in its slow calls
	cost      time.Duration             // wallprof's time reading the table
	stopOnce  sync.Once
	stop      chan struct{}
	done      chan struct{}
}

// StartWaits samples the goroutine table of process pid every interval,
// for the stopped calls that session s sends.
func (s *Session) StartWaits(pid int, interval time.Duration, slow bool) (*WaitSampler, error) {
	if s.objs.Stopped == nil {
		return nil, errors.New("the probes do not send stopped calls")
	}
	r, err := goroutines.Open(pid)
	if err != nil {
		return nil, err
	}
	r.SetStackCache(1 << 20)
	rb, err := ringbuf.NewReader(s.objs.Stopped)
	if err != nil {
		r.Close()
		return nil, err
	}
	var cpu *ringbuf.Reader
	if slow && s.cpuPeriod > 0 {
		if cpu, err = ringbuf.NewReader(s.objs.Cpu); err != nil {
			rb.Close()
			r.Close()
			return nil, err
		}
	}
	t0, mono0 := time.Now(), int64(linux.Monotonic())
	w := &WaitSampler{interval: interval, reader: r, ring: rb, t0: t0, mono0: mono0,
		stateIdx: map[string]uint16{}, byGoid: map[uint64]*goStates{}, counts: map[waitKey]uint64{},
		calls: map[[2]int]uint64{}, sampled: map[[2]int]uint64{}, unread: map[[2]int]uint64{},
		slow: slow, stackIdx: map[string]uint32{}, slowCount: map[slowKey]uint64{}, slowCalls: map[int]uint64{},
		cpu: cpu, cpuPeriod: s.cpuPeriod, cpuByGoid: map[uint64][]cpuSample{}, slowRuns: map[int]uint64{}, slowCPU: map[int]map[uint32]uint64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// mono converts t to CLOCK_MONOTONIC ns, the probes' clock.
func (w *WaitSampler) mono(t time.Time) int64 { return w.mono0 + int64(t.Sub(w.t0)) }

func (w *WaitSampler) loop() {
	defer close(w.done)
	// The reads are spread at random around the interval (0.5 to 1.5 of
	// it): at a fixed period they would lock onto a program's own periodic
	// phases (timers in whole milliseconds) and see some states more often
	// than their share of the time.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	timer := time.NewTimer(w.interval / 2)
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			w.drain(true)
			return
		case <-timer.C:
		}
		timer.Reset(w.interval/2 + time.Duration(rng.Int64N(int64(w.interval))))
		t := time.Now()
		snap, err := w.reader.Snapshot()
		w.mu.Lock()
		w.cost += time.Since(t)
		if err != nil {
			w.failed++
		} else {
			w.add(snap)
		}
		w.mu.Unlock()
		w.drain(false)
	}
}

// stateOf names what goroutine g was doing.
func stateOf(g *goroutines.Goroutine) (string, bool) {
	switch g.Status {
	case goroutines.Running, goroutines.Copystack:
		return StateRunning, true
	case goroutines.Runnable, goroutines.Preempted:
		return StateRunnable, true
	case goroutines.Syscall:
		return StateSyscall, true
	case goroutines.Waiting, goroutines.Leaked:
		if g.WaitReason == "" {
			return "waiting", true
		}
		return g.WaitReason, true
	}
	return "", false
}

func (w *WaitSampler) state(name string) uint16 {
	i, ok := w.stateIdx[name]
	if !ok {
		i = uint16(len(w.states))
		w.states = append(w.states, name)
		w.stateIdx[name] = i
	}
	return i
}

// add records one sample of the table. Called with w.mu held.
func (w *WaitSampler) add(snap goroutines.Snapshot) {
	seq := w.seq
	w.seq++
	w.times = append(w.times, w.mono(snap.Time.Add(snap.Elapsed/2)))
	if seq == 0 {
		w.firstTime = w.times[0]
	}
	w.lastTime = w.times[len(w.times)-1]
	for i := range snap.Goroutines {
		g := &snap.Goroutines[i]
		name, ok := stateOf(g)
		if !ok {
			continue
		}
		if _, known := w.stateIdx[name]; !known && len(w.states) >= stateMissing-1 {
			continue
		}
		st := w.state(name)
		gs := w.byGoid[g.ID]
		if gs == nil {
			gs = &goStates{first: seq}
			w.byGoid[g.ID] = gs
		}
		for gs.first+len(gs.states) < seq {
			gs.states = append(gs.states, stateMissing)
			if w.slow {
				gs.stacks = append(gs.stacks, 0)
			}
		}
		gs.states = append(gs.states, st)
		if w.slow {
			gs.stacks = append(gs.stacks, w.stackID(g.Stack))
		}
		gs.last = seq
		if len(gs.states) > 2*waitKeep {
			n := len(gs.states) - waitKeep
			gs.states = append(gs.states[:0], gs.states[n:]...)
			if w.slow {
				gs.stacks = append(gs.stacks[:0], gs.stacks[n:]...)
			}
			gs.first += n
		}
	}
	// Forget the samples no call can reach any more, and the goroutines
	// not seen in that long.
	if len(w.times) > 2*waitKeep {
		n := len(w.times) - waitKeep
		w.times = append(w.times[:0], w.times[n:]...)
		w.base += n
		for id, gs := range w.byGoid {
			if gs.last < w.base {
				delete(w.byGoid, id)
			}
		}
		for id, ss := range w.cpuByGoid {
			i := sort.Search(len(ss), func(i int) bool { return ss[i].time >= w.times[0] })
			if i == len(ss) {
				delete(w.cpuByGoid, id)
			} else if i > 0 {
				w.cpuByGoid[id] = append(ss[:0], ss[i:]...)
			}
		}
	}
}

// drain reads the stopped calls sent so far and splits those that ended
// before the last sample (all: at the end).
func (w *WaitSampler) drain(all bool) {
	var rec ringbuf.Record
	// The on-CPU samples first: those of a call that ended are all in the
	// ring by then.
	for w.cpu != nil {
		w.cpu.SetDeadline(time.Now())
		if err := w.cpu.ReadInto(&rec); err != nil {
			break
		}
		w.mu.Lock()
		w.addCPU(rec.RawSample)
		w.mu.Unlock()
	}
	for {
		w.ring.SetDeadline(time.Now())
		if err := w.ring.ReadInto(&rec); err != nil {
			break
		}
		if len(rec.RawSample) < 32 {
			continue
		}
		var c bpf.LatencyStoppedCall
		b := rec.RawSample
		c.Fn = le32(b[0:])
		c.Flags = le32(b[4:])
		c.Goid = le64(b[8:])
		c.Start = le64(b[16:])
		c.End = le64(b[24:])
		w.mu.Lock()
		w.pending = append(w.pending, c)
		w.mu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var last int64
	if len(w.times) > 0 {
		last = w.times[len(w.times)-1]
	}
	keep := w.pending[:0]
	for _, c := range w.pending {
		if !all && int64(c.End) > last {
			keep = append(keep, c)
			continue
		}
		if c.Flags&callStopped != 0 {
			w.split(c)
		}
		if c.Flags&callSlow != 0 {
			w.addSlow(c)
		}
	}
	w.pending = keep
}

// split counts the samples of call c's goroutine between its start and
// end. Called with w.mu held.
func (w *WaitSampler) split(c bpf.LatencyStoppedCall) {
	d := int64(c.End - c.Start)
	k := [2]int{int(c.Fn), log2(uint64(max(d, 1)))}
	w.calls[k]++
	gs := w.byGoid[c.Goid]
	if gs == nil {
		return
	}
	lo := sort.Search(len(w.times), func(i int) bool { return w.times[i] >= int64(c.Start) })
	seen := false
	for i := lo; i < len(w.times) && w.times[i] <= int64(c.End); i++ {
		j := w.base + i - gs.first
		if j < 0 || j >= len(gs.states) || gs.states[j] == stateMissing {
			w.unread[k]++
			continue
		}
		w.counts[waitKey{k[0], k[1], gs.states[j]}]++
		seen = true
	}
	if seen {
		w.sampled[k]++
	}
}

func log2(v uint64) int {
	k := 0
	for v > 1 {
		v >>= 1
		k++
	}
	return k
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func le64(b []byte) uint64 { return uint64(le32(b)) | uint64(le32(b[4:]))<<32 }

// Stop ends the sampling and splits the calls still pending with the
// samples taken. It may be called more than once.
func (w *WaitSampler) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		<-w.done
		w.ring.Close()
		if w.cpu != nil {
			w.cpu.Close()
		}
		w.reader.Close()
	})
}

// Samples returns how many samples were taken and failed, and wallprof's
// time spent reading the table.
func (w *WaitSampler) Samples() (taken, failed int, cost time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq, w.failed, w.cost
}

// Report returns function fn's split of its stopped calls (nil when none
// were sent).
func (w *WaitSampler) Report(fn int) *WaitReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &WaitReport{IntervalNs: int64(w.interval), Buckets: []WaitBucket{}}
	total := map[uint16]uint64{}
	for k := range NLog2 {
		key := [2]int{fn, k}
		calls := w.calls[key]
		if calls == 0 {
			continue
		}
		r.Calls += calls
		r.Sampled += w.sampled[key]
		r.Unread += w.unread[key]
		per := map[uint16]uint64{}
		var n uint64
		for st := range w.states {
			if v := w.counts[waitKey{fn, k, uint16(st)}]; v > 0 {
				per[uint16(st)] = v
				total[uint16(st)] += v
				n += v
			}
		}
		lo := int64(1) << k
		if k == 0 {
			lo = 0
		}
		r.Buckets = append(r.Buckets, WaitBucket{LoNs: lo, HiNs: int64(1) << (k + 1), Calls: calls,
			Sampled: w.sampled[key], Samples: n, States: w.shares(per, n)})
		r.Samples += n
	}
	if r.Calls == 0 {
		return nil
	}
	r.States = w.shares(total, r.Samples)
	return r
}

func (w *WaitSampler) shares(per map[uint16]uint64, n uint64) []StateShare {
	out := []StateShare{}
	for st, v := range per {
		out = append(out, StateShare{State: w.states[st], Samples: v, Share: float64(v) / float64(n)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Samples != out[j].Samples {
			return out[i].Samples > out[j].Samples
		}
		return out[i].State < out[j].State
	})
	return out
}

// WaitReport is where the calls whose goroutine stopped running spent
// their time, by the goroutine's state in the samples of the goroutine
// table taken during each call (every interval_ns): running (on a thread;
// its thread may have been waiting for a CPU), runnable (in Go's run
// queue), syscall, or a wait reason ("sleep", "chan receive", "IO wait",
// "sync.Mutex.Lock", ...). A call shorter than the interval is seen in at
// most one sample, often none: the shares are over many calls.
type WaitReport struct {
	IntervalNs int64  `json:"interval_ns"`
	Calls      uint64 `json:"calls"`
	Sampled    uint64 `json:"sampled_calls"`
	Samples    uint64 `json:"samples"`
	// Unread counts the reads of the table during a call that did not
	// read its goroutine (it changed while read, every retry).
	Unread  uint64       `json:"unread_samples"`
	States  []StateShare `json:"states"`
	Buckets []WaitBucket `json:"buckets"`
}

// StateShare is one state's samples and share of the samples.
type StateShare struct {
	State   string  `json:"state"`
	Samples uint64  `json:"samples"`
	Share   float64 `json:"share"`
}

// WaitBucket is the states of the stopped calls that took [lo_ns, hi_ns).
type WaitBucket struct {
	LoNs    int64        `json:"lo_ns"`
	HiNs    int64        `json:"hi_ns"`
	Calls   uint64       `json:"calls"`
	Sampled uint64       `json:"sampled_calls"`
	Samples uint64       `json:"samples"`
	States  []StateShare `json:"states"`
}

type slowKey struct {
	fn    int
	state uint16
	stack uint32
}

// stackID interns a goroutine's stack (return addresses, innermost
// first); 0 for none. Called with w.mu held.
func (w *WaitSampler) stackID(st []uint64) uint32 {
	if len(st) == 0 {
		return 0
	}
	key := make([]byte, 0, 8*len(st))
	for _, pc := range st {
		key = binary.LittleEndian.AppendUint64(key, pc)
	}
	if id, ok := w.stackIdx[string(key)]; ok {
		return id
	}
	w.stackList = append(w.stackList, st)
	id := uint32(len(w.stackList))
	w.stackIdx[string(key)] = id
	return id
}

// addSlow counts the samples of slow call c's goroutine. Called with w.mu
// held.
func (w *WaitSampler) addSlow(c bpf.LatencyStoppedCall) {
	fn := int(c.Fn)
	w.slowCalls[fn]++
	gs := w.byGoid[c.Goid]
	if gs == nil {
		return
	}
	running, hasRunning := w.stateIdx[StateRunning]
	lo := sort.Search(len(w.times), func(i int) bool { return w.times[i] >= int64(c.Start) })
	for i := lo; i < len(w.times) && w.times[i] <= int64(c.End); i++ {
		j := w.base + i - gs.first
		if j < 0 || j >= len(gs.states) || j >= len(gs.stacks) || gs.states[j] == stateMissing {
			continue
		}
		if hasRunning && gs.states[j] == running {
			w.slowRuns[fn]++
			continue
		}
		w.slowCount[slowKey{fn, gs.states[j], gs.stacks[j]}]++
	}
	ss := w.cpuByGoid[c.Goid]
	a := sort.Search(len(ss), func(i int) bool { return ss[i].time >= int64(c.Start) })
	b := sort.Search(len(ss), func(i int) bool { return ss[i].time > int64(c.End) })
	if a >= b {
		return
	}
	m := w.slowCPU[fn]
	if m == nil {
		m = map[uint32]uint64{}
		w.slowCPU[fn] = m
	}
	for _, smp := range ss[a:b] {
		m[smp.stack]++
	}
}

// addCPU keeps one on-CPU sample (struct cpu_sample). Called with w.mu
// held.
func (w *WaitSampler) addCPU(b []byte) {
	const head = 24
	if len(b) < head {
		return
	}
	goid, t, n := le64(b[0:]), int64(le64(b[8:])), int(le32(b[16:]))
	n = min(n, (len(b)-head)/8)
	w.cpuTaken++
	if n == 0 {
		return
	}
	st := make([]uint64, n)
	for i := range st {
		st[i] = le64(b[head+8*i:])
	}
	// The stacks are kept as return addresses: the leaf's own pc is
	// stored as pc+1, as if it were one.
	st[0]++
	ss := w.cpuByGoid[goid]
	if len(ss) > 0 && ss[len(ss)-1].time > t {
		// Samples from two CPUs may arrive out of order.
		i := sort.Search(len(ss), func(i int) bool { return ss[i].time > t })
		ss = append(ss, cpuSample{})
		copy(ss[i+1:], ss[i:])
		ss[i] = cpuSample{t, w.stackID(st)}
	} else {
		ss = append(ss, cpuSample{t, w.stackID(st)})
	}
	if len(ss) > 2*waitKeep {
		ss = append(ss[:0], ss[len(ss)-waitKeep:]...)
	}
	w.cpuByGoid[goid] = ss
}

// slowRunning gives the running reads of each function's slow calls
// their on-CPU stacks. Both the reads and the on-CPU samples are uniform
// samples of time: the reads of the time the goroutine was running in
// Go's terms, the on-CPU samples (every cpuPeriod of a CPU's time) of the
// part its thread was on a CPU. So each stack gets its samples' time,
// and what the reads hold beyond it is time the goroutine's thread
// waited for a CPU (or, rarely, blocked in the kernel while the goroutine
// ran): OffCPU. When the samples hold more than the reads (sampling
// noise), they are scaled down to the reads. Called with w.mu held.
func (w *WaitSampler) slowRunning(every time.Duration) []SlowSample {
	var out []SlowSample
	for fn, runs := range w.slowRuns {
		m := w.slowCPU[fn]
		var n uint64
		for _, c := range m {
			n += c
		}
		if w.cpuPeriod <= 0 || every <= 0 {
			out = append(out, SlowSample{Func: fn, State: StateRunning, Reads: float64(runs)})
			continue
		}
		per := float64(w.cpuPeriod) / float64(every) // one sample, in reads
		scale := 1.0
		if cpu := float64(n) * per; cpu > float64(runs) {
			scale = float64(runs) / cpu
		}
		for st, c := range m {
			out = append(out, SlowSample{Func: fn, State: StateRunning, Stack: w.stackList[st-1],
				Reads: float64(c) * per * scale})
		}
		if rest := float64(runs) - float64(n)*per*scale; rest > 1e-9 {
			out = append(out, SlowSample{Func: fn, State: StateRunning, OffCPU: true, Reads: rest})
		}
	}
	return out
}

// SlowSample is the reads of the goroutine table in the slow calls of one
// function, in one state, with one stack.
type SlowSample struct {
	Func  int    // index of the function
	State string // as in WaitReport: running, runnable, syscall or a wait reason
	// Stack is the goroutine's return addresses, innermost first: from
	// the table, or while running, an on-CPU sample's (its leaf pc + 1,
	// like a return address); nil while running without one.
	Stack []uint64
	// Reads is the reads in that state and stack; while running, the
	// time of the on-CPU samples with that stack, in reads (slowRunning).
	Reads float64
	// OffCPU marks the running reads that the on-CPU samples do not
	// cover: the goroutine ran in Go's terms, its thread was not on a CPU.
	OffCPU bool
}

// CPUSamples returns how many on-CPU samples were taken of goroutines
// inside a measured call, and how many of them fell in slow calls.
func (w *WaitSampler) CPUSamples() (taken, used uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.slowCPU {
		for _, n := range m {
			used += n
		}
	}
	return w.cpuTaken, used
}

// Slow returns the samples of the slow calls, the slow calls counted per
// function, and the mean time between samples.
func (w *WaitSampler) Slow() ([]SlowSample, map[int]uint64, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	every := w.interval
	if w.seq > 1 {
		every = time.Duration((w.lastTime - w.firstTime) / int64(w.seq-1))
	}
	var out []SlowSample
	for k, n := range w.slowCount {
		s := SlowSample{Func: k.fn, State: w.states[k.state], Reads: float64(n)}
		if k.stack > 0 {
			s.Stack = w.stackList[k.stack-1]
		}
		out = append(out, s)
	}
	out = append(out, w.slowRunning(every)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Reads > out[j].Reads })
	calls := map[int]uint64{}
	for fn, n := range w.slowCalls {
		calls[fn] = n
	}
	return out, calls, every
}
