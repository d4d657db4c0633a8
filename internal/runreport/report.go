// Package runreport holds what one `wallprof run` investigation found (load
// results, the collector's behaviour, allocations per request and their
// escape reasons, heap over time, the wall-clock profile) and writes it as
// JSON and as one self-contained HTML page.
package runreport

import (
	"encoding/json"
	"github.com/wallprof/wallprof/internal/goruntime/exectrace"
	"io"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/escapes"
	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
	"github.com/wallprof/wallprof/internal/load"
	"github.com/wallprof/wallprof/internal/present"
)

// Format names the JSON schema of a Report.
const Format = "wallprof.run/v1"

// Report is one investigation. Times called "offset" are measured from the
// moment the server was started, the clock of its gctrace lines.
type Report struct {
	Format  string    `json:"format"`
	Command []string  `json:"command"`
	Started time.Time `json:"started"`
	// Ready is when the server first answered.
	Ready time.Duration `json:"ready_offset_ns"`
	// LoadStart and LoadEnd delimit the load window: from the first
	// request sent to the last response.
	LoadStart time.Duration `json:"load_start_offset_ns"`
	LoadEnd   time.Duration `json:"load_end_offset_ns"`

	Load  *load.Result `json:"load"`
	GC    *GC          `json:"gc,omitempty"`
	Alloc *Alloc       `json:"alloc,omitempty"`
	Heap  *HeapSeries  `json:"heap,omitempty"`
	// Profile is the file of the wall-clock profile, relative to the
	// report; empty when nothing was recorded.
	Profile string `json:"profile,omitempty"`
	// Goroutines groups the server's goroutine time by creation site, when
	// the profile has a goroutine view.
	Goroutines *present.GoroutineReport `json:"goroutines,omitempty"`
	// Trace summarises the execution trace taken during the load (run
	// --trace); its page and the trace itself are artefacts.
	Trace *Trace `json:"trace,omitempty"`

	// Artefacts are the raw files written next to the report, by kind,
	// relative to the report's directory.
	Artefacts map[string]string `json:"artefacts"`
	// Notes say what is missing and why.
	Notes []string `json:"notes,omitempty"`
}

// Requests is the number of requests the server answered during the load
// (every completed request, errors included: each cost the server work).
func (r *Report) Requests() int64 {
	if r.Load == nil {
		return 0
	}
	return int64(r.Load.Requests)
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Alloc is what the server allocated during the load window, from the
// difference of two allocation profiles (sampled by the runtime, every
// 512 KiB on average, and scaled: an unbiased estimate).
type Alloc struct {
	Bytes             int64   `json:"bytes"`
	Objects           int64   `json:"objects"`
	BytesPerRequest   float64 `json:"bytes_per_request"`
	ObjectsPerRequest float64 `json:"objects_per_request"`
	// ProfilerBytes were allocated to serve the profiles wallprof fetched
	// (net/http/pprof); they are left out of everything above.
	ProfilerBytes int64 `json:"profiler_bytes"`
	// Sites are the top allocation sites by bytes: lines of the server's
	// own code, the same and in the same order whether or not the source
	// was given; with it, they carry the compiler's reasons too.
	Sites []escapes.Site `json:"sites,omitempty"`
	// Explained says whether Sites carry escape-analysis reasons.
	Explained bool `json:"explained"`
}

// GC is the collector's behaviour during the load window, from the gctrace
// lines the server printed.
type GC struct {
	// Summary covers the collections that started in the load window.
	Summary gctrace.Summary `json:"summary"`
	// InLog is the number of collection lines in the whole log, and
	// Before and After those that started before and after the window.
	InLog  int `json:"collections_in_log"`
	Before int `json:"collections_before_load"`
	After  int `json:"collections_after_load"`
	// PerKRequests is collections per 1000 requests in the window.
	PerKRequests float64 `json:"collections_per_1000_requests"`
	// Timeline has every collection of the log, in order.
	Timeline []GCPoint `json:"timeline"`
}

// GCPoint is one collection on the timeline.
type GCPoint struct {
	At         time.Duration `json:"at_offset_ns"`
	Wall       time.Duration `json:"wall_ns"`
	HeapBefore int64         `json:"heap_before_mb"`
	HeapAfter  int64         `json:"heap_after_mb"`
	Goal       int64         `json:"goal_mb"`
	// CPUPercent is the collector's CPU time in this cycle (idle marking
	// excluded) over the CPU available since the previous cycle started;
	// -1 for the first cycle.
	CPUPercent float64 `json:"gc_cpu_percent"`
	// RuntimePercent is the runtime's cumulative figure on the line.
	RuntimePercent int `json:"gc_percent_runtime"`
}

// HeapSeries is the heap in use over time by allocation site, from heap
// profiles fetched every interval.
type HeapSeries struct {
	At    []time.Duration `json:"at_offset_ns"`
	Sites []string        `json:"sites"` // the largest sites; the last may be "other"
	// Bytes[i][j] is the bytes in use at At[i] allocated at Sites[j].
	Bytes [][]int64 `json:"inuse_bytes"`
	// Failed counts the fetches that failed.
	Failed int `json:"failed_fetches"`
}

// Trace is what the server's execution trace during the load says, in
// brief (wallprof trace on the artefact says all of it).
type Trace struct {
	// Page is the trace's own HTML page, relative to the report.
	Page       string  `json:"page,omitempty"`
	DurationMs float64 `json:"duration_ms"`
	// Pauses are the stop-the-world pauses: count and percentiles, and
	// their period when they recur.
	Pauses    exectrace.Dist `json:"pauses"`
	PeriodMs  float64        `json:"pause_period_ms,omitempty"`
	GCCycles  int            `json:"gc_cycles"`
	GCCPUPct  float64        `json:"gc_cpu_percent"`
	AssistMs  float64        `json:"mark_assist_ms"`
	Sched     exectrace.Dist `json:"sched_latency"`
	Blocking  []TraceBlock   `json:"blocking"`
	Truncated string         `json:"truncated,omitempty"`
}

// TraceBlock is the goroutines' time blocked for one reason.
type TraceBlock struct {
	Reason  string  `json:"reason"`
	TotalMs float64 `json:"total_ms"`
}

// TraceOf condenses an execution trace's summary for the report.
func TraceOf(s *exectrace.Summary, page string) *Trace {
	t := &Trace{Page: page, DurationMs: s.DurationMs, Pauses: s.Pauses.Dist, Sched: s.Sched.Dist,
		GCCycles: s.GC.Cycles, GCCPUPct: s.GC.WorkerCPUPct, AssistMs: s.GC.AssistMs, Truncated: s.Truncated}
	if p := s.Pauses.Period; p != nil && p.Periodic {
		t.PeriodMs = p.MedianMs
	}
	for _, b := range s.Blocking {
		t.Blocking = append(t.Blocking, TraceBlock{Reason: b.Reason, TotalMs: b.TotalMs})
	}
	return t
}
