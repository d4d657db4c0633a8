package profile

import (
	"fmt"
	"sort"
	"time"
)

// GState is what a goroutine was doing, as the Go runtime sees it.
type GState uint8

// Goroutine states.
const (
	GRunning  GState = iota // on a thread, running Go code
	GRunnable               // ready, waiting for a P (the scheduler's run queue)
	GWaiting                // parked (chan, select, IO wait, sleep, mutex, ...) or in a system call
	NumGStates
)

var gstateNames = [NumGStates]string{"running", "runnable", "waiting"}

func (s GState) String() string {
	if s < NumGStates {
		return gstateNames[s]
	}
	return fmt.Sprintf("gstate(%d)", uint8(s))
}

// ParseGState is the inverse of GState.String.
func ParseGState(name string) (GState, bool) {
	for i, n := range gstateNames {
		if n == name {
			return GState(i), true
		}
	}
	return 0, false
}

// GoSample is goroutine time: the time one goroutine (or several of one
// group with the same stack) spent in one state, with its own stack. A Go
// program's goroutine samples are a second view of its time, beside the
// thread samples: summed, they give the goroutines' time, not the threads'.
type GoSample struct {
	Stack []*Location // leaf first
	PID   int
	// GoID is the goroutine's id; 0 when unknown (running time read from an
	// on-CPU sample that could not be matched to one goroutine).
	GoID  uint64
	State GState
	// WaitReason is the runtime's reason for a waiting goroutine ("chan
	// receive", "IO wait", "sleep", "sync.Mutex.Lock", "syscall", ...).
	WaitReason string
	// CreatedBy is the function whose go statement created the goroutine
	// ("" for the main goroutine); Func is the goroutine's own function.
	CreatedBy string
	Func      string
	// Labels are the goroutine's pprof labels (runtime/pprof.Do), where read.
	Labels map[string]string
	Value  int64 // nanoseconds
}

// GoInfo describes how the goroutine view was read.
type GoInfo struct {
	Version string // the target's Go version, e.g. "go1.26.0"
	// Snapshots is the number of times the goroutine table was read, at
	// Interval on average.
	Snapshots int
	Interval  time.Duration
	// MaxGoroutines is the most goroutines one snapshot saw.
	MaxGoroutines int
	// Dropped counts goroutine reads that stayed inconsistent after retries
	// (the goroutine changed while it was read); Retried counts retries.
	Dropped, Retried int
	// Failed counts snapshots that could not be read at all.
	Failed int
	// Covered is the time the snapshots account for: each charges every
	// goroutine it finds parked or runnable with the time since the
	// previous snapshot (the first, with one interval). What the recording
	// has beyond it, no snapshot charged: every goroutine's waiting and
	// runnable time is short by as much. 0 with Snapshots > 0: not
	// measured (profiles written before wallprof did).
	Covered time.Duration
	// LongestGap is the longest time the goroutine table went unread: from
	// the start of the recording to the first snapshot, between two, or
	// from the last to the end of the recording.
	LongestGap time.Duration
	// Before is how long the recording ran before the target could have
	// goroutines: a launched command at wallprof's gate, and the shell
	// before it exec'ed the program. The coverage leaves it out (Span), as
	// does LongestGap. 0 for a process attached to.
	Before time.Duration
}

// Span is the part of a recording lasting d that the goroutine view could
// cover: d less Before.
func (g *GoInfo) Span(d time.Duration) time.Duration {
	if g != nil && g.Before > 0 && g.Before < d {
		return d - g.Before
	}
	return d
}

// SpanText says what Span is of, for "covering 1.9s of the 2.0s ...":
// "recording", or "since the command started" when the recording began
// before the program ran.
func (g *GoInfo) SpanText() string {
	if g != nil && g.Before > 0 {
		return "since the command started"
	}
	return "recording"
}

// MinCoverage is the share of the recording below which the goroutine
// view is reported as partial. Recordings cover 97.6–99.7% of their time
// when attached to a running program for 5 s, 97–100% of the time since a
// launched command exec'ed for 2 s (Before): the snapshots begin once the
// target's binary has been read and end up to an interval before the
// recording does. The
// recordings this warns about covered 17–60%. Time the snapshots miss is
// missing from each goroutine's waiting and runnable time, and, after the
// snapshots began, not from its running time (thread samples): at 90% a
// group that was half running and half waiting can read 52.6% running.
const MinCoverage = 0.9

// Coverage returns the share of a recording lasting d that the snapshots
// cover (Covered/Span(d), at most 1); ok is false when it is not known (a
// profile written before wallprof measured it).
func (g *GoInfo) Coverage(d time.Duration) (share float64, ok bool) {
	if g == nil || d <= 0 || (g.Covered <= 0 && g.Snapshots > 0) {
		return 0, false
	}
	return min(1, float64(g.Covered)/float64(g.Span(d))), true
}

// LowCoverage reports whether the snapshots are known to cover less than
// MinCoverage of a recording lasting d.
func (g *GoInfo) LowCoverage(d time.Duration) bool {
	c, ok := g.Coverage(d)
	return ok && c < MinCoverage
}

// Groups sums a goroutine view by group (creation site, else the
// goroutine's function), most time first.
func Groups(gs []*GoSample) []Group {
	by := map[string]*Group{}
	ids := map[string]map[uint64]bool{}
	funcs := map[string]map[string]int64{}
	for _, g := range gs {
		k := GroupKey(g)
		grp := by[k]
		if grp == nil {
			grp = &Group{Key: k, CreatedBy: g.CreatedBy, Reasons: map[string]int64{}}
			by[k] = grp
			ids[k] = map[uint64]bool{}
			funcs[k] = map[string]int64{}
		}
		if g.Func != "" {
			funcs[k][g.Func] += g.Value
		}
		grp.Time[g.State] += g.Value
		grp.Total += g.Value
		if g.State == GWaiting {
			grp.Reasons[g.WaitReason] += g.Value
		}
		if g.GoID != 0 {
			ids[k][g.GoID] = true
		}
	}
	out := make([]Group, 0, len(by))
	for k, g := range by {
		g.Goroutines = len(ids[k])
		for f, v := range funcs[k] {
			if v > funcs[k][g.Func] || v == funcs[k][g.Func] && f < g.Func {
				g.Func = f
			}
		}
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Group is the goroutines of one creation site.
type Group struct {
	Key        string // "created by F" or, for the main goroutine, its function
	CreatedBy  string
	Func       string // the goroutines' function (the one with the most time)
	Goroutines int    // distinct goroutines seen parked or runnable
	Total      int64
	Time       [NumGStates]int64
	Reasons    map[string]int64 // waiting time by wait reason
}

// GroupKey is the group a goroutine sample belongs to.
func GroupKey(g *GoSample) string {
	if g.CreatedBy != "" {
		return "created by " + g.CreatedBy
	}
	if g.Func == "runtime.main" {
		return "main goroutine"
	}
	if g.Func != "" {
		return g.Func
	}
	return "unknown"
}
