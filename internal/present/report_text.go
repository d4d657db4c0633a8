package present

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/wallprof/wallprof/internal/profile"
)

// WriteReport writes the report of p (see Report): a header with the
// recording, totals by state, lost events and wallprof's cost; the top
// functions by wall, on-CPU and off-CPU time; and the per-thread table.
// Columns are as wide as their longest cell: names are never truncated.
// With opt.JSON it writes the Report as an indented JSON document instead.
func WriteReport(w io.Writer, p *profile.Profile, opt ReportOptions) error {
	r := NewReport(p, opt.Top)
	if opt.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r)
	}
	bw := bufio.NewWriter(w)
	writeHeader(bw, r)
	for _, t := range r.Top {
		fmt.Fprintln(bw)
		writeTop(bw, t)
	}
	fmt.Fprintln(bw)
	writeThreads(bw, r.Threads)
	return bw.Flush()
}

var weightTitles = map[string]string{"wall": "wall", "cpu": "on-CPU", "offcpu": "off-CPU"}

func writeHeader(w io.Writer, r *Report) {
	kv := &table{right: []bool{false, false}}
	command := r.Command
	if command == "" {
		command = "(unknown)"
	}
	kv.add("command:", oneLine(command))
	if r.Start != "" {
		kv.add("start:", r.Start)
	}
	kv.add("duration:", fmtDur(r.DurationNS))
	if r.PeriodNS > 0 {
		kv.add("frequency:", fmt.Sprintf("%.4g Hz (period %s)", r.FrequencyHz, fmtDur(r.PeriodNS)))
	} else {
		kv.add("frequency:", "unknown")
	}
	if r.StackSamples > 0 {
		kv.add("samples:", fmt.Sprintf("%d stacks taken, %d distinct (thread, state, stack)", r.StackSamples, r.Samples))
	} else {
		kv.add("samples:", fmt.Sprint(r.Samples))
	}
	kv.add("lost events:", lostSummary(r.Lost))
	if c := r.Cost; c != nil {
		kv.add("wallprof cost:", fmt.Sprintf("profiler CPU %s (%s of target CPU), BPF run time %s (%s) in %d runs; target CPU %s",
			fmtDur(c.ProfilerCPUNS), costPct(c.ProfilerCPUPercent, c.TargetCPUNS),
			fmtDur(c.BPFRunNS), costPct(c.BPFRunPercent, c.TargetCPUNS), c.BPFRuns, fmtDur(c.TargetCPUNS)))
	}
	for _, n := range r.Notes {
		kv.add("note:", oneLine(n))
	}
	kv.write(w)

	fmt.Fprintln(w)
	measured := len(r.Threads) > 0
	st := &table{header: []string{"state", "sampled", "%"}, right: []bool{false, true, true, true, true}}
	if measured {
		st.header = append(st.header, "measured", "%")
	}
	for _, s := range r.States {
		row := []string{stateTitle(s.State), fmtDur(s.SampledNS), fmtPct(s.SampledPercent)}
		if measured {
			row = append(row, fmtDur(s.MeasuredNS), fmtPct(s.MeasuredPercent))
		}
		st.add(row...)
	}
	st.write(w)
}

func stateTitle(s string) string {
	if s == "on-cpu" {
		return "on-CPU"
	}
	return s
}

func costPct(p float64, target int64) string {
	if target == 0 {
		return "n/a"
	}
	return fmtPct(p)
}

func writeTop(w io.Writer, t TopTable) {
	fmt.Fprintf(w, "top functions by %s time: %d of %d functions, total %s\n",
		weightTitles[t.Weight], len(t.Rows), t.Functions, fmtDur(t.TotalNS))
	tb := &table{
		header: []string{"flat", "flat%", "sum%", "cum", "cum%", "function"},
		right:  []bool{true, true, true, true, true, false},
	}
	for _, r := range t.Rows {
		tb.add(fmtDur(r.FlatNS), fmtPct(r.FlatPercent), fmtPct(r.SumPercent), fmtDur(r.CumNS), fmtPct(r.CumPercent), oneLine(r.Name))
	}
	tb.write(w)
}

func writeThreads(w io.Writer, threads []ThreadRow) {
	if len(threads) == 0 {
		fmt.Fprintln(w, "threads: no exact thread totals in this profile")
		return
	}
	fmt.Fprintf(w, "threads: %d (state %% of accounted time)\n", len(threads))
	tb := &table{
		header: []string{"pid", "tid", "name", "wall", "on-CPU", "runnable", "sleeping", "disk", "other"},
		right:  []bool{true, true, false, true, true, true, true, true, true},
	}
	for _, t := range threads {
		name := oneLine(t.Name)
		if t.Exited {
			name += " (exited)"
		}
		tb.add(fmt.Sprint(t.PID), fmt.Sprint(t.TID), name, fmtDur(t.WallNS),
			fmtPct(t.OnCPUPercent), fmtPct(t.RunnablePercent), fmtPct(t.SleepingPercent),
			fmtPct(t.DiskPercent), fmtPct(t.OtherPercent))
	}
	tb.write(w)
}

// table lays out cells in columns as wide as their widest cell.
type table struct {
	header []string
	right  []bool // right-align column i
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	all := t.rows
	if t.header != nil {
		all = append([][]string{t.header}, t.rows...)
	}
	var widths []int
	for _, row := range all {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, row := range all {
		b.Reset()
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < len(t.right) && t.right[i] {
				b.WriteString(pad + c)
			} else if i < len(row)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// fmtDur formats nanoseconds with a unit chosen by magnitude: 1.50s,
// 12.00ms, 3.20us, 999ns.
func fmtDur(ns int64) string {
	a := ns
	if a < 0 {
		a = -a
	}
	switch {
	case a == 0:
		return "0"
	case a >= 1e9:
		return fmt.Sprintf("%.2fs", float64(ns)/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.2fus", float64(ns)/1e3)
	}
	return fmt.Sprintf("%dns", ns)
}

func fmtPct(p float64) string { return fmt.Sprintf("%.2f%%", p) }
