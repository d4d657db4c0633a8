// Command waitleaf reads profiles of the same program (wallprof's own, and
// perf's converted with `wallprof convert`) and prints, for each, the share
// of on-CPU time whose leaf frame is a kernel function in which a thread
// waits (sleep, poll, futex, pipe, disk, interrupt exit, the scheduler) and
// the leaf functions that hold the most on-CPU time. perf credits each timer
// period to where the CPU was; a profiler that credits CPU time to where a
// thread next waited shows these functions as leaves. Used by
// bench/realprograms.sh.
//
//	waitleaf [-pid N] [-top 5] NAME=PROFILE...
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

func main() {
	pid := flag.Int("pid", 0, "only this process (0: all)")
	top := flag.Int("top", 5, "leaf functions to list")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: waitleaf [-pid N] [-top 5] NAME=PROFILE...")
		os.Exit(2)
	}
	for _, arg := range flag.Args() {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			name, path = path, arg
		}
		p, err := present.ReadProfileFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "waitleaf: %v\n", err)
			os.Exit(1)
		}
		leaves, total := leafTimes(p, *pid)
		var wait, sched int64
		for f, v := range leaves {
			if symbolize.IsKernelWait(f) {
				wait += v
			}
			if symbolize.IsKernelScheduler(f) {
				sched += v
			}
		}
		fmt.Printf("%-10s on-CPU %8.3fs  on a kernel waiting leaf %5.1f%% (%4.1f%% without the scheduler's)  top leaves: %s\n",
			name, float64(total)/1e9, pct(wait, total), pct(wait-sched, total), topLeaves(leaves, total, *top))
	}
}

// leafTimes sums the on-CPU time of p (of process pid, or all) by leaf
// function.
func leafTimes(p *profile.Profile, pid int) (map[string]int64, int64) {
	out := map[string]int64{}
	var total int64
	for _, s := range p.Samples {
		if s.State != profile.OnCPU || (pid != 0 && s.PID != pid) || len(s.Stack) == 0 || len(s.Stack[0].Frames) == 0 {
			continue
		}
		out[s.Stack[0].Frames[0].Function] += s.Value
		total += s.Value
	}
	return out, total
}

func topLeaves(m map[string]int64, total int64, n int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return m[names[i]] > m[names[j]] || m[names[i]] == m[names[j]] && names[i] < names[j]
	})
	var parts []string
	for i := 0; i < n && i < len(names); i++ {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", names[i], pct(m[names[i]], total)))
	}
	return strings.Join(parts, ", ")
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
