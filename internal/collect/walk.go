package collect

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/linux"
)

// walker runs the walk of walk mode (AccountWalk) every period, from a
// thread of its own, so from wallprof's CPU rather than the target's: its
// first pass (walk_states) brings every target thread's times up to now
// from the kernel's counters and notes the state of each, its second
// (walk_stacks) sends the stacks of those that were off CPU. Each pass
// visits the target processes' threads alone where the kernel can (Linux
// 6.1: a task iterator for one process), so that the first pass reads
// every thread within microseconds of the walk's start.
type walker struct {
	statesProg, stacksProg *ebpf.Program
	tgids                  *ebpf.Map // the target processes (bpf.WallprofTgidSet), nil: every task
	targets                *ebpf.Map // every target process, where tgids has too many to list
	// pending is the first pass's count of threads left with a sample
	// pending (walk_pending): none, and the second pass is not run.
	pending *ebpf.Variable
	// forks counts the target processes added since the start
	// (target_forks): the list of processes to walk is read again only
	// when it moved.
	forks     *ebpf.Variable
	lastForks uint32
	// threads is how many target threads the latest walk read
	// (walk_threads): past walkThreads, the walks are spaced further
	// apart, up to maxPeriod.
	threads   *ebpf.Variable
	maxPeriod time.Duration
	buf       [512]byte
	// all are the iterators over every task of the machine (system-wide,
	// or more live targets than maxWalkPIDs, or a kernel without the filter).
	all   [2]*link.Iter
	byPID map[uint32][2]*link.Iter
	noPID bool // the kernel refused an iterator for one process
	// walking are the iterators of each walk (nil: not read yet); dead,
	// the processes found gone, with how many times the list named each
	// then (a PID used again by a new target is named once more).
	walking []walkIters
	dead    map[uint32]int
	period  time.Duration
	quit    chan struct{}
	tid     atomic.Int32 // the walking thread's, for halt to cut its sleep short
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex // one walk at a time (the goroutine's and stop's)
	err     error      // the first walk that failed
	// timer runs the first pass from a BPF timer (walktimer.go), nil:
	// the goroutine runs both.
	timer *walkTimer
	// spare are the second pass's files of a walk that did not need them,
	// for spareFor's iterators: an iterator's file runs its program over
	// the tasks when it is read, not when it is opened, so the next walk
	// takes them rather than opening its own (a file's open and close were
	// a fifth of the walker's CPU on a target that never blocks).
	spare    []io.ReadCloser
	spareFor []walkIters
}

// walkerObjects are the walk's programs and the variables it reads.
type walkerObjects struct {
	states, stacks          *ebpf.Program
	pending, forks, threads *ebpf.Variable // walk_pending, target_forks, walk_threads
	// timer, where loaded, runs the first pass from a BPF timer.
	timer *walkTimerObjects
}

// newWalker attaches the iterators and walks at once, so that the threads
// that exist are based from the start; then every period until stop. With
// tgids nil (system-wide) every task is visited.
func newWalker(objs walkerObjects, tgids, targets *ebpf.Map, period, maxPeriod time.Duration) (*walker, error) {
	if objs.states == nil || objs.stacks == nil {
		return nil, fmt.Errorf("attach thread walker: its programs were not loaded")
	}
	w := &walker{statesProg: objs.states, stacksProg: objs.stacks, pending: objs.pending, forks: objs.forks, threads: objs.threads,
		tgids: tgids, targets: targets, byPID: map[uint32][2]*link.Iter{}, dead: map[uint32]int{},
		period: period, maxPeriod: max(period, maxPeriod), quit: make(chan struct{}), done: make(chan struct{})}
	for i, p := range []*ebpf.Program{objs.states, objs.stacks} {
		it, err := link.AttachIter(link.IterOptions{Program: p})
		if err != nil {
			w.closeIters()
			return nil, fmt.Errorf("attach thread walker: %w", err)
		}
		w.all[i] = it
	}
	if err := w.walk(); err != nil {
		w.closeIters()
		return nil, err
	}
	// From a BPF timer where the kernel runs one (else from a thread).
	if objs.timer != nil && w.startTimer(*objs.timer) == nil {
		go w.runTimer()
		return w, nil
	}
	go w.run()
	return w, nil
}

func (w *walker) run() {
	defer close(w.done)
	// The walks keep time by the kernel's timer, on a thread of their
	// own that the kernel runs as soon as it wakes (a short slice): walks
	// that waited for a free CPU would come when the target's threads
	// block rather than when they run. (Where the slice is refused, an
	// ordinary thread.)
	_ = linux.LockPrompt()
	// Asleep, it keeps its P (SleepUntilHeld) where there is another for
	// wallprof's other goroutines. Where the runtime chose one P (wallprof
	// confined to one CPU by taskset, or by a container's quota) it asks
	// for a second: a P costs no CPU, and with one the walker either keeps
	// it, and the other goroutines run only when it yields, or gives it up
	// at each sleep, which the runtime's sysmon sees as a long system call:
	// it hands the P to another thread, wakes one, and polls every 20 µs
	// for a millisecond after (recording a ping-pong with wallprof on one
	// CPU: 3,200 sysmon wake-ups a second, 820 with two Ps, and a third
	// less of wallprof's CPU: BENCHMARKS.md, session 24). A GOMAXPROCS
	// set by the user is kept.
	if runtime.GOMAXPROCS(0) < 2 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
	sleepOnce := linux.SleepUntil
	if runtime.GOMAXPROCS(0) >= 2 {
		sleepOnce = linux.SleepUntilHeld
	}
	// A signal ends a sleep early: the runtime's request to stop (yield,
	// then sleep on), or halt's (return at once: a stop does not wait out
	// an interval that can last a sampling period, a second at -F 1).
	w.tid.Store(int32(unix.Gettid()))
	sleep := func(t uint64) {
		for !sleepOnce(t) {
			if w.quitting() {
				return
			}
			runtime.Gosched() // perhaps the runtime's request to stop
		}
	}
	next := linux.Monotonic()
	rng := rand.New(rand.NewPCG(next, uint64(os.Getpid())))
	var yielded uint64
	for {
		// The iterators are opened before the sleep: woken, the walk
		// reads the threads at once (it takes their states as of its
		// start, and the threads move on meanwhile).
		files, iters, err := w.open()
		if err != nil {
			if w.err == nil {
				w.err = err
			}
			return
		}
		// Each interval drawn between half a period and one and a half:
		// walks at a fixed period alias with a program that does
		// something every few milliseconds (a tick, a loop of timed
		// sleeps), and see it at the same point of its cycle.
		period := uint64(w.spacing())
		next += period/2 + rng.Uint64N(period+1)
		now := linux.Monotonic()
		if next < now {
			next = now // late: from now on
		}
		if next-yielded >= uint64(yieldEvery) {
			runtime.Gosched()
			yielded = linux.Monotonic()
		}
		sleep(next)
		select {
		case <-w.quit:
			closeAll(files)
			return
		default:
		}
		if err := w.read(files, iters); err != nil && w.err == nil {
			w.err = err
		}
	}
}

// yieldEvery is how often the walker's goroutine yields to the Go
// scheduler, before a sleep that would end yieldEvery or more after its
// last yield. Its system calls alone never reschedule it
// (it is locked to its thread), and the runtime's sysmon takes the P of a
// goroutine that has run 10 ms without rescheduling whenever it finds it
// in a system call: the walker lost its P during nearly every sleep, and
// its return woke sysmon from its deep sleep, which then polled at 20 µs.
// Recording the bursts workload at the default rate, sysmon woke 2,461
// times a second (959 with the yield) and wallprof used 170 ms of CPU a
// second (148); recording a 10,000-goroutine server, 5.06 s in 20 s (4.62;
// medians of bench/walkcost.sh). A yield costs a hand-off of the P and
// back (the goroutine is locked to its thread); every 8 ms, so that
// sysmon never counts 10 ms without one. Checked after each walk, the
// yields came up to 8 ms and a whole interval apart: recording a
// ping-pong, sysmon asked the walker to yield 25 times a second (8 with
// the check before the sleep). Done before the sleep, not between the
// wake-up and the read, which it would delay (the walk's instant is the
// wake-up: doc/recorder.md).
const yieldEvery = 8 * time.Millisecond

// walkThreads is how many threads a walk reads at its full rate: a walk
// of more is spaced further apart, in proportion, so that the threads read
// a second stay about walkThreads times the walk rate (each costs a program
// run and the iterator's step, ~0.3 us here) and the walks of a process of
// hundreds of threads do not cost a CPU. Each thread is then sampled less
// often off CPU (its times stay exact).
const walkThreads = 64

// spacing is the mean interval to the next walk: the period, longer after
// a walk of more than walkThreads threads, at most maxPeriod (the sampling
// period: a thread's off-CPU stacks are never sampled less often than its
// on-CPU ones).
func (w *walker) spacing() time.Duration {
	var n uint32
	if w.threads == nil || w.threads.Get(&n) != nil || n <= walkThreads {
		return w.period
	}
	return min(w.period*time.Duration(n)/walkThreads, w.maxPeriod)
}

// walk runs both passes once, over each target process's threads (or
// every task).
func (w *walker) walk() error {
	files, iters, err := w.open()
	if err != nil {
		return err
	}
	return w.read(files, iters)
}

// walkIters are one target process's pair of iterators (pid 0: the pair
// over every task).
type walkIters struct {
	pid uint32
	its [2]*link.Iter
}

// maxWalkPIDs is how many live target processes the walks visit one by
// one; with more, each walk visits every task of the machine once instead
// (a build's compilers, a shell loop's children).
const maxWalkPIDs = 64

// open opens the iterators of one walk, over each target process (or every
// task): the first pass's, then the second's. Both are opened before the
// walker sleeps: woken, it reads the threads at once, and their stacks right
// after (a second pass opened after the first comes later, when more of the
// threads have moved on: the -F 49 bursts test's serve_sleep, +0.85 point).
func (w *walker) open() ([]io.ReadCloser, []walkIters, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	iters := w.iters()
	first, err := openPass(iters, 0)
	if err != nil {
		return nil, nil, err
	}
	second := w.takeSpare(iters)
	if second == nil {
		if second, err = openPass(iters, 1); err != nil {
			closeAll(first)
			return nil, nil, err
		}
	}
	return append(first, second...), iters, nil
}

// takeSpare returns the spare second-pass files if they are iters's, and
// closes them otherwise. Called with w.mu held.
func (w *walker) takeSpare(iters []walkIters) []io.ReadCloser {
	files, same := w.spare, len(w.spareFor) == len(iters)
	for i := 0; same && i < len(iters); i++ {
		same = w.spareFor[i] == iters[i]
	}
	w.spare, w.spareFor = nil, nil
	if !same {
		closeAll(files)
		return nil
	}
	return files
}

func openPass(iters []walkIters, pass int) ([]io.ReadCloser, error) {
	files := make([]io.ReadCloser, 0, len(iters))
	for _, it := range iters {
		f, err := it.its[pass].Open()
		if err != nil {
			closeAll(files)
			return nil, fmt.Errorf("run thread walker: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// read runs the walk: each file read runs its iterator's program over its
// tasks, the first pass's (open), then the second's. The second pass is
// not run when the first left no thread a sample to take: a target whose
// threads wait where they waited costs one program run each per walk, not
// two. A process whose first-pass iterator found no thread has exited:
// it is not walked again. It closes the files.
func (w *walker) read(files []io.ReadCloser, iters []walkIters) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { closeAll(files) }()
	gone := map[uint32]bool{}
	for i, f := range files[:len(iters)] {
		n, err := w.run1(f)
		if err != nil {
			return err
		}
		if n == 0 && iters[i].pid != 0 {
			gone[iters[i].pid] = true
		}
	}
	if len(gone) > 0 {
		w.forget(gone)
	}
	if w.pending != nil {
		var n uint32
		if err := w.pending.Get(&n); err == nil && n == 0 && len(gone) == 0 {
			// Unread: the next walk's, if it walks the same processes.
			w.spare, w.spareFor = files[len(iters):], iters
			files = files[:len(iters)]
			return nil
		}
	}
	for _, f := range files[len(iters):] {
		if _, err := w.run1(f); err != nil {
			return err
		}
	}
	return nil
}

// run1 runs one iterator over its tasks and returns how many bytes its
// program wrote. One read runs the program over every task (the kernel
// fills the buffer until the tasks end, and the programs write a byte a
// walk at most): the read that would return the end is not made.
func (w *walker) run1(f io.Reader) (int64, error) {
	n, err := f.Read(w.buf[:])
	if err == io.EOF {
		return 0, nil
	}
	if err == nil && n == len(w.buf) {
		var m int64
		m, err = io.Copy(io.Discard, f)
		n += int(m)
	}
	if err != nil {
		return 0, fmt.Errorf("run thread walker: %w", err)
	}
	return int64(n), nil
}

// forget stops walking the processes gone and detaches their iterators.
func (w *walker) forget(gone map[uint32]bool) {
	named := w.named()
	walking := make([]walkIters, 0, len(w.walking))
	for _, it := range w.walking {
		if !gone[it.pid] {
			walking = append(walking, it)
		}
	}
	w.walking = walking
	for pid := range gone {
		w.dead[pid] = max(named[pid], 1)
		for _, it := range w.byPID[pid] {
			if it != nil {
				it.Close()
			}
		}
		delete(w.byPID, pid)
	}
}

func closeAll(files []io.ReadCloser) {
	for _, f := range files {
		f.Close()
	}
}

// iters are the iterators of this walk: one pair per live target process,
// or the pair over every task. The list is read again only when a target
// process was added since (target_forks).
func (w *walker) iters() []walkIters {
	all := []walkIters{{its: w.all}}
	if w.tgids == nil || w.noPID {
		return all
	}
	var forks uint32
	if w.forks != nil {
		if err := w.forks.Get(&forks); err != nil {
			return all
		}
		if w.walking != nil && forks == w.lastForks {
			return w.walking
		}
	}
	pids, ok := w.targetPIDs()
	if !ok {
		return all
	}
	named := w.named()
	out := make([]walkIters, 0, len(pids))
	for _, pid := range pids {
		if d, gone := w.dead[pid]; gone {
			if named[pid] <= d {
				continue
			}
			delete(w.dead, pid) // the PID of a new target process
		}
		if len(out) == maxWalkPIDs {
			out = all
			break
		}
		its, ok := w.byPID[pid]
		if !ok {
			var err error
			if its, err = w.pidIters(pid); err != nil {
				w.noPID = true
				return all
			}
			w.byPID[pid] = its
		}
		out = append(out, walkIters{pid: pid, its: its})
	}
	w.walking, w.lastForks = out, forks
	return out
}

// targetPIDs lists the target processes: the short list in tgids, or,
// when it overflowed, every key of targets.
func (w *walker) targetPIDs() ([]uint32, bool) {
	var set bpf.WallprofTgidSet
	if err := w.tgids.Lookup(uint32(0), &set); err != nil {
		return nil, false
	}
	var pids []uint32
	if int(set.N) <= len(set.Tgid) {
		for _, pid := range set.Tgid[:set.N] {
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
		return pids, true
	}
	if w.targets == nil {
		return nil, false
	}
	var pid uint32
	var one uint8
	it := w.targets.Iterate()
	for it.Next(&pid, &one) {
		pids = append(pids, pid)
	}
	if it.Err() != nil {
		return nil, false
	}
	slices.Sort(pids)
	return pids, true
}

// named counts how many times the short list names each process: a PID
// named again after its process was found gone is a new process's. (Past
// the short list's length, a PID used again is not told apart: its new
// process is not walked, and its off-CPU time goes unsampled.)
func (w *walker) named() map[uint32]int {
	n := map[uint32]int{}
	var set bpf.WallprofTgidSet
	if err := w.tgids.Lookup(uint32(0), &set); err != nil || int(set.N) > len(set.Tgid) {
		return n
	}
	for _, pid := range set.Tgid[:set.N] {
		n[pid]++
	}
	return n
}

// pidIters attaches both passes' iterators to the threads of process pid.
func (w *walker) pidIters(pid uint32) ([2]*link.Iter, error) {
	var its [2]*link.Iter
	for i, p := range []*ebpf.Program{w.statesProg, w.stacksProg} {
		fd, err := linux.TaskIterLink(p.FD(), pid)
		if err == nil {
			var l link.Link
			if l, err = link.NewFromFD(fd); err == nil {
				it, ok := l.(*link.Iter)
				if !ok {
					l.Close()
					err = fmt.Errorf("link %T is not an iterator", l)
				}
				its[i] = it
			}
		}
		if err != nil {
			if its[0] != nil {
				its[0].Close()
			}
			return its, err
		}
	}
	return its, nil
}

func (w *walker) closeIters() {
	for _, its := range append([][2]*link.Iter{w.all}, slices.Collect(maps.Values(w.byPID))...) {
		for _, it := range its {
			if it != nil {
				it.Close()
			}
		}
	}
}

// stop ends the periodic walks and walks one last time: every thread's
// times are brought up to the end of the recording, and the stacks of
// those still off CPU are taken. It returns the first error of any walk.
func (w *walker) stop() error {
	w.halt()
	err := w.walk()
	if w.err != nil {
		return w.err
	}
	return err
}

// halt ends the periodic walks and waits for the goroutine, whose sleep
// it interrupts (it checks quit when it wakes, and between walks).
func (w *walker) halt() {
	w.once.Do(func() {
		if w.timer != nil {
			w.haltTimer()
			return
		}
		close(w.quit)
		// The walker checks quit when it wakes; wake it. Again every
		// millisecond: a signal that came before it went to sleep ended
		// no sleep.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if tid := w.tid.Load(); tid != 0 {
				_ = linux.Interrupt(int(tid))
			}
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	})
}

func (w *walker) quitting() bool {
	select {
	case <-w.quit:
		return true
	default:
		return false
	}
}

// close halts the walks and detaches the iterators.
func (w *walker) close() {
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	closeAll(w.takeSpare(nil))
	w.closeIters()
}
