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
	gaps        *ebpf.Variable // walk_gaps: the intervals' distribution
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
// walks (and so walkThreads/timerWalkRate threads it reads at that rate).
// At four times, with exponential intervals, the bursts test passed; but
// the pinned ping-pong's threads, which move at every walk, woke wallprof
// for their stacks four times as often (its CPU 150 ms against the
// thread's 100): the intervals' distribution is what keeps the sampling
// error down instead (walkGapQuantiles).
const timerWalkRate = 1

// maxTimerPIDs is how many processes walk_procs lists (MAX_WALK_PIDS).
const maxTimerPIDs = len(bpf.WallprofWalkList{}.Pid)

// startTimer hands the first pass to the BPF timer, pinned to the calling
// thread's CPU: the walks' instants are the timer's own, and wallprof's
// threads wake only for the stacks of threads that moved.
func (w *walker) startTimer(objs walkTimerObjects) (err error) {
	t := &walkTimer{objs: objs}
	// walk_every_ns also tells walk_stacks the timer walks (its rules
	// for a thread's place): left at 0 where it does not start.
	defer func() {
		if err != nil {
			_ = objs.every.Set(uint64(0))
		}
	}()
	if err := objs.every.Set(uint64(w.period / timerWalkRate)); err != nil {
		return err
	}
	if err := objs.full.Set(uint32(walkThreads / timerWalkRate)); err != nil {
		return err
	}
	if err := objs.max.Set(uint64(w.maxPeriod)); err != nil {
		return err
	}
	if err := objs.gaps.Set(walkGapQuantiles()); err != nil {
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
	// Pinned to the CPU it starts on: one the targets may not run on,
	// where there is one (its callback interrupts what runs there,
	// thousands of times a second; pinned to one CPU beside a workload
	// pinned to the other, the ping-pong ran 18% slower when it shared
	// the workload's CPU).
	pids := make([]int, 0, len(t.listed))
	for _, pid := range t.listed {
		pids = append(pids, int(pid))
	}
	var runErr error
	linux.RunApart(pids, func() { _, runErr = objs.start.Run(&ebpf.RunOptions{}) })
	if runErr != nil {
		rd.Close()
		return fmt.Errorf("start the walk timer: %w", runErr)
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

// walkGapQuantiles are walk_gaps: the quantiles (i+1/2)/n, in units of
// 1/65536, of the distribution of the intervals between the timer's walks,
// of mean 1.
//
// The walks must sample the moments right after a walk as often as any:
// a walk that leaves stacks to take wakes wallprof's thread, which takes a
// CPU for a while, and a thread of the target it preempted then waits for
// it. With intervals of half a period or more (the thread walker's), those
// waits were never sampled: -0.7 point of runnable time in the bursts
// test's compute phases, at 49 Hz. Exponential intervals (a Poisson
// process) sample every moment alike, but their sampling error is that of
// independent draws: the bursts test (one point) failed three runs in
// four. So: exponential up to gapQuiet (a quarter of the mean), where the
// walks' own effects end (wallprof's thread wakes 30 µs after the walk at
// the median and is done in about 100), which makes the rate of walks at
// any moment that long after one the mean rate, exactly; past it, uniform
// over one mean interval, like the thread's walks. The variance of the
// intervals is 0.29 of the mean's square (exponential: 1).
func walkGapQuantiles() *[walkGapsN]uint32 {
	var q [walkGapsN]uint32
	early := 1 - math.Exp(-gapQuiet) // P(interval < gapQuiet)
	// The mean of the exponential part, and the uniform part's centre
	// that makes the whole mean 1.
	mEarly := (1 - math.Exp(-gapQuiet)*(1+gapQuiet)) / early
	centre := (1 - early*mEarly) / (1 - early)
	lo := centre - 0.5
	for i := range q {
		u := (float64(i) + 0.5) / float64(len(q))
		var x float64
		if u < early {
			x = -math.Log(1 - u)
		} else {
			x = lo + (u-early)/(1-early)
		}
		q[i] = uint32(math.Round(x * 65536))
	}
	return &q
}

const (
	// walkGapsN is how many quantiles walk_gaps holds (WALK_GAPS).
	walkGapsN = 1024
	// gapQuiet is how long after a walk, in mean intervals, the next is
	// as likely as at any moment (walkGapQuantiles).
	gapQuiet = 0.25
)
