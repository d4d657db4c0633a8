package collect

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

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
	// pending is the first pass's count of threads left with a sample
	// pending (walk_pending): none, and the second pass is not run.
	pending *ebpf.Variable
	// all are the iterators over every task of the machine (system-wide,
	// or more targets than tgids lists, or a kernel without the filter).
	all    [2]*link.Iter
	byPID  map[uint32][2]*link.Iter
	noPID  bool // the kernel refused an iterator for one process
	period time.Duration
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex // one walk at a time (the goroutine's and stop's)
	err    error      // the first walk that failed
}

// newWalker attaches the iterators and walks at once, so that the threads
// that exist are based from the start; then every period until stop. With
// tgids nil (system-wide) every task is visited.
func newWalker(states, stacks *ebpf.Program, pending *ebpf.Variable, tgids *ebpf.Map, period time.Duration) (*walker, error) {
	if states == nil || stacks == nil {
		return nil, fmt.Errorf("attach thread walker: its programs were not loaded")
	}
	w := &walker{statesProg: states, stacksProg: stacks, pending: pending, tgids: tgids, byPID: map[uint32][2]*link.Iter{},
		period: period, quit: make(chan struct{}), done: make(chan struct{})}
	for i, p := range []*ebpf.Program{states, stacks} {
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
	next := linux.Monotonic()
	period := uint64(w.period)
	rng := rand.New(rand.NewPCG(next, uint64(os.Getpid())))
	for {
		// The iterators are opened before the sleep: woken, the walk
		// reads the threads at once (it takes their states as of its
		// start, and the threads move on meanwhile).
		files, err := w.open()
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
		next += period/2 + rng.Uint64N(period+1)
		now := linux.Monotonic()
		if next < now {
			next = now // late: from now on
		}
		linux.SleepUntil(next)
		select {
		case <-w.quit:
			closeAll(files)
			return
		default:
		}
		if err := w.read(files); err != nil && w.err == nil {
			w.err = err
		}
	}
}

// walk runs both passes once, over each target process's threads (or
// every task).
func (w *walker) walk() error {
	files, err := w.open()
	if err != nil {
		return err
	}
	return w.read(files)
}

// open opens the iterators of one walk: the first pass's over each target
// process (or every task), then the second's.
func (w *walker) open() ([]io.ReadCloser, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	iters := w.iters()
	files := make([]io.ReadCloser, 0, 2*len(iters))
	for pass := range 2 {
		for _, it := range iters {
			f, err := it[pass].Open()
			if err != nil {
				closeAll(files)
				return nil, fmt.Errorf("run thread walker: %w", err)
			}
			files = append(files, f)
		}
	}
	return files, nil
}

// read runs the walk: each file read runs its iterator's program over its
// tasks, the first pass's files first (open). The second pass is left
// unread when the first left no thread a sample to take: a target whose
// threads wait where they waited costs one program run each per walk, not
// two. It closes the files.
func (w *walker) read(files []io.ReadCloser) error {
	defer closeAll(files)
	for i, f := range files {
		if i == len(files)/2 && w.pending != nil {
			var n uint32
			if err := w.pending.Get(&n); err == nil && n == 0 {
				return nil
			}
		}
		if _, err := io.Copy(io.Discard, f); err != nil {
			return fmt.Errorf("run thread walker: %w", err)
		}
	}
	return nil
}

func closeAll(files []io.ReadCloser) {
	for _, f := range files {
		f.Close()
	}
}

// iters are the iterators of this walk: one pair per target process, or
// the pair over every task.
func (w *walker) iters() [][2]*link.Iter {
	all := [][2]*link.Iter{w.all}
	if w.tgids == nil || w.noPID {
		return all
	}
	var set bpf.WallprofTgidSet
	if err := w.tgids.Lookup(uint32(0), &set); err != nil || int(set.N) > len(set.Tgid) {
		return all
	}
	out := make([][2]*link.Iter, 0, set.N)
	for _, pid := range set.Tgid[:set.N] {
		its, ok := w.byPID[pid]
		if !ok {
			var err error
			if its, err = w.pidIters(pid); err != nil {
				w.noPID = true
				return all
			}
			w.byPID[pid] = its
		}
		out = append(out, its)
	}
	return out
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

// halt ends the periodic walks and waits for the goroutine (at most a
// period: it checks between walks).
func (w *walker) halt() {
	w.once.Do(func() {
		close(w.quit)
		<-w.done
	})
}

// close halts the walks and detaches the iterators.
func (w *walker) close() {
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeIters()
}
