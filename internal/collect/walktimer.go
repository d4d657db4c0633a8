package collect

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/linux"
)

// walkTimerObjects run the walks' first pass from a BPF timer
// (doc/walk-timer.md, Linux 6.7+): walk_timer_start and walk_timer_stop,
// the ring that wakes user space for the second pass, and the variables
// they share with it.
type walkTimerObjects struct {
	start, stop *ebpf.Program
	wake        *ebpf.Map      // walk_wake
	procs       *ebpf.Variable // walk_procs: the processes it walks
	every, max  *ebpf.Variable // walk_every_ns, walk_max_ns
	full        *ebpf.Variable // walk_full
	exp         *ebpf.Variable // walk_exp: the intervals' distribution
	startErr    *ebpf.Variable // walk_start_err
	tickNs      *ebpf.Variable // walk_tick_ns: the callback's time in all
}

// walkTimer is a walker's timer, running.
type walkTimer struct {
	objs   walkTimerObjects
	reader *ringbuf.Reader
	// listed are the processes last written to walk_procs, in its slots
	// (nil: every thread of the machine): a slot the callback zeroed is a
	// process it found gone.
	listed []uint32
	forks  uint32
	passes int // second passes run (under the walker's lock)
}

// timerWalkRate is how many times as often as the thread would the timer
// walks (and so walkThreads/timerWalkRate threads it reads at that rate):
// its walks are a Poisson process, whose instants are unbiased but whose
// sampling error is that of independent draws (the thread's walks, spread
// evenly, have less). Four times the rate halves the error: 0.25 point on
// a thread's 20% phase over 8 s at 99 Hz. A walk that finds the threads
// where they waited costs a few hundred nanoseconds of the kernel's time.
const timerWalkRate = 4

// maxTimerPIDs is how many processes walk_procs lists (MAX_WALK_PIDS).
const maxTimerPIDs = len(bpf.WallprofWalkList{}.Pid)

// startTimer hands the first pass to the BPF timer, pinned to the calling
// thread's CPU: the walks' instants are the timer's own, and wallprof's
// threads wake only for the stacks of threads that moved.
func (w *walker) startTimer(objs walkTimerObjects) error {
	t := &walkTimer{objs: objs}
	if err := objs.every.Set(uint64(w.period / timerWalkRate)); err != nil {
		return err
	}
	if err := objs.full.Set(uint32(walkThreads / timerWalkRate)); err != nil {
		return err
	}
	if err := objs.max.Set(uint64(w.maxPeriod)); err != nil {
		return err
	}
	if err := objs.exp.Set(expQuantiles()); err != nil {
		return err
	}
	if err := t.list(w.iters(), w.lastForks); err != nil {
		return err
	}
	rd, err := ringbuf.NewReader(objs.wake)
	if err != nil {
		return err
	}
	t.reader = rd
	if _, err := objs.start.Run(&ebpf.RunOptions{}); err != nil {
		rd.Close()
		return fmt.Errorf("start the walk timer: %w", err)
	}
	var e int64
	if err := objs.startErr.Get(&e); err != nil || e != 0 {
		rd.Close()
		return fmt.Errorf("start the walk timer: error %d", e)
	}
	w.timer = t
	return nil
}

// list writes the processes the timer walks: those of iters, or every
// thread of the machine when iters is the pair over every task.
func (t *walkTimer) list(iters []walkIters, forks uint32) error {
	var l bpf.WallprofWalkList
	t.listed = t.listed[:0]
	if len(iters) > maxTimerPIDs || (len(iters) == 1 && iters[0].pid == 0) {
		l.N = uint32(maxTimerPIDs + 1)
		t.listed = nil
	} else {
		for i, it := range iters {
			l.Pid[i] = it.pid
			t.listed = append(t.listed, it.pid)
		}
		l.N = uint32(len(iters))
	}
	l.Forks = forks
	t.forks = forks
	return t.objs.procs.Set(&l)
}

// gone are the listed processes the callback found gone.
func (t *walkTimer) gone() (map[uint32]bool, error) {
	if t.listed == nil {
		return nil, nil
	}
	var l bpf.WallprofWalkList
	if err := t.objs.procs.Get(&l); err != nil {
		return nil, err
	}
	var g map[uint32]bool
	for i, pid := range t.listed {
		if pid != 0 && l.Pid[i] == 0 {
			if g == nil {
				g = map[uint32]bool{}
			}
			g[pid] = true
		}
	}
	return g, nil
}

// runTimer takes the stacks whenever the timer's walk leaves some to take
// (or the target processes changed), until halt closes the ring.
func (w *walker) runTimer() {
	defer close(w.done)
	_ = linux.LockPrompt()
	for {
		if _, err := w.timer.reader.Read(); err != nil {
			if !errors.Is(err, ringbuf.ErrClosed) && w.err == nil {
				w.err = fmt.Errorf("run thread walker: %w", err)
			}
			return
		}
		if err := w.timerStacks(); err != nil && w.err == nil {
			w.err = err
		}
	}
}

// timerStacks is the second pass of the timer's latest walk: the list of
// processes brought up to date (those gone forgotten, those added since
// listed), then walk_stacks over each; then the timer may walk again.
func (w *walker) timerStacks() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.timer
	t.passes++
	gone, err := t.gone()
	if err != nil {
		return fmt.Errorf("run thread walker: %w", err)
	}
	if len(gone) > 0 {
		w.forget(gone)
	}
	iters := w.iters()
	if len(gone) > 0 || w.lastForks != t.forks {
		if err := t.list(iters, w.lastForks); err != nil {
			return fmt.Errorf("run thread walker: %w", err)
		}
	}
	files, err := openPass(iters, 1)
	if err != nil {
		return err
	}
	defer closeAll(files)
	for _, f := range files {
		if _, err := w.run1(f); err != nil {
			return err
		}
	}
	return nil
}

// haltTimer stops the timer (when it returns, its callback does not run)
// and the goroutine, and takes the stacks its latest walk left.
func (w *walker) haltTimer() {
	t := w.timer
	_, _ = t.objs.stop.Run(&ebpf.RunOptions{})
	t.reader.Close()
	<-w.done
	// The stacks its latest walks left (before the last walk, which
	// takes each thread's again).
	if err := w.timerStacks(); err != nil && w.err == nil {
		w.err = err
	}
}

// timerTime is the time the timer's callback has taken (it runs in the
// kernel, on wallprof's behalf, not in its process's CPU time).
func (w *walker) timerTime() time.Duration {
	var ns uint64
	if w.timer == nil || w.timer.objs.tickNs.Get(&ns) != nil {
		return 0
	}
	return time.Duration(ns)
}

// expQuantiles are walk_exp: the quantiles (i+1/2)/n of the exponential
// distribution of mean 1, in units of 1/65536, from which the timer draws
// each interval (a Poisson process of walks).
func expQuantiles() *[walkExpN]uint32 {
	var q [walkExpN]uint32
	for i := range q {
		q[i] = uint32(math.Round(-math.Log((float64(i)+0.5)/float64(len(q))) * 65536))
	}
	return &q
}

// walkExpN is how many quantiles walk_exp holds (WALK_EXP).
const walkExpN = 1024
