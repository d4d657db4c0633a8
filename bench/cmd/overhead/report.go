package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
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

func fmtRatio(x, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(x/base-1))
}

// printTable prints, per workload and configuration, the medians of every
// measure and their ratio to the "none" configuration.
func printTable(w io.Writer, workloads []string, configs []config, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tconfig\truns\tW wall\tslowdown\tW CPU\ttool CPU\tCPU/work vs none\tcmd wall\tstartup\ttail\tpeak RSS\tself CPU\tself BPF\tself tail\tswitches/s\t")
	for _, wl := range workloads {
		var base []result
		for _, c := range configs {
			rs := filter(results, wl, c.Name)
			if c.Name == "none" {
				base = rs
			}
			if len(rs) == 0 {
				continue
			}
			wall := func(r result) float64 { return sec(r.W.Elapsed) }
			total := func(r result) float64 { return sec(r.W.CPU + r.ToolCPU) }
			row := []string{wl, c.Name, strconv.Itoa(len(rs)),
				fmtDur(medianOf(rs, wall)), fmtRatio(medianOf(rs, wall), medianOf(base, wall)),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.W.CPU) })),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.ToolCPU) })),
				fmtRatio(medianOf(rs, total), medianOf(base, total)),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.CmdWall) })),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.Startup) })),
				fmtDur(medianOf(rs, func(r result) float64 { return sec(r.Tail) })),
				fmt.Sprintf("%.1fMiB", medianOf(rs, func(r result) float64 { return float64(r.ToolRSSKB) })/1024),
				selfCol(rs, func(r result) (time.Duration, bool) { return r.Self.ProfilerCPU, r.Self.HasCost }),
				selfCol(rs, func(r result) (time.Duration, bool) { return r.Self.BPF, r.Self.HasCost }),
				selfCol(rs, func(r result) (time.Duration, bool) { return r.Self.Finish, r.Self.HasFinish }),
				switchesCol(rs),
			}
			for _, cell := range row {
				fmt.Fprint(tw, cell, "\t")
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
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
		"cmd_wall_ns", "startup_ns", "tail_ns", "self_cpu_ns", "self_bpf_ns", "self_tail_ns", "switches_per_s"})
	for _, r := range results {
		cw.Write([]string{r.Workload, r.Config, strconv.Itoa(r.Round),
			i64(int64(r.W.Elapsed)), i64(int64(r.W.CPU)), i64(int64(r.ToolCPU)), i64(r.ToolRSSKB),
			i64(int64(r.CmdWall)), i64(int64(r.Startup)), i64(int64(r.Tail)),
			i64(int64(r.Self.ProfilerCPU)), i64(int64(r.Self.BPF)), i64(int64(r.Self.Finish)),
			strconv.FormatFloat(r.W.SwitchesPerSec, 'f', 0, 64)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }
