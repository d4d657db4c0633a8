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
// opt.Tree, opt.Threads and opt.States select views instead (see
// ReportOptions). Columns are as wide as their longest cell: names are
// never truncated. With opt.JSON it writes the Report as an indented JSON
// document instead.
func WriteReport(w io.Writer, p *profile.Profile, opt ReportOptions) error {
	r := BuildReport(p, opt)
	if opt.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r)
	}
	bw := bufio.NewWriter(w)
	writeHeader(bw, r)
	if !opt.viewsSelected() {
		fmt.Fprintln(bw)
		writeStates(bw, r, false)
		for _, t := range r.Top {
			fmt.Fprintln(bw)
			writeTop(bw, t)
		}
		fmt.Fprintln(bw)
		writeThreads(bw, r.Threads)
		return bw.Flush()
	}
	if opt.States {
		fmt.Fprintln(bw)
		writeStates(bw, r, true)
	}
	if opt.ShowTop {
		for _, t := range r.Top {
			fmt.Fprintln(bw)
			writeTop(bw, t)
		}
	}
	if opt.Tree {
		fmt.Fprintln(bw)
		writeTree(bw, r.Tree)
	}
	if opt.Threads {
		fmt.Fprintln(bw)
		writeThreadTimes(bw, r.Threads)
	}
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
		line := fmt.Sprintf("%d stacks taken, %d distinct (thread, state, stack)", r.StackSamples, r.Samples)
		if r.Placeholders > 0 {
			line += fmt.Sprintf(", %d of them time with no stack taken", r.Placeholders)
		}
		kv.add("samples:", line)
	} else {
		kv.add("samples:", fmt.Sprint(r.Samples))
	}
	kv.add("lost events:", lostSummary(r.Lost))
	if c := r.Cost; c != nil {
		startup := ""
		if c.StartupCPUNS > 0 {
			startup = fmt.Sprintf(", %s to start", fmtDur(c.StartupCPUNS))
		}
		kv.add("wallprof cost:", fmt.Sprintf("profiler CPU %s while recording (%s of target CPU)%s; BPF run time %s (%s) in %d runs; target CPU %s",
			fmtDur(c.ProfilerCPUNS), costPct(c.ProfilerCPUPercent, c.TargetCPUNS), startup,
			fmtDur(c.BPFRunNS), costPct(c.BPFRunPercent, c.TargetCPUNS), c.BPFRuns, fmtDur(c.TargetCPUNS)))
	}
	if rec := r.Recorder; rec != nil {
		kv.add("recorded with:", recorderSummary(&profile.Recorder{Accounting: rec.Accounting, Kernel: rec.Kernel}))
	}
	if g := r.Goroutines; g != nil {
		kv.add("goroutines:", fmt.Sprintf("%s, %s of goroutine time, up to %d goroutines (table read %d times, every %s); 'wallprof report --goroutines' groups them",
			g.GoVersion, fmtDur(g.TimeNS), g.MaxGoroutines, g.Snapshots, fmtDur(g.IntervalNS)))
	}
	for _, n := range r.Notes {
		kv.add("note:", oneLine(n))
	}
	if f := r.Filter; f != nil {
		for _, o := range [][2]string{{"focus:", f.Focus}, {"ignore:", f.Ignore}, {"hide:", f.Hide}} {
			if o[1] != "" {
				kv.add(o[0], o[1])
			}
		}
		kv.add("filtered:", fmt.Sprintf("%d of %d samples kept; measured totals and threads are not filtered", f.SamplesKept, f.SamplesTotal))
	}
	for _, wn := range r.Warnings {
		kv.add("warning:", wn)
	}
	kv.write(w)
}

// writeStates prints the totals by state, sampled and (when there are
// thread totals) measured; with subtotals, the off-CPU and blocked sums too.
func writeStates(w io.Writer, r *Report, subtotals bool) {
	measured := len(r.Threads) > 0
	st := &table{header: []string{"state", "sampled", "%"}, right: []bool{false, true, true, true, true}}
	if measured {
		st.header = append(st.header, "measured", "%")
	}
	add := func(name string, sns, mns int64, sp, mp float64) {
		row := []string{name, fmtDur(sns), fmtPct(sp)}
		if measured {
			row = append(row, fmtDur(mns), fmtPct(mp))
		}
		st.add(row...)
	}
	for _, s := range r.States {
		add(stateTitle(s.State), s.SampledNS, s.MeasuredNS, s.SampledPercent, s.MeasuredPercent)
	}
	if subtotals && len(r.States) == int(profile.NumStates)+1 {
		wall := r.States[0]
		var offS, offM, blkS, blkM int64
		for _, s := range r.States[1:] {
			if s.State == profile.OnCPU.String() {
				continue
			}
			offS, offM = offS+s.SampledNS, offM+s.MeasuredNS
			if s.State != profile.Runnable.String() {
				blkS, blkM = blkS+s.SampledNS, blkM+s.MeasuredNS
			}
		}
		add("off-CPU (runnable+blocked)", offS, offM, pct(offS, wall.SampledNS), pct(offM, wall.MeasuredNS))
		add("blocked (sleeping+disk+other)", blkS, blkM, pct(blkS, wall.SampledNS), pct(blkM, wall.MeasuredNS))
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

// writeThreadTimes prints the per-thread table of the --threads view:
// each state's time and its share of the thread's accounted time.
func writeThreadTimes(w io.Writer, threads []ThreadRow) {
	if len(threads) == 0 {
		fmt.Fprintln(w, "threads: no exact thread totals in this profile")
		return
	}
	fmt.Fprintf(w, "threads: %d (time in each state, and %% of accounted time)\n", len(threads))
	tb := &table{
		header: []string{"pid", "tid", "name", "wall", "on-CPU", "%", "runnable", "%", "blocked", "%", "sleeping", "%", "disk", "%", "other", "%", "samples"},
		right:  []bool{true, true, false, true, true, true, true, true, true, true, true, true, true, true, true, true, true},
	}
	for _, t := range threads {
		name := oneLine(t.Name)
		if t.Exited {
			name += " (exited)"
		}
		tb.add(fmt.Sprint(t.PID), fmt.Sprint(t.TID), name, fmtDur(t.WallNS),
			fmtDur(t.OnCPUNS), fmtPct(t.OnCPUPercent),
			fmtDur(t.RunnableNS), fmtPct(t.RunnablePercent),
			fmtDur(t.BlockedNS), fmtPct(pct(t.BlockedNS, t.AccountedNS)),
			fmtDur(t.SleepingNS), fmtPct(t.SleepingPercent),
			fmtDur(t.DiskNS), fmtPct(t.DiskPercent),
			fmtDur(t.OtherNS), fmtPct(t.OtherPercent),
			fmt.Sprint(t.Samples))
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
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
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
