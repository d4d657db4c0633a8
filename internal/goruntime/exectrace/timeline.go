package exectrace

import "golang.org/x/exp/trace"

// timelineBins is the number of bins of the overview; their width doubles
// (pairs of bins merge) whenever the trace outgrows them, so the overview
// takes the same memory for a second or an hour of trace.
const timelineBins = 512

// tbin is one slice of time of the overview.
type tbin struct {
	gcNS, stwNS             int64 // time in the GC mark phase, stopped
	live, running, runnable int64 // most goroutines at once
	created, exited         int64
}

type timeline struct {
	start trace.Time
	width int64 // ns per bin
	bins  []tbin
	// cur is the bin at returned last, covering [curLo, curHi).
	cur          int
	curLo, curHi trace.Time
}

func (tl *timeline) init(t trace.Time) {
	tl.start, tl.width, tl.bins = t, 1e6, make([]tbin, timelineBins)
}

func (tl *timeline) index(t trace.Time) int {
	if tl.bins == nil {
		tl.init(t)
	}
	if t < tl.start {
		return 0
	}
	for int64(t-tl.start)/tl.width >= timelineBins {
		tl.compact()
	}
	return int(int64(t-tl.start) / tl.width)
}

func (tl *timeline) at(t trace.Time) *tbin {
	if t >= tl.curLo && t < tl.curHi {
		return &tl.bins[tl.cur]
	}
	i := tl.index(t)
	tl.cur = i
	if t >= tl.start {
		tl.curLo = tl.start + trace.Time(int64(i)*tl.width)
		tl.curHi = tl.curLo + trace.Time(tl.width)
	} else {
		tl.curLo, tl.curHi = 0, 0
	}
	return &tl.bins[i]
}

func (tl *timeline) compact() {
	for i := 0; i < timelineBins/2; i++ {
		x, y := tl.bins[2*i], tl.bins[2*i+1]
		tl.bins[i] = tbin{gcNS: x.gcNS + y.gcNS, stwNS: x.stwNS + y.stwNS,
			live: max(x.live, y.live), running: max(x.running, y.running), runnable: max(x.runnable, y.runnable),
			created: x.created + y.created, exited: x.exited + y.exited}
	}
	clear(tl.bins[timelineBins/2:])
	tl.width *= 2
	tl.curLo, tl.curHi = 0, 0
}

// interval spreads [from, to) over the bins it covers.
func (tl *timeline) interval(from, to trace.Time, add func(*tbin, int64)) {
	last := tl.index(to)
	for i := tl.index(from); i <= last; i++ {
		lo := max(int64(from), int64(tl.start)+int64(i)*tl.width)
		hi := min(int64(to), int64(tl.start)+int64(i+1)*tl.width)
		if hi > lo {
			add(&tl.bins[i], hi-lo)
		}
	}
}
