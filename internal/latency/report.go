package latency

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Format is the schema id of the JSON output (doc/schemas).
const Format = "wallprof.latency/v1"

// ProbeHitCost is what one probe hit costs the thread that hits it: the
// uprobe trap into the kernel and back, and the BPF program. Measured with
// bench/latency (a tight loop calling a trivial function, with and without
// probes) on this project's 2-vCPU test VM; BENCHMARKS.md has the numbers.
const ProbeHitCost = 15 * time.Microsecond

// Report is the JSON output of wallprof latency.
type Report struct {
	Format       string       `json:"format"`
	PID          int          `json:"pid"`
	Program      string       `json:"program"`
	GoVersion    string       `json:"go_version"`
	DurationNs   int64        `json:"duration_ns"`
	TargetExited bool         `json:"target_exited"`
	Recursion    string       `json:"recursion"`
	Functions    []FuncReport `json:"functions"`
	Cost         CostReport   `json:"cost"`
	Notes        []string     `json:"notes,omitempty"`
}

// FuncReport is one function's calls.
type FuncReport struct {
	Name        string   `json:"name"`
	EntryAddr   string   `json:"entry_addr"`
	RetSites    int      `json:"ret_sites"`
	InlinedInto []string `json:"inlined_into,omitempty"`
	Count       uint64   `json:"count"`
	SumNs       int64    `json:"sum_ns"`
	MeanNs      int64    `json:"mean_ns"`
	P50Ns       int64    `json:"p50_ns"`
	P90Ns       int64    `json:"p90_ns"`
	P99Ns       int64    `json:"p99_ns"`
	P999Ns      int64    `json:"p999_ns"`
	MaxNs       int64    `json:"max_ns"`
	Nested      uint64   `json:"nested"`
	ProbeAddr   string   `json:"entry_probe_addr"`
	Abandoned   uint64   `json:"abandoned"`
	GReused     uint64   `json:"g_reused"`
	Unmatched   uint64   `json:"unmatched_returns"`
	ReadErrors  uint64   `json:"read_errors"`
	Buckets     []Bucket `json:"buckets"`
	// Split is where the time of the calls went; absent when no call was
	// split (doc/latency-split.md says which calls are).
	Split *SplitReport `json:"split,omitempty"`
	// Waits is where the calls whose goroutine stopped running spent their
	// time, by the goroutine's sampled state; absent when the goroutine
	// table was not sampled or no call stopped.
	Waits *WaitReport `json:"waits,omitempty"`
}

// SplitReport is where the time of a function's calls went, on the thread
// that made each call: running (on a CPU), runnable (waiting for one) and
// blocked (the rest of the call's duration). Only calls that returned on
// the thread they entered on are split. Of those, the calls whose
// goroutine ran throughout (and native calls) are exact, and their split
// is also in Exact; Parked counts the others: their goroutine stopped
// running during the call (parked or was preempted; before Go 1.26 a
// system call counts too), and their thread may have run other goroutines
// meanwhile, whose time then counts as the call's, unless the goroutine is
// locked to its thread (doc/latency-split.md).
type SplitReport struct {
	Calls      uint64        `json:"calls"`
	Moved      uint64        `json:"moved"`
	Parked     uint64        `json:"parked"`
	SeqKnown   bool          `json:"parked_known"`
	WallNs     int64         `json:"wall_ns"`
	RunningNs  int64         `json:"running_ns"`
	RunnableNs int64         `json:"runnable_ns"`
	BlockedNs  int64         `json:"blocked_ns"`
	Buckets    []SplitBucket `json:"buckets"`
	Exact      SplitTotals   `json:"exact"`
}

// SplitTotals is the split of some calls, in all.
type SplitTotals struct {
	Calls      uint64 `json:"calls"`
	WallNs     int64  `json:"wall_ns"`
	RunningNs  int64  `json:"running_ns"`
	RunnableNs int64  `json:"runnable_ns"`
	BlockedNs  int64  `json:"blocked_ns"`
}

// SplitBucket is the split of the calls that took [lo_ns, hi_ns).
type SplitBucket struct {
	LoNs       int64  `json:"lo_ns"`
	HiNs       int64  `json:"hi_ns"`
	Calls      uint64 `json:"calls"`
	RunningNs  int64  `json:"running_ns"`
	RunnableNs int64  `json:"runnable_ns"`
	BlockedNs  int64  `json:"blocked_ns"`
}

// Shares returns running, runnable and blocked as fractions of wall.
func (s *SplitReport) Shares() (running, runnable, blocked float64) {
	if s == nil || s.WallNs <= 0 {
		return 0, 0, 0
	}
	w := float64(s.WallNs)
	return float64(s.RunningNs) / w, float64(s.RunnableNs) / w, float64(s.BlockedNs) / w
}

func splitReport(s Snapshot) *SplitReport {
	r := &SplitReport{Moved: s.Counters.Moved, SeqKnown: s.SeqKnown, Buckets: []SplitBucket{}}
	for _, b := range s.Splits[0] {
		r.Exact.Calls += b.Calls
		r.Exact.WallNs += int64(b.Wall)
		r.Exact.RunningNs += int64(b.Running)
		r.Exact.RunnableNs += int64(b.Runnable)
		r.Exact.BlockedNs += int64(max(b.Wall-b.Running-b.Runnable, 0))
	}
	for k := range NLog2 {
		b := s.Splits[0][k]
		p := s.Splits[1][k]
		r.Parked += p.Calls
		b.Calls += p.Calls
		b.Wall += p.Wall
		b.Running += p.Running
		b.Runnable += p.Runnable
		if b.Calls == 0 {
			continue
		}
		blocked := max(b.Wall-b.Running-b.Runnable, 0)
		lo := int64(1) << k
		if k == 0 {
			lo = 0
		}
		r.Buckets = append(r.Buckets, SplitBucket{LoNs: lo, HiNs: int64(1) << (k + 1), Calls: b.Calls,
			RunningNs: int64(b.Running), RunnableNs: int64(b.Runnable), BlockedNs: int64(blocked)})
		r.Calls += b.Calls
		r.WallNs += int64(b.Wall)
		r.RunningNs += int64(b.Running)
		r.RunnableNs += int64(b.Runnable)
		r.BlockedNs += int64(blocked)
	}
	if r.Calls == 0 && r.Moved == 0 {
		return nil
	}
	return r
}

// Bucket is one power of two of the histogram: calls that took [lo, hi).
type Bucket struct {
	LoNs  int64  `json:"lo_ns"`
	HiNs  int64  `json:"hi_ns"`
	Count uint64 `json:"count"`
}

// CostReport is what the probes cost the target.
type CostReport struct {
	Probes         int    `json:"probes"`
	ProbeHits      uint64 `json:"probe_hits"`
	PerHitNs       int64  `json:"per_hit_ns"`
	EstimatedNs    int64  `json:"estimated_target_ns"`
	BPFRunNs       int64  `json:"bpf_run_ns,omitempty"`
	BPFRuns        uint64 `json:"bpf_runs,omitempty"`
	OpenCallsAtEnd int    `json:"open_calls_at_end"`
	// GoroutineSamples is how many times the goroutine table was read
	// (for the calls that stopped), GoroutineSampleNs wallprof's time
	// reading it (the target's cost is its memory being read).
	GoroutineSamples  int   `json:"goroutine_samples,omitempty"`
	GoroutineSampleNs int64 `json:"goroutine_sample_ns,omitempty"`
}

// FuncReportOf summarises one snapshot.
func FuncReportOf(fn Func, s Snapshot) FuncReport {
	c := s.Counters
	r := FuncReport{Name: fn.Name, EntryAddr: fmt.Sprintf("%#x", fn.Entry), RetSites: len(fn.Rets), InlinedInto: fn.InlinedToo,
		Count: c.Count, SumNs: int64(c.Sum), MaxNs: int64(c.Max), Nested: c.Nested, ProbeAddr: fmt.Sprintf("%#x", fn.Probe),
		Abandoned: c.Abandoned, GReused: c.Reused, Unmatched: c.Unmatched, ReadErrors: c.ReadErrs, Buckets: []Bucket{}}
	if c.Count > 0 {
		r.MeanNs = int64(c.Sum) / int64(c.Count)
	}
	h := &s.Hist
	r.P50Ns, r.P90Ns, r.P99Ns, r.P999Ns = int64(h.Quantile(0.5)), int64(h.Quantile(0.9)), int64(h.Quantile(0.99)), int64(h.Quantile(0.999))
	for k, n := range h.Log2() {
		if n > 0 {
			lo := int64(1) << k
			if k == 0 {
				lo = 0
			}
			r.Buckets = append(r.Buckets, Bucket{LoNs: lo, HiNs: int64(1) << (k + 1), Count: n})
		}
	}
	r.Split = splitReport(s)
	return r
}

// WriteJSON writes r, indented.
func WriteJSON(w io.Writer, r *Report) error {
	r.Format = Format
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// WriteText writes one function's summary line and its log2 histogram.
func WriteText(w io.Writer, r FuncReport) {
	fmt.Fprintf(w, "%s: %d calls  p50 %s  p90 %s  p99 %s  max %s", r.Name, r.Count,
		dur(r.P50Ns), dur(r.P90Ns), dur(r.P99Ns), dur(r.MaxNs))
	var extra []string
	if r.Nested > 0 {
		extra = append(extra, fmt.Sprintf("%d nested calls not timed", r.Nested))
	}
	if r.Abandoned > 0 {
		extra = append(extra, fmt.Sprintf("%d never returned", r.Abandoned))
	}
	if len(extra) > 0 {
		fmt.Fprintf(w, "  (%s)", strings.Join(extra, ", "))
	}
	fmt.Fprintln(w)
	var top uint64
	for _, b := range r.Buckets {
		top = max(top, b.Count)
	}
	split := map[int64]SplitBucket{}
	if r.Split != nil {
		for _, b := range r.Split.Buckets {
			split[b.LoNs] = b
		}
	}
	for _, b := range r.Buckets {
		bar := int(40 * b.Count / top)
		if bar == 0 && b.Count > 0 {
			bar = 1
		}
		fmt.Fprintf(w, "  %9s - %-9s %10d |%-40s|", dur(b.LoNs), dur(b.HiNs), b.Count, strings.Repeat("#", bar))
		if sb, ok := split[b.LoNs]; ok {
			fmt.Fprintf(w, " %s", shares(sb.RunningNs, sb.RunnableNs, sb.BlockedNs))
		}
		fmt.Fprintln(w)
	}
	if s := r.Split; s != nil {
		fmt.Fprintf(w, "  where the time went: %s of %d calls on their own thread", shares(s.RunningNs, s.RunnableNs, s.BlockedNs), s.Calls)
		switch {
		case !s.SeqKnown:
			fmt.Fprintf(w, " (whether their goroutine stopped running on the way is not known for this Go version)")
		case s.Parked > 0:
			fmt.Fprintf(w, " (%d of which stopped running on the way: exact only if locked to their thread)", s.Parked)
		}
		if s.Moved > 0 {
			fmt.Fprintf(w, "; %d calls moved to another thread, not split", s.Moved)
		}
		fmt.Fprintln(w)
		if e := s.Exact; s.Parked > 0 && e.Calls > 0 {
			fmt.Fprintf(w, "  of the %d calls that ran throughout: %s\n", e.Calls, shares(e.RunningNs, e.RunnableNs, e.BlockedNs))
		}
	}
	if wr := r.Waits; wr != nil && wr.Samples > 0 {
		fmt.Fprintf(w, "  their goroutine's state during the %d calls that stopped (the goroutine table read every %s, %d samples): %s\n",
			wr.Calls, dur(wr.IntervalNs), wr.Samples, stateShares(wr.States, 6))
		for _, b := range wr.Buckets {
			if b.Samples > 0 {
				fmt.Fprintf(w, "  %9s - %-9s %10d calls  %s\n", dur(b.LoNs), dur(b.HiNs), b.Calls, stateShares(b.States, 4))
			}
		}
	}
}

// stateShares prints the first n states and their shares.
func stateShares(states []StateShare, n int) string {
	var parts []string
	other := 0.0
	for i, s := range states {
		if i < n {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", s.State, 100*s.Share))
		} else {
			other += s.Share
		}
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("other %.0f%%", 100*other))
	}
	return strings.Join(parts, ", ")
}

// shares prints running, runnable and blocked time as percentages.
func shares(running, runnable, blocked int64) string {
	total := float64(running + runnable + blocked)
	if total <= 0 {
		return "running -  runnable -  blocked -"
	}
	return fmt.Sprintf("running %2.0f%%  runnable %2.0f%%  blocked %2.0f%%", 100*float64(running)/total, 100*float64(runnable)/total, 100*float64(blocked)/total)
}

// WriteLine writes one function's summary as one plain line.
func WriteLine(w io.Writer, at time.Duration, r FuncReport) {
	fmt.Fprintf(w, "%6.1fs %s count=%d p50=%s p90=%s p99=%s max=%s\n", at.Seconds(), r.Name, r.Count,
		dur(r.P50Ns), dur(r.P90Ns), dur(r.P99Ns), dur(r.MaxNs))
}

// dur prints ns with three significant digits.
func dur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}
