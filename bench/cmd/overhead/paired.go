package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
)

// A wall-time figure on this kind of machine moves by several percent
// from one run to the next, so a slowdown is judged per round: the ratio
// of a configuration's run to its reference's in the same round, then the
// median of those ratios, with a bootstrap interval that says how far that
// median could move with other rounds (bench/README.md, "Noise").

// pairedStat is the median of per-round ratios of a configuration to a
// reference, its bootstrap 95% interval and how many rounds lay above 1.
type pairedStat struct {
	N, Above       int
	Median, Lo, Hi float64
}

// pairRatios returns, for each round (a pooled run's rounds are told apart
// by their Run) in which both ran, f(config)/f(ref).
func pairRatios(rs, ref []result, f func(result) float64) []float64 {
	type key struct{ run, round int }
	byRound := map[key]float64{}
	for _, b := range ref {
		byRound[key{b.Run, b.Round}] = f(b)
	}
	var ratios []float64
	for _, r := range rs {
		if b := byRound[key{r.Run, r.Round}]; b > 0 {
			ratios = append(ratios, f(r)/b)
		}
	}
	return ratios
}

// bootstrapResamples is how many resamples the interval is drawn from; a
// fixed seed makes a report reprint the same figures.
const bootstrapResamples = 4000

func paired(ratios []float64) pairedStat {
	s := pairedStat{N: len(ratios)}
	if s.N == 0 {
		return s
	}
	for _, x := range ratios {
		if x > 1 {
			s.Above++
		}
	}
	s.Median = median(ratios)
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, bootstrapResamples)
	buf := make([]float64, s.N)
	for i := range meds {
		for j := range buf {
			buf[j] = ratios[rng.IntN(s.N)]
		}
		meds[i] = median(buf)
	}
	sort.Float64s(meds)
	s.Lo = meds[int(0.025*bootstrapResamples)]
	s.Hi = meds[int(0.975*bootstrapResamples)-1]
	return s
}

func (s pairedStat) String() string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%% (%+.1f to %+.1f), %d of %d above",
		100*(s.Median-1), 100*(s.Lo-1), 100*(s.Hi-1), s.Above, s.N)
}

// isFloor tells the configurations that are floors: the timers alone, or
// empty programs on wallprof's hooks.
func isFloor(name string) bool {
	return strings.HasPrefix(name, "timer-") || strings.HasPrefix(name, "hook-floor")
}

// printPaired prints, per workload, each configuration's per-round ratio to
// none and to every floor in the run, with intervals.
func printPaired(w io.Writer, workloads []string, configs []config, results []result, markdown bool) {
	var floors []string
	for _, c := range configs {
		if isFloor(c.Name) {
			floors = append(floors, c.Name)
		}
	}
	head := []string{"workload", "config", "wall vs none, per round (95% CI)"}
	for _, f := range floors {
		head = append(head, "vs "+f)
	}
	rows := [][]string{head}
	wall := func(r result) float64 { return sec(r.W.Elapsed) }
	for _, wl := range workloads {
		base := filter(results, wl, "none")
		for _, c := range configs {
			if c.Name == "none" {
				continue
			}
			rs := filter(results, wl, c.Name)
			if len(rs) == 0 {
				continue
			}
			row := []string{wl, c.Name, paired(pairRatios(rs, base, wall)).String()}
			for _, f := range floors {
				if f == c.Name {
					row = append(row, "")
					continue
				}
				row = append(row, paired(pairRatios(rs, filter(results, wl, f), wall)).String())
			}
			rows = append(rows, row)
		}
	}
	if len(rows) > 1 {
		writeTable(w, rows, markdown)
	}
}
