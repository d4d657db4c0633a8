package present

import (
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// ReportOptions configures WriteReport.
//
// With none of Tree, Threads and States set, the text report is the default
// one: header, totals by state, top functions and threads. Setting any of
// them selects views instead: the header, then the selected ones (and the
// top functions only if ShowTop). The JSON report always has the states,
// top functions and threads, and the tree when Tree is set.
type ReportOptions struct {
	Top     int  // functions listed per table; 0 means 20, negative means all
	JSON    bool // write the Report as JSON instead of text
	ShowTop bool // with views selected, list the top functions too
	Tree    bool // the call tree
	Threads bool // the per-thread table, with times and shares by state
	States  bool // the totals by state, with off-CPU and blocked subtotals
	// NodeFraction hides call-tree nodes under this share of the total
	// wall time: 0 means DefaultNodeFraction, negative shows every node.
	NodeFraction float64
	// Filter is applied to the samples first (see Filter).
	Filter Filter
}

// viewsSelected reports whether opt picks views instead of the default report.
func (opt ReportOptions) viewsSelected() bool { return opt.Tree || opt.Threads || opt.States }

// DefaultTop is the number of functions listed when ReportOptions.Top is 0.
const DefaultTop = 20

// ReportFormat identifies the JSON report's schema. Fields are only added
// within a version; renaming or removing one bumps it.
const ReportFormat = "wallprof.report/v1"

// Report is the data of `wallprof report`, and the schema of its JSON form.
// Times are integer nanoseconds, percentages are rounded to 0.01.
type Report struct {
	Format      string  `json:"format"`          // ReportFormat
	Command     string  `json:"command"`         // the profiled command, "" if unknown
	Start       string  `json:"start,omitempty"` // RFC 3339 UTC start of the recording
	DurationNS  int64   `json:"duration_ns"`     // length of the recording
	PeriodNS    int64   `json:"period_ns"`       // sampling period, 0 if unknown
	FrequencyHz float64 `json:"frequency_hz"`    // 1e9/period_ns, 0 if unknown
	Samples     int     `json:"samples"`         // number of samples in the profile (distinct thread, state and stack)
	// StackSamples is how many stacks the recorder took (from the thread
	// table), 0 if unknown.
	StackSamples int `json:"stack_samples"`
	// Placeholders is how many of the Samples stand for a thread's time
	// in a state with no stack taken there ([on-CPU, not sampled],
	// [off-CPU, stack not seen yet]): why Samples can exceed StackSamples.
	Placeholders int `json:"placeholder_samples"`
	// States are the totals for "wall" then each state (on-cpu, runnable,
	// sleeping, disk, other).
	States []StateTotal `json:"states"`
	// Lost counts lost events by cause; empty when none were lost.
	Lost  map[string]uint64 `json:"lost"`
	Cost  *CostReport       `json:"cost"`  // null when the profiler's cost is unknown
	Notes []string          `json:"notes"` // remarks recorded with the profile
	// Recorder says how the recording was made; absent when unknown.
	Recorder *RecorderReport `json:"recorder,omitempty"`
	// Goroutines says how the goroutine view of a Go program was read;
	// absent for other programs ('wallprof report --goroutines' shows it).
	Goroutines *GoroutinesInfo `json:"goroutines,omitempty"`
	// Top are the top functions by weight: "wall", "cpu", "offcpu".
	Top []TopTable `json:"top"`
	// Threads are sorted by wall time, longest first, then by tid. Empty
	// when the profile has no exact thread totals (a foreign pprof file).
	Threads []ThreadRow `json:"threads"`
	// Filter holds the focus, ignore and hide expressions applied to the
	// samples; absent when none was given.
	Filter *FilterReport `json:"filter,omitempty"`
	// Warnings say which filter expressions matched nothing.
	Warnings []string `json:"warnings,omitempty"`
	// Tree is the call tree, present when asked for.
	Tree *Tree `json:"tree,omitempty"`
}

// GoroutinesInfo is how the goroutine view was read.
type GoroutinesInfo struct {
	GoVersion     string `json:"go_version"`
	Snapshots     int    `json:"snapshots"`
	IntervalNS    int64  `json:"interval_ns"`
	MaxGoroutines int    `json:"max_goroutines"`
	Dropped       int    `json:"inconsistent_reads_dropped"`
	TimeNS        int64  `json:"goroutine_time_ns"`
}

func goroutinesInfo(p *profile.Profile) *GoroutinesInfo {
	if p.GoInfo == nil && len(p.Goroutines) == 0 {
		return nil
	}
	g := &GoroutinesInfo{}
	if i := p.GoInfo; i != nil {
		*g = GoroutinesInfo{GoVersion: i.Version, Snapshots: i.Snapshots, IntervalNS: int64(i.Interval), MaxGoroutines: i.MaxGoroutines, Dropped: i.Dropped}
	}
	for _, s := range p.Goroutines {
		g.TimeNS += s.Value
	}
	return g
}

// FilterReport records the filter expressions of a report ("" when unset).
type FilterReport struct {
	Focus  string `json:"focus,omitempty"`
	Ignore string `json:"ignore,omitempty"`
	Hide   string `json:"hide,omitempty"`
	// SamplesKept of SamplesTotal samples remain after filtering. Only
	// sampled times are filtered: measured totals and threads are whole.
	SamplesKept  int `json:"samples_kept"`
	SamplesTotal int `json:"samples_total"`
}

// StateTotal is the time spent in one state, as sampled (the sum of sample
// values) and as measured (the sum of the threads' exact totals).
type StateTotal struct {
	State           string  `json:"state"` // "wall" or a state name
	SampledNS       int64   `json:"sampled_ns"`
	SampledPercent  float64 `json:"sampled_percent"`  // of sampled wall time
	MeasuredNS      int64   `json:"measured_ns"`      // 0 when there are no threads
	MeasuredPercent float64 `json:"measured_percent"` // of measured wall time
}

// RecorderReport is how a recording was made.
type RecorderReport struct {
	// Accounting is how off-CPU time was measured: "resumption" (at each
	// thread's resumption, from the kernel's counters) or "switch-time" (at
	// each context switch); see doc/recorder.md.
	Accounting string `json:"accounting"`
	Kernel     string `json:"kernel,omitempty"` // uname -r of the recording machine
}

// CostReport is wallprof's own cost, relative to the target's CPU time.
type CostReport struct {
	ProfilerCPUNS      int64   `json:"profiler_cpu_ns"`
	ProfilerCPUPercent float64 `json:"profiler_cpu_percent"` // of target_cpu_ns; 0 if that is 0
	StartupCPUNS       int64   `json:"startup_cpu_ns"`       // before recording: loading and attaching the BPF programs
	BPFRunNS           int64   `json:"bpf_run_ns"`
	BPFRunPercent      float64 `json:"bpf_run_percent"` // of target_cpu_ns; 0 if that is 0
	BPFRuns            uint64  `json:"bpf_runs"`
	TargetCPUNS        int64   `json:"target_cpu_ns"`
}

// TopTable lists the functions with the most time under one weight, like
// `pprof -top`: flat is time with the function at the leaf, cum is time
// with it anywhere on the stack (counted once per sample, however deep the
// recursion).
type TopTable struct {
	Weight    string    `json:"weight"` // "wall", "cpu" or "offcpu"
	TotalNS   int64     `json:"total_ns"`
	Functions int       `json:"functions"` // distinct functions with time, listed or not
	Rows      []FuncRow `json:"rows"`      // sorted by flat, then cum, then name
}

// FuncRow is one function in a TopTable. Percentages are of TotalNS.
type FuncRow struct {
	Name        string  `json:"name"`
	FlatNS      int64   `json:"flat_ns"`
	FlatPercent float64 `json:"flat_percent"`
	SumPercent  float64 `json:"sum_percent"` // flat_percent of this row and those above
	CumNS       int64   `json:"cum_ns"`
	CumPercent  float64 `json:"cum_percent"`
}

// ThreadRow is one thread's exact totals.
type ThreadRow struct {
	PID             int     `json:"pid"`
	TID             int     `json:"tid"`
	Name            string  `json:"name"`
	WallNS          int64   `json:"wall_ns"`        // lifetime within the recording (accounted time if unknown)
	AccountedNS     int64   `json:"accounted_ns"`   // on-CPU + runnable + blocked
	OnCPUPercent    float64 `json:"on_cpu_percent"` // this and the following: of accounted_ns
	RunnablePercent float64 `json:"runnable_percent"`
	SleepingPercent float64 `json:"sleeping_percent"`
	DiskPercent     float64 `json:"disk_percent"`
	OtherPercent    float64 `json:"other_percent"`
	Samples         int     `json:"samples"`
	Exited          bool    `json:"exited"`
	OnCPUNS         int64   `json:"on_cpu_ns"`
	RunnableNS      int64   `json:"runnable_ns"`
	BlockedNS       int64   `json:"blocked_ns"` // sleeping + disk + other
	SleepingNS      int64   `json:"sleeping_ns"`
	DiskNS          int64   `json:"disk_ns"`
	OtherNS         int64   `json:"other_ns"`
}

// BuildReport computes the report of p under opt: its filter applied to the
// samples, and the call tree when opt.Tree is set.
func BuildReport(p *profile.Profile, opt ReportOptions) *Report {
	fp, warnings := opt.Filter.Apply(p)
	r := NewReport(fp, opt.Top)
	if !opt.Filter.IsZero() {
		r.Filter = &FilterReport{
			Focus: reString(opt.Filter.Focus), Ignore: reString(opt.Filter.Ignore), Hide: reString(opt.Filter.Hide),
			SamplesKept: len(fp.Samples), SamplesTotal: len(p.Samples),
		}
	}
	r.Warnings = warnings
	if opt.Tree {
		r.Tree = NewTree(fp, opt.NodeFraction)
	}
	return r
}

func reString(re *regexp.Regexp) string {
	if re == nil {
		return ""
	}
	return re.String()
}

// NewReport computes the report of p, listing top functions per weight
// (DefaultTop if top is 0, all if negative).
func NewReport(p *profile.Profile, top int) *Report {
	if top == 0 {
		top = DefaultTop
	}
	r := &Report{
		Format:     ReportFormat,
		Command:    p.Command,
		DurationNS: int64(p.Duration),
		PeriodNS:   p.Period,
		Samples:    len(p.Samples),
		Lost:       map[string]uint64{},
		Notes:      append([]string{}, p.Notes...),
		Goroutines: goroutinesInfo(p),
		Threads:    []ThreadRow{},
	}
	for _, t := range p.Threads {
		r.StackSamples += t.Samples
	}
	for _, s := range p.Samples {
		if isPlaceholder(s) {
			r.Placeholders++
		}
	}
	if !p.Start.IsZero() {
		r.Start = p.Start.UTC().Format(time.RFC3339Nano)
	}
	if p.Period > 0 {
		r.FrequencyHz = round2(1e9 / float64(p.Period))
	}
	for k, v := range p.Lost {
		if v != 0 {
			r.Lost[k] = v
		}
	}
	r.States = stateTotals(p)
	if rec := p.Recorder; rec != nil {
		r.Recorder = &RecorderReport{Accounting: rec.Accounting, Kernel: rec.Kernel}
	}
	if c := p.Cost; c != nil {
		r.Cost = &CostReport{
			ProfilerCPUNS:      int64(c.ProfilerCPU),
			ProfilerCPUPercent: pct(int64(c.ProfilerCPU), int64(c.TargetCPU)),
			StartupCPUNS:       int64(c.StartupCPU),
			BPFRunNS:           int64(c.BPFRunTime),
			BPFRunPercent:      pct(int64(c.BPFRunTime), int64(c.TargetCPU)),
			BPFRuns:            c.BPFRunCount,
			TargetCPUNS:        int64(c.TargetCPU),
		}
	}
	for _, w := range []Weight{Wall, CPU, OffCPU} {
		r.Top = append(r.Top, topTable(p, w, top))
	}
	for _, t := range p.Threads {
		if t != nil {
			r.Threads = append(r.Threads, threadRow(t))
		}
	}
	sort.SliceStable(r.Threads, func(i, j int) bool {
		a, b := r.Threads[i], r.Threads[j]
		if a.WallNS != b.WallNS {
			return a.WallNS > b.WallNS
		}
		if a.TID != b.TID {
			return a.TID < b.TID
		}
		return a.PID < b.PID
	})
	return r
}

func stateTotals(p *profile.Profile) []StateTotal {
	sampled := p.TotalByState()
	var measured [profile.NumStates]int64
	for _, t := range p.Threads {
		if t == nil {
			continue
		}
		for s, d := range t.Time {
			measured[s] += int64(d)
		}
	}
	var sw, mw int64
	for s := range sampled {
		sw += sampled[s]
		mw += measured[s]
	}
	out := []StateTotal{{State: "wall", SampledNS: sw, SampledPercent: pct(sw, sw), MeasuredNS: mw, MeasuredPercent: pct(mw, mw)}}
	for s := profile.State(0); s < profile.NumStates; s++ {
		out = append(out, StateTotal{
			State:     s.String(),
			SampledNS: sampled[s], SampledPercent: pct(sampled[s], sw),
			MeasuredNS: measured[s], MeasuredPercent: pct(measured[s], mw),
		})
	}
	return out
}

// funcTimes sums, per function, the time under w with the function at the
// leaf (flat) and anywhere on the stack, once per sample (cum).
func funcTimes(p *profile.Profile, w Weight) (flat, cum map[string]int64, total int64) {
	flat, cum = map[string]int64{}, map[string]int64{}
	var names []string
	seen := map[string]bool{}
	for _, s := range p.Samples {
		v := w.of(s)
		if v == 0 {
			continue
		}
		total += v
		names = frameNames(names[:0], s.Stack)
		if len(names) == 0 {
			names = append(names, "[no stack]")
		}
		flat[names[0]] += v
		clear(seen)
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				cum[n] += v
			}
		}
	}
	return flat, cum, total
}

// topTable ranks functions by flat time under w.
func topTable(p *profile.Profile, w Weight, top int) TopTable {
	flat, cum, total := funcTimes(p, w)
	rows := make([]FuncRow, 0, len(cum))
	for n, c := range cum {
		rows = append(rows, FuncRow{Name: n, FlatNS: flat[n], CumNS: c})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.FlatNS != b.FlatNS {
			return a.FlatNS > b.FlatNS
		}
		if a.CumNS != b.CumNS {
			return a.CumNS > b.CumNS
		}
		return a.Name < b.Name
	})
	t := TopTable{Weight: w.String(), TotalNS: total, Functions: len(rows)}
	if top >= 0 && len(rows) > top {
		rows = rows[:top]
	}
	var sum int64
	for i := range rows {
		sum += rows[i].FlatNS
		rows[i].FlatPercent = pct(rows[i].FlatNS, total)
		rows[i].SumPercent = pct(sum, total)
		rows[i].CumPercent = pct(rows[i].CumNS, total)
	}
	t.Rows = rows
	return t
}

func threadRow(t *profile.Thread) ThreadRow {
	acc := int64(t.Wall())
	wall := int64(t.Lifetime())
	if wall <= 0 {
		wall = acc
	}
	return ThreadRow{
		PID: t.PID, TID: t.TID, Name: t.Name,
		WallNS:          wall,
		AccountedNS:     acc,
		OnCPUPercent:    pct(int64(t.Time[profile.OnCPU]), acc),
		RunnablePercent: pct(int64(t.Time[profile.Runnable]), acc),
		SleepingPercent: pct(int64(t.Time[profile.Sleeping]), acc),
		DiskPercent:     pct(int64(t.Time[profile.Disk]), acc),
		OtherPercent:    pct(int64(t.Time[profile.Other]), acc),
		Samples:         t.Samples,
		Exited:          t.Exited,
		OnCPUNS:         int64(t.Time[profile.OnCPU]),
		RunnableNS:      int64(t.Time[profile.Runnable]),
		BlockedNS:       int64(t.Blocked()),
		SleepingNS:      int64(t.Time[profile.Sleeping]),
		DiskNS:          int64(t.Time[profile.Disk]),
		OtherNS:         int64(t.Time[profile.Other]),
	}
}

// pct is 100*part/whole rounded to 0.01, or 0 when whole is 0.
func pct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return round2(100 * float64(part) / float64(whole))
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// isPlaceholder reports whether s stands for time without a stack: one
// frame without an address, named in brackets by the recorder.
func isPlaceholder(s *profile.Sample) bool {
	if len(s.Stack) != 1 || s.Stack[0].Address != 0 || len(s.Stack[0].Frames) != 1 {
		return false
	}
	f := s.Stack[0].Frames[0].Function
	return strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]")
}
