package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/bench"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/present/flame"
)

// The change-point test of the trend charts of 'bench' and 'bench check':
// the defaults of 'bench history'.
const (
	pageCPAlpha      = 0.01
	pagePermutations = 199
)

func addPageFlag(fs *cmdFlags) *string {
	return fs.String("html", "", "also write one self-contained HTML page to `FILE`: trend charts with change points, the comparison, each regression's flame graph")
}

// benchPage is the --html page of a bench command, created before the
// work (a path that cannot be written fails first) and written at its end.
// A nil *benchPage (no --html) writes nothing.
type benchPage struct {
	f *outfile.File
}

// openPage creates the page's file at path; nil when path is "".
func openPage(path string) (*benchPage, error) {
	if path == "" {
		return nil, nil
	}
	f, err := outfile.Create(path)
	if err != nil {
		return nil, err
	}
	return &benchPage{f: f}, nil
}

// abandon removes the unwritten page.
func (p *benchPage) abandon() {
	if p != nil {
		p.f.Abandon()
	}
}

// writeReport writes the page of a comparison: its table, its explained
// regressions with their differential flame graphs, and the stored trends
// of its benchmarks.
func (p *benchPage) writeReport(ctx context.Context, st bench.Store, rep *bench.Report) error {
	if p == nil {
		return nil
	}
	var series []bench.Series
	for _, d := range rep.Deltas {
		series = append(series, d.Series)
	}
	hs, err := trends(ctx, st, series)
	if err != nil {
		return err
	}
	flames := make([]string, len(rep.Explanations))
	for i, ex := range rep.Explanations {
		if flames[i], err = diffFlame(ex); err != nil {
			return err
		}
	}
	title := fmt.Sprintf("wallprof bench %s: %s against %s", rep.Command, commitName(rep.Runs[1]), commitName(rep.Runs[0]))
	return p.write(bench.Page{Title: title, Report: rep, Histories: hs, Flames: flames})
}

// writeRun writes the page of a plain run: the stored trends of its
// benchmarks, this run the last point.
func (p *benchPage) writeRun(ctx context.Context, st bench.Store, run *bench.Run) error {
	if p == nil {
		return nil
	}
	hs, err := trends(ctx, st, bench.SortedSeries(run.Samples()))
	if err != nil {
		return err
	}
	return p.write(bench.Page{Title: "wallprof bench: " + commitName(run.Info()), Report: &bench.Report{Runs: []bench.RunInfo{run.Info()}}, Histories: hs})
}

// writeHistory writes the page of 'bench history NAME': the history of
// each benchmark named so, in every unit stored.
func (p *benchPage) writeHistory(ctx context.Context, st bench.Store, name string, cpAlpha float64, perms int) error {
	if p == nil {
		return nil
	}
	hs, err := bench.LoadHistories(ctx, st, name, "", cpAlpha, perms)
	if err != nil {
		return storeError("", err)
	}
	return p.write(bench.Page{Title: "wallprof bench history " + name, Histories: hs})
}

func (p *benchPage) write(page bench.Page) error {
	if err := bench.WritePage(p.f, page); err != nil {
		return err
	}
	return p.f.Commit()
}

func commitName(r bench.RunInfo) string {
	return bench.Short(r.Commit) + map[bool]string{true: " (with uncommitted changes)"}[r.Dirty]
}

// trends loads the stored history, in every unit, of each benchmark
// (package and name) of series, in the order of series.
func trends(ctx context.Context, st bench.Store, series []bench.Series) ([]bench.History, error) {
	seen := map[[2]string]bool{}
	var out []bench.History
	for _, s := range series {
		k := [2]string{s.Pkg, s.Name}
		if seen[k] {
			continue
		}
		seen[k] = true
		hs, err := bench.LoadHistories(ctx, st, s.Name, "", pageCPAlpha, pagePermutations)
		if err != nil {
			return nil, storeError("", err)
		}
		for _, h := range hs {
			if h.Pkg == s.Pkg && h.Name == s.Name {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

// diffFlame renders the differential flame graph of an explanation's base
// and new CPU profiles, the page 'wallprof diff -o' writes; "" without
// them. Both profiles ran the same number of operations, so their
// durations are made equal: the colours then show the change per
// operation, not per second.
func diffFlame(ex *bench.Explanation) (string, error) {
	if len(ex.Profiles) < 4 { // base CPU, base memory, new CPU, new memory, then maybe the wall profiles
		return "", nil
	}
	before, err := present.ReadProfileFile(ex.Profiles[0])
	if err != nil {
		return "", err
	}
	after, err := present.ReadProfileFile(ex.Profiles[2])
	if err != nil {
		return "", err
	}
	if after.Duration <= 0 {
		after.Duration = time.Second
	}
	before.Duration = after.Duration
	var b strings.Builder
	title := fmt.Sprintf("%s.%s: CPU time of the new version against the base", ex.Pkg, ex.Name)
	if err := flame.WriteDiffHTML(&b, before, after, flame.Options{Title: title, Weight: present.CPU}); err != nil {
		return "", err
	}
	return b.String(), nil
}
