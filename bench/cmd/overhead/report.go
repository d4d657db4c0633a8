package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// medianOf returns the median of f over the results.
func medianOf(rs []result, f func(result) float64) float64 {
	xs := make([]float64, 0, len(rs))
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return median(xs)
}

func sec(d time.Duration) float64 { return d.Seconds() }

func fmtDur(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Microsecond).String()
}

// fmtPaired is the median over rounds of f(r)/f(none) in the same round,
// as a slowdown: steadier than the ratio of medians when the machine drifts
// from round to round.
func fmtPaired(rs, base []result, f func(result) float64) string {
	ratios := pairRatios(rs, base, f)
	if len(ratios) == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(median(ratios)-1))
}

func fmtRatio(x, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(x/base-1))
}

// printTables prints, per workload and configuration, the medians of every
// measure: first what the target feels (with ratios to "none"), then what
// the profiler costs and reports about itself. With markdown, as Markdown
// tables (for BENCHMARKS.md).
func printTables(w io.Writer, workloads []string, configs []config, results []result, markdown bool) {
	target := [][]string{{"workload", "config", "runs", "W wall", "slowdown", "paired", "W CPU", "W CPU vs none", "tool CPU",
		"CPU/work vs none", "switches/s", "cmd wall"}}
	counted := false
	for _, r := range results {
		counted = counted || r.Count > 0
	}
	if counted {
		target[0] = append(target[0], "count", "count vs none")
	}
	tool := [][]string{{"workload", "config", "startup", "tail", "peak RSS", "self CPU (% of W)",
		"self BPF (% of W)", "BPF ns/switch", "BPF runs/switch", "self tail", "self peak mem"}}
	for _, wl := range workloads {
		base := filter(results, wl, "none")
		for _, c := range configs {
			rs := filter(results, wl, c.Name)
			if len(rs) == 0 {
				continue
			}
			wall := func(r result) float64 { return sec(r.W.Elapsed) }
			total := func(r result) float64 { return sec(r.W.CPU + r.ToolCPU) }
			wcpu := func(r result) float64 { return sec(r.W.CPU) }
			target = append(target, []string{wl, c.Name, strconv.Itoa(len(rs)),
				fmtDur(medianOf(rs, wall)), fmtRatio(medianOf(rs, wall), medianOf(base, wall)),
				fmtPaired(rs, base, wall),
				fmtDur(medianOf(rs, wcpu)), fmtRatio(medianOf(rs, wcpu), medianOf(base, wcpu)),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.ToolCPU) })),
				fmtRatio(medianOf(rs, total), medianOf(base, total)),
				switchesCol(rs),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.CmdWall) })),
			})
			if counted {
				count := func(r result) float64 { return r.Count }
				row := &target[len(target)-1]
				*row = append(*row, fmtCount(medianOf(rs, count)), fmtPaired(rs, base, count))
			}
			if c.Name == "none" {
				continue
			}
			tool = append(tool, []string{wl, c.Name,
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.Startup) })),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.Tail) })),
				fmt.Sprintf("%.1fMiB", medianOf(rs, func(r result) float64 { return float64(r.ToolRSSKB) })/1024),
				selfPct(rs, func(r result) (time.Duration, float64, bool) {
					return r.Self.ProfilerCPU, r.Self.CPUPct, r.Self.HasCost
				}),
				selfPct(rs, func(r result) (time.Duration, float64, bool) { return r.Self.BPF, r.Self.BPFPct, r.Self.HasBPF }),
				perSwitch(rs, wl, func(r result) float64 { return float64(r.Self.BPF.Nanoseconds()) }, "%.0f"),
				perSwitch(rs, wl, func(r result) float64 { return float64(r.Self.Runs) }, "%.2f"),
				selfCol(rs, func(r result) (time.Duration, bool) { return r.Self.Finish, r.Self.HasFinish }),
				selfNum(rs, func(r result) (float64, bool) { return r.Self.PeakMiB, r.Self.PeakMiB > 0 }, "%.0fMiB"),
			})
		}
	}
	writeTable(w, target, markdown)
	fmt.Fprintln(w)
	writeTable(w, tool, markdown)
	fmt.Fprintln(w)
	printPaired(w, workloads, configs, results, markdown)
}

func writeTable(w io.Writer, rows [][]string, markdown bool) {
	if markdown {
		for i, row := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			if i == 0 {
				fmt.Fprint(w, "|---|---|")
				for range row[2:] {
					fmt.Fprint(w, "---:|")
				}
				fmt.Fprintln(w)
			}
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

// writeMarkdown writes the tables as Markdown to path.
func writeMarkdown(path string, workloads []string, configs []config, results []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	printTables(f, workloads, configs, results, true)
	return f.Close()
}

// selfPct is the median of a duration wallprof reports with its median
// percentage of the target's CPU, "-" if it did not report it.
func selfPct(rs []result, f func(result) (time.Duration, float64, bool)) string {
	var ds, ps []float64
	for _, r := range rs {
		if d, p, ok := f(r); ok {
			ds, ps = append(ds, sec(d)), append(ps, p)
		}
	}
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%.2f%%)", fmtDur(median(ds)), median(ps))
}

func selfNum(rs []result, f func(result) (float64, bool), format string) string {
	var xs []float64
	for _, r := range rs {
		if x, ok := f(r); ok {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(xs))
}

// perSwitch is the median of f per context switch of a ping-pong (2 per
// round trip), for the runs where wallprof measured its BPF run time.
func perSwitch(rs []result, wl string, f func(result) float64, format string) string {
	if !strings.HasPrefix(wl, "pingpong") {
		return "-"
	}
	var xs []float64
	for _, r := range rs {
		if r.Self.HasBPF && r.W.Iters > 0 {
			xs = append(xs, f(r)/float64(2*r.W.Iters))
		}
	}
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(xs))
}

func filter(rs []result, workload, config string) []result {
	var out []result
	for _, r := range rs {
		if r.Workload == workload && r.Config == config {
			out = append(out, r)
		}
	}
	return out
}

func selfCol(rs []result, f func(result) (time.Duration, bool)) string {
	var xs []float64
	for _, r := range rs {
		if d, ok := f(r); ok {
			xs = append(xs, sec(d))
		}
	}
	if len(xs) == 0 {
		return "-"
	}
	return fmtDur(median(xs))
}

func switchesCol(rs []result) string {
	s := medianOf(rs, func(r result) float64 { return r.W.SwitchesPerSec })
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", s)
}

// writeCSV writes every run, for BENCHMARKS.md or a later benchstat-like
// analysis.
func writeCSV(path string, results []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{"workload", "config", "round", "w_wall_ns", "w_cpu_ns", "tool_cpu_ns", "tool_rss_kb",
		"cmd_wall_ns", "startup_ns", "tail_ns", "self_cpu_ns", "self_bpf_ns", "self_tail_ns", "switches_per_s",
		"iters", "self_cpu_pct", "self_bpf_pct", "self_bpf_measured", "self_bpf_runs", "self_peak_mib", "count"})
	for _, r := range results {
		cw.Write([]string{r.Workload, r.Config, strconv.Itoa(r.Round),
			i64(int64(r.W.Elapsed)), i64(int64(r.W.CPU)), i64(int64(r.ToolCPU)), i64(r.ToolRSSKB),
			i64(int64(r.CmdWall)), i64(int64(r.Startup)), i64(int64(r.Tail)),
			i64(int64(r.Self.ProfilerCPU)), i64(int64(r.Self.BPF)), i64(int64(r.Self.Finish)),
			strconv.FormatFloat(r.W.SwitchesPerSec, 'f', 0, 64),
			i64(r.W.Iters), fmt.Sprint(r.Self.CPUPct), fmt.Sprint(r.Self.BPFPct), strconv.FormatBool(r.Self.HasBPF),
			i64(r.Self.Runs), fmt.Sprint(r.Self.PeakMiB), strconv.FormatFloat(r.Count, 'f', -1, 64)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// readCSV reads the runs writeCSV wrote, to print the tables again.
func readCSV(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var out []result
	for _, row := range rows[1:] {
		str := func(k string) string {
			if i, ok := col[k]; ok && i < len(row) {
				return row[i]
			}
			return ""
		}
		n := func(k string) int64 { x, _ := strconv.ParseInt(str(k), 10, 64); return x }
		d := func(k string) time.Duration { return time.Duration(n(k)) }
		fl := func(k string) float64 { x, _ := strconv.ParseFloat(str(k), 64); return x }
		var r result
		r.Workload, r.Config, r.Round = str("workload"), str("config"), int(n("round"))
		r.W.Elapsed, r.W.CPU, r.W.Iters, r.W.SwitchesPerSec = d("w_wall_ns"), d("w_cpu_ns"), n("iters"), fl("switches_per_s")
		r.ToolCPU, r.ToolRSSKB, r.CmdWall, r.Startup, r.Tail = d("tool_cpu_ns"), n("tool_rss_kb"), d("cmd_wall_ns"), d("startup_ns"), d("tail_ns")
		r.Self.ProfilerCPU, r.Self.BPF, r.Self.Finish = d("self_cpu_ns"), d("self_bpf_ns"), d("self_tail_ns")
		r.Self.CPUPct, r.Self.BPFPct, r.Self.Runs, r.Self.PeakMiB = fl("self_cpu_pct"), fl("self_bpf_pct"), n("self_bpf_runs"), fl("self_peak_mib")
		r.Self.HasBPF = str("self_bpf_measured") == "true"
		r.Count = fl("count")
		r.Self.HasCost = strings.HasPrefix(r.Config, "wallprof")
		r.Self.HasFinish = r.Self.HasCost && r.Self.Finish > 0
		out = append(out, r)
	}
	return out, nil
}

// reprint prints the tables of one results.csv, or of several pooled
// (paths separated by commas: each run's rounds pair among themselves), in
// the order their rows appear.
func reprint(w io.Writer, paths string, markdown bool) error {
	var rs []result
	for i, path := range strings.Split(paths, ",") {
		one, err := readCSV(strings.TrimSpace(path))
		if err != nil {
			return err
		}
		for j := range one {
			one[j].Run = i
		}
		rs = append(rs, one...)
	}
	var workloads []string
	var configs []config
	seenW, seenC := map[string]bool{}, map[string]bool{}
	for _, r := range rs {
		if !seenW[r.Workload] {
			seenW[r.Workload] = true
			workloads = append(workloads, r.Workload)
		}
		if !seenC[r.Config] {
			seenC[r.Config] = true
			configs = append(configs, config{Name: r.Config})
		}
	}
	printTables(w, workloads, configs, rs, markdown)
	return nil
}
