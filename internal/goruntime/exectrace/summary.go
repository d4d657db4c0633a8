package exectrace

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"

	"golang.org/x/exp/trace"
)

// Format names the JSON schema of a Summary.
const Format = "wallprof.trace/v1"

// Summary is what a trace says. Times are milliseconds; "at" times are
// from the first event of the trace.
type Summary struct {
	Format     string  `json:"format"`
	Name       string  `json:"name"`
	GoVersion  string  `json:"go_version"` // of the trace format
	Bytes      int64   `json:"bytes"`
	Events     int64   `json:"events"`
	DurationMs float64 `json:"duration_ms"`
	Procs      int64   `json:"procs"` // GOMAXPROCS
	// Generations is the number of generations (the parser holds one
	// generation at a time: its memory grows with the largest).
	Generations int `json:"generations"`
	// Truncated says where the trace stopped being readable, if it did.
	Truncated string `json:"truncated,omitempty"`

	Pauses     Pauses        `json:"pauses"`
	GC         GC            `json:"gc"`
	Sched      Latency       `json:"sched_latency"`
	Blocking   []BlockReason `json:"blocking"`
	Syscalls   Syscalls      `json:"syscalls"`
	Goroutines Goroutines    `json:"goroutines"`
	Regions    []TypeDist    `json:"regions"`
	Tasks      []TypeDist    `json:"tasks"`
	Timeline   Timeline      `json:"timeline"`

	stacks *stackTable
	prof   profData
}

// Period is how regularly a series of events recurs, from the intervals
// between their starts.
type Period struct {
	Intervals int     `json:"intervals"`
	MedianMs  float64 `json:"median_ms"` // the period
	MeanMs    float64 `json:"mean_ms"`
	// WithinPct is the share of intervals within 10% of the median;
	// SpreadPct the median absolute deviation over the median.
	WithinPct float64 `json:"within_10pct"`
	SpreadPct float64 `json:"spread_pct"`
	// Periodic is true when there are at least 4 intervals and at least
	// 70% of them are within 10% of the median.
	Periodic bool `json:"periodic"`
}

// Pauses are the stop-the-world pauses (GC and others).
type Pauses struct {
	Dist
	Histogram []Bucket `json:"histogram"`
	// Period of all pauses together, and by kind and site below.
	Period  *Period      `json:"period,omitempty"`
	Kinds   []PauseKind  `json:"kinds"`
	Longest []Occurrence `json:"longest"`
}

// PauseKind is the pauses with one reason started from one site (the
// innermost frame outside the runtime, or the outermost runtime function).
type PauseKind struct {
	Reason string   `json:"reason"`
	Site   string   `json:"site"`
	Stack  []string `json:"stack"`
	Dist
	Period *Period `json:"period,omitempty"`
}

// Occurrence is one long event.
type Occurrence struct {
	AtMs      float64  `json:"at_ms"`
	Ms        float64  `json:"ms"`
	What      string   `json:"what,omitempty"`
	Goroutine int64    `json:"goroutine,omitempty"`
	Group     string   `json:"group,omitempty"`
	Stack     []string `json:"stack"`
}

// GC is the collector's work.
type GC struct {
	Cycles int     `json:"cycles"`
	MarkMs float64 `json:"mark_ms"` // wall time in the concurrent mark phase
	Period *Period `json:"period,omitempty"`
	// WorkerCPUPct is the running time of the GC worker goroutines
	// (runtime.gcBgMarkWorker) over GOMAXPROCS × the trace's duration.
	WorkerCPUPct    float64     `json:"worker_cpu_pct"`
	WorkerRunningMs float64     `json:"worker_running_ms"`
	AssistMs        float64     `json:"assist_ms"`
	Assists         []GroupTime `json:"assists"` // by goroutine group
}

// GroupTime is a time spent by one goroutine group.
type GroupTime struct {
	Group string  `json:"group"`
	Ms    float64 `json:"ms"`
}

// StackTime is a time spent, and how many times, in one stack.
type StackTime struct {
	Reason string   `json:"reason,omitempty"`
	Ms     float64  `json:"ms"`
	Count  int64    `json:"count"`
	Stack  []string `json:"stack"`
}

// Latency is the time goroutines waited to run after being made runnable.
type Latency struct {
	Dist
	Histogram []Bucket     `json:"histogram"`
	Groups    []GroupDist  `json:"groups"`
	Worst     []Occurrence `json:"worst"`
	Stacks    []StackTime  `json:"stacks"`
}

// GroupDist is a distribution for one goroutine group.
type GroupDist struct {
	Group   string `json:"group"`
	Created string `json:"created_at,omitempty"`
	Dist
}

// BlockReason is the time goroutines spent blocked for one reason.
type BlockReason struct {
	Reason  string      `json:"reason"`
	TotalMs float64     `json:"total_ms"`
	Groups  []GroupTime `json:"groups"`
	Stacks  []StackTime `json:"stacks"`
}

// Syscalls are the times goroutines spent in system calls.
type Syscalls struct {
	Dist
	Histogram []Bucket `json:"histogram"`
	// LostProc counts syscalls long enough that the scheduler gave their
	// thread's P to another thread.
	LostProc int64        `json:"lost_proc"`
	Worst    []Occurrence `json:"worst"`
	Stacks   []StackTime  `json:"stacks"`
}

// Goroutines is goroutine churn and groups.
type Goroutines struct {
	Created     int64      `json:"created"`
	Exited      int64      `json:"exited"`
	CreatedPerS float64    `json:"created_per_s"`
	ExitedPerS  float64    `json:"exited_per_s"`
	MaxLive     int64      `json:"max_live"`
	LiveAtEnd   int64      `json:"live_at_end"`
	Groups      []GroupRow `json:"groups"`
	GroupsNoted int        `json:"groups_total"`
}

// GroupRow is one goroutine group: goroutines with one start function.
type GroupRow struct {
	Group      string             `json:"group"`
	Created    string             `json:"created_at,omitempty"`
	Goroutines int64              `json:"goroutines"`
	RunningMs  float64            `json:"running_ms"`
	BlockedMs  map[string]float64 `json:"blocked_ms"`
}

// TypeDist is the durations of one region or task type.
type TypeDist struct {
	Type string `json:"type"`
	Dist
}

// Timeline is the overview in equal bins of time.
type Timeline struct {
	BinMs    float64   `json:"bin_ms"`
	GCMs     []float64 `json:"gc_ms"`
	STWMs    []float64 `json:"stw_ms"`
	Live     []int64   `json:"live"`
	Running  []int64   `json:"running"`
	Runnable []int64   `json:"runnable"`
	Created  []int64   `json:"created"`
}

// period measures how regularly events starting at ts recur.
func period(ts []trace.Time) *Period {
	ns := make([]int64, len(ts))
	for i, t := range ts {
		ns[i] = int64(t)
	}
	return periodOf(ns)
}

// periodOf measures how regularly events starting at ts (ns) recur.
func periodOf(ts []int64) *Period {
	if len(ts) < 3 {
		return nil
	}
	iv := make([]float64, 0, len(ts)-1)
	sum := 0.0
	for i := 1; i < len(ts); i++ {
		d := float64(ts[i]-ts[i-1]) / 1e6
		iv = append(iv, d)
		sum += d
	}
	med := median(iv)
	within := 0
	dev := make([]float64, len(iv))
	for i, d := range iv {
		if math.Abs(d-med) <= 0.1*med {
			within++
		}
		dev[i] = math.Abs(d - med)
	}
	p := &Period{Intervals: len(iv), MedianMs: round3(med), MeanMs: round3(sum / float64(len(iv))),
		WithinPct: round1(100 * float64(within) / float64(len(iv)))}
	if med > 0 {
		p.SpreadPct = round1(100 * median(dev) / med)
	}
	p.Periodic = len(iv) >= 4 && p.WithinPct >= 70
	return p
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func (a *analyzer) summary() *Summary {
	a.materialize()
	dur := a.last.Sub(a.first)
	s := &Summary{Format: Format, Name: a.opt.Name, GoVersion: "1." + strconv.Itoa(a.version), Bytes: a.bytes,
		Events: a.events, Generations: max(a.syncs-1, 0), DurationMs: ms(dur), Procs: a.procs, Truncated: a.truncated, stacks: a.st}
	if s.Procs == 0 {
		s.Procs = int64(a.maxProc) + 1
	}
	s.Pauses = a.pauseSummary()
	s.GC = a.gcSummary(dur, s.Procs)
	s.Sched = a.schedSummary()
	s.Blocking = a.blockSummary()
	s.Syscalls = Syscalls{Dist: a.sys.dist(), Histogram: a.sys.buckets(), LostProc: a.sysLostP,
		Worst: a.occurrences(a.sysWorst), Stacks: a.topStacks(a.sysStack, 10)}
	s.Goroutines = a.goroutineSummary(dur)
	s.Regions = typeDists(a.regions)
	s.Tasks = typeDists(a.taskDur)
	s.Timeline = a.timelineSummary()
	s.prof = profData{sched: a.schedStack, sys: a.sysStack, block: a.block}
	return s
}

func (a *analyzer) at(t trace.Time) float64 { return ms(t.Sub(a.first)) }

func (a *analyzer) occurrences(w []event) []Occurrence {
	out := []Occurrence{}
	for _, e := range w {
		o := Occurrence{AtMs: a.at(e.at), Ms: ms(e.dur), Goroutine: int64(e.g), Stack: a.st.lines(e.stack)}
		if e.group >= 0 {
			o.Group = a.groups[e.group].name
		}
		out = append(out, o)
	}
	return out
}

// site names where a stack starts from: the innermost frame outside the
// runtime, else the outermost function.
func (a *analyzer) site(s stackID) string {
	if f := a.st.userFrame(s); f != nil {
		return f.Func
	}
	if r := a.st.root(s); r != "" {
		return r
	}
	return "(no stack)"
}

func (a *analyzer) pauseSummary() Pauses {
	var all hist
	type kind struct {
		h      hist
		starts []trace.Time
		stack  stackID
		reason string
		site   string
	}
	kinds := map[[2]string]*kind{}
	var starts []trace.Time
	for _, p := range a.pauses {
		all.add(p.dur)
		starts = append(starts, p.start)
		site := a.site(p.stack)
		k := kinds[[2]string{p.name, site}]
		if k == nil {
			k = &kind{stack: p.stack, reason: p.name, site: site}
			kinds[[2]string{p.name, site}] = k
		}
		k.h.add(p.dur)
		k.starts = append(k.starts, p.start)
	}
	out := Pauses{Dist: all.dist(), Histogram: all.buckets(), Period: period(starts), Kinds: []PauseKind{}}
	for _, k := range kinds {
		out.Kinds = append(out.Kinds, PauseKind{Reason: k.reason, Site: k.site, Stack: a.st.lines(k.stack),
			Dist: k.h.dist(), Period: period(k.starts)})
	}
	slices.SortFunc(out.Kinds, func(x, y PauseKind) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Reason, y.Reason), cmp.Compare(x.Site, y.Site))
	})
	longest := slices.Clone(a.pauses)
	slices.SortStableFunc(longest, func(x, y pause) int { return cmp.Compare(y.dur, x.dur) })
	out.Longest = []Occurrence{}
	for _, p := range longest[:min(len(longest), a.opt.Worst)] {
		out.Longest = append(out.Longest, Occurrence{AtMs: a.at(p.start), Ms: ms(p.dur), What: p.name, Stack: a.st.lines(p.stack)})
	}
	return out
}

func (a *analyzer) gcSummary(dur time.Duration, procs int64) GC {
	g := GC{Cycles: len(a.gcCycles), MarkMs: ms(a.gcMark), Period: period(a.gcCycles), Assists: []GroupTime{}}
	var assist time.Duration
	for _, gr := range a.groups {
		if gr.name == "runtime.gcBgMarkWorker" {
			g.WorkerRunningMs = ms(gr.running)
			if dur > 0 && procs > 0 {
				g.WorkerCPUPct = round1(100 * float64(gr.running) / (float64(dur) * float64(procs)))
			}
		}
		if gr.assist > 0 {
			assist += gr.assist
			g.Assists = append(g.Assists, GroupTime{Group: gr.name, Ms: ms(gr.assist)})
		}
	}
	g.AssistMs = ms(assist)
	sortGroupTimes(g.Assists)
	return g
}

func sortGroupTimes(v []GroupTime) {
	slices.SortFunc(v, func(x, y GroupTime) int { return cmp.Or(cmp.Compare(y.Ms, x.Ms), cmp.Compare(x.Group, y.Group)) })
}

func (a *analyzer) schedSummary() Latency {
	l := Latency{Dist: a.sched.dist(), Histogram: a.sched.buckets(), Groups: []GroupDist{},
		Worst: a.occurrences(a.schedWorst), Stacks: a.topStacks(a.schedStack, 10)}
	for _, gr := range a.groups {
		if gr.sched.n > 0 {
			l.Groups = append(l.Groups, GroupDist{Group: gr.name, Created: gr.created, Dist: gr.sched.dist()})
		}
	}
	slices.SortFunc(l.Groups, func(x, y GroupDist) int {
		return cmp.Or(cmp.Compare(y.TotalMs, x.TotalMs), cmp.Compare(x.Group, y.Group))
	})
	return l
}

func (a *analyzer) topStacks(m map[stackID]*stackStat, n int) []StackTime {
	out := []StackTime{}
	for s, v := range m {
		out = append(out, StackTime{Ms: ms(v.total), Count: v.count, Stack: a.st.lines(s)})
	}
	sortStackTimes(out)
	return out[:min(n, len(out))]
}

func sortStackTimes(v []StackTime) {
	slices.SortFunc(v, func(x, y StackTime) int {
		return cmp.Or(cmp.Compare(y.Ms, x.Ms), cmp.Compare(y.Count, x.Count), slices.Compare(x.Stack, y.Stack))
	})
}

func (a *analyzer) blockSummary() []BlockReason {
	by := map[string]*BlockReason{}
	for cat, d := range a.blockTotal {
		by[cat] = &BlockReason{Reason: cat, TotalMs: ms(d), Groups: []GroupTime{}, Stacks: []StackTime{}}
	}
	for k, v := range a.block {
		r := by[k.category]
		r.Stacks = append(r.Stacks, StackTime{Reason: k.reason, Ms: ms(v.total), Count: v.count, Stack: a.st.lines(k.stack)})
	}
	for _, gr := range a.groups {
		for cat, d := range gr.blocked {
			by[cat].Groups = append(by[cat].Groups, GroupTime{Group: gr.name, Ms: ms(d)})
		}
	}
	out := []BlockReason{}
	for _, r := range by {
		sortGroupTimes(r.Groups)
		sortStackTimes(r.Stacks)
		r.Stacks = r.Stacks[:min(10, len(r.Stacks))]
		out = append(out, *r)
	}
	slices.SortFunc(out, func(x, y BlockReason) int {
		return cmp.Or(cmp.Compare(y.TotalMs, x.TotalMs), cmp.Compare(x.Reason, y.Reason))
	})
	return out
}

func (a *analyzer) goroutineSummary(dur time.Duration) Goroutines {
	g := Goroutines{Created: a.created, Exited: a.exited, LiveAtEnd: a.live, Groups: []GroupRow{}, GroupsNoted: len(a.groups)}
	if dur > 0 {
		g.CreatedPerS = round1(float64(a.created) / dur.Seconds())
		g.ExitedPerS = round1(float64(a.exited) / dur.Seconds())
	}
	for _, b := range a.tl.bins {
		g.MaxLive = max(g.MaxLive, b.live)
	}
	for _, gr := range a.groups {
		row := GroupRow{Group: gr.name, Created: gr.created, Goroutines: gr.count, RunningMs: ms(gr.running), BlockedMs: map[string]float64{}}
		for cat, d := range gr.blocked {
			row.BlockedMs[cat] = ms(d)
		}
		g.Groups = append(g.Groups, row)
	}
	slices.SortFunc(g.Groups, func(x, y GroupRow) int {
		return cmp.Or(cmp.Compare(y.RunningMs, x.RunningMs), cmp.Compare(x.Group, y.Group))
	})
	return g
}

func typeDists(m map[string]*hist) []TypeDist {
	out := []TypeDist{}
	for t, h := range m {
		out = append(out, TypeDist{Type: t, Dist: h.dist()})
	}
	slices.SortFunc(out, func(x, y TypeDist) int { return cmp.Or(cmp.Compare(y.TotalMs, x.TotalMs), cmp.Compare(x.Type, y.Type)) })
	return out
}

func (a *analyzer) timelineSummary() Timeline {
	n := 0
	if a.tl.bins != nil {
		n = a.tl.index(a.last) + 1
	}
	t := Timeline{BinMs: float64(a.tl.width) / 1e6}
	var live int64
	for _, b := range a.tl.bins[:n] {
		if b.live > 0 || b.created > 0 || b.exited > 0 {
			live = b.live
		}
		t.GCMs = append(t.GCMs, ms(time.Duration(b.gcNS)))
		t.STWMs = append(t.STWMs, ms(time.Duration(b.stwNS)))
		t.Live = append(t.Live, live)
		t.Running = append(t.Running, b.running)
		t.Runnable = append(t.Runnable, b.runnable)
		t.Created = append(t.Created, b.created)
	}
	return t
}
