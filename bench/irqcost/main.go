// Command irqcost loads irqcost.bpf.o (run.sh builds it) and prints, every
// interval, how many cpu-clock timer callbacks fired on one CPU and their
// mean time in the kernel, by the comm of the process that opened the
// event (wallprof, perf, timerfloor, ...). Several samplers of the same
// frequency on the same target, at once, are so compared in the same
// seconds: what a sample costs the interrupted program, tool against tool,
// where wall time is too noisy to tell (BENCHMARKS.md, issue 20).
//
// With -floor NAME it also prints each tool's cost above that tool's (the
// bare timers), in % of the CPU: callbacks a second times the difference of
// their mean times, paired interval by interval.
//
// Usage: irqcost [-cpu N] [-interval 2s] [-n 10] [-floor NAME] OBJECT
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// ksym returns the address of the kernel function name.
func ksym(name string) (uint64, error) {
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == name {
			return strconv.ParseUint(f[0], 16, 64)
		}
	}
	return 0, fmt.Errorf("%s is not in /proc/kallsyms", name)
}

type cost struct{ N, NS uint64 }

func main() {
	cpu := flag.Int("cpu", 0, "the CPU whose timer callbacks are timed")
	interval := flag.Duration("interval", 2*time.Second, "print every")
	n := flag.Int("n", 10, "intervals")
	floor := flag.String("floor", "", "the comm of the floor's events (the bare timers)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: irqcost [-cpu N] [-interval D] [-n N] OBJECT")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *cpu, *interval, *n, *floor); err != nil {
		fmt.Fprintln(os.Stderr, "irqcost:", err)
		os.Exit(1)
	}
}

func run(object string, cpu int, interval time.Duration, n int, floor string) error {
	spec, err := ebpf.LoadCollectionSpec(object)
	if err != nil {
		return err
	}
	if err := spec.Variables["target_cpu"].Set(uint32(cpu)); err != nil {
		return err
	}
	fn, err := ksym("perf_swevent_hrtimer")
	if err != nil {
		return err
	}
	if err := spec.Variables["swevent_fn"].Set(fn); err != nil {
		return err
	}
	var objs struct {
		Enter *ebpf.Program `ebpf:"enter"`
		Leave *ebpf.Program `ebpf:"leave"`
		Costs *ebpf.Map     `ebpf:"costs"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return err
	}
	for _, p := range []*ebpf.Program{objs.Enter, objs.Leave} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return err
		}
		defer l.Close()
	}
	prev := map[string]cost{}
	all := map[string][]float64{}   // ns per callback
	rates := map[string][]float64{} // callbacks a second
	above := map[string][]float64{} // % of the CPU above the floor
	for i := 0; i < n; i++ {
		time.Sleep(interval)
		cur := map[string]cost{}
		var k [16]byte
		var v cost
		it := objs.Costs.Iterate()
		for it.Next(&k, &v) {
			cur[string(bytes.TrimRight(k[:], "\x00"))] = v
		}
		if err := it.Err(); err != nil {
			return err
		}
		names := make([]string, 0, len(cur))
		for name := range cur {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Printf("%2d", i+1)
		mean := map[string]float64{}
		for _, name := range names {
			d := cost{cur[name].N - prev[name].N, cur[name].NS - prev[name].NS}
			if d.N == 0 {
				continue
			}
			ns := float64(d.NS) / float64(d.N)
			rate := float64(d.N) / interval.Seconds()
			mean[name] = ns
			all[name] = append(all[name], ns)
			rates[name] = append(rates[name], rate)
			fmt.Printf("  %s %.0f/s %.0f ns", name, rate, ns)
		}
		if f, ok := mean[floor]; ok {
			for name, ns := range mean {
				r := rates[name][len(rates[name])-1]
				above[name] = append(above[name], r*(ns-f)/1e9*100)
			}
		}
		fmt.Println()
		prev = cur
	}
	fmt.Printf("medians of %d intervals of %v:\n", n, interval)
	fmt.Printf("  %-16s %12s %10s %14s\n", "events of", "callbacks/s", "ns each", "% CPU > floor")
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pct := "-"
		if len(above[name]) > 0 {
			pct = fmt.Sprintf("%.3f", median(above[name]))
		}
		fmt.Printf("  %-16s %12.0f %10.0f %14s\n", name, median(rates[name]), median(all[name]), pct)
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
