// Command noise measures how steady this machine's CPUs are, to say what a
// wall-time benchmark here can resolve: on each CPU at once, a thread
// pinned there times the same loop (about 2 ms) every 100 ms, and noise
// prints, per CPU, the spread of those times (at 100 ms, and of their
// means over 2-s windows, the length of a benchmark round) and how much
// the CPUs' times move together (their correlation at the same instants).
//
//	go run ./bench/cmd/noise -d 30s
//
// A spread of s% between 2-s windows gives the ratio of two rounds a
// spread of about s·√2%, and the median of n paired ratios an error of
// about 1.25·s·√2/√n%: the least difference n rounds can tell apart.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	d := flag.Duration("d", 30*time.Second, "how long to measure")
	every := flag.Duration("every", 100*time.Millisecond, "interval between two timed loops")
	iters := flag.Int("iters", 2_000_000, "iterations of the timed loop")
	flag.Parse()
	if flag.NArg() > 0 || *d < 10**every || *iters <= 0 {
		fmt.Fprintln(os.Stderr, "usage: noise [-d 30s] [-every 100ms] [-iters 2000000]")
		os.Exit(2)
	}
	n := runtime.NumCPU()
	times := make([][]float64, n) // ns of each timed loop, by CPU
	start := time.Now().Add(50 * time.Millisecond)
	var wg sync.WaitGroup
	for cpu := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				fmt.Fprintf(os.Stderr, "noise: cannot pin a thread to CPU %d: %v\n", cpu, err)
				os.Exit(1)
			}
			for t := start; t.Before(start.Add(*d)); t = t.Add(*every) {
				time.Sleep(time.Until(t))
				t0 := time.Now()
				spin(*iters)
				times[cpu] = append(times[cpu], float64(time.Since(t0)))
			}
		}()
	}
	wg.Wait()
	per := int(2 * time.Second / *every)
	fmt.Printf("%d CPUs, a %d-iteration loop timed every %v for %v\n", n, *iters, *every, *d)
	fmt.Printf("%4s %10s %14s %14s %16s\n", "CPU", "median", "sd at "+every.String(), "sd of 2-s means", "9-round median ±")
	for cpu, ts := range times {
		m := means(ts, per)
		s2 := sdLog(m)
		fmt.Printf("%4d %10s %13.1f%% %13.1f%% %15.1f%%\n", cpu, time.Duration(median(ts)).Round(time.Microsecond),
			100*sdLog(ts), 100*s2, 100*1.25*s2*math.Sqrt2/3)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			fmt.Printf("correlation of CPU %d's and CPU %d's times at the same instants: %+.2f\n", a, b, corr(times[a], times[b]))
		}
	}
}

//go:noinline
func spin(n int) uint64 {
	var x uint64
	for i := range n {
		x += uint64(i) * uint64(i) >> 3
	}
	return x
}

func means(ts []float64, per int) []float64 {
	var out []float64
	for i := 0; i+per <= len(ts); i += per {
		s := 0.0
		for _, t := range ts[i : i+per] {
			s += t
		}
		out = append(out, s/float64(per))
	}
	return out
}

// sdLog is the standard deviation of the logarithms: a relative spread.
func sdLog(v []float64) float64 {
	if len(v) < 2 {
		return math.NaN()
	}
	var s, ss float64
	for _, x := range v {
		l := math.Log(x)
		s += l
		ss += l * l
	}
	k := float64(len(v))
	return math.Sqrt(max(0, ss/k-(s/k)*(s/k)))
}

func median(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

func corr(a, b []float64) float64 {
	n := min(len(a), len(b))
	if n < 3 {
		return math.NaN()
	}
	var ma, mb float64
	for i := range n {
		ma += math.Log(a[i])
		mb += math.Log(b[i])
	}
	ma /= float64(n)
	mb /= float64(n)
	var sab, saa, sbb float64
	for i := range n {
		x, y := math.Log(a[i])-ma, math.Log(b[i])-mb
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	return sab / math.Sqrt(saa*sbb)
}
