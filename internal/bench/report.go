package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/perf/benchunit"
)

// Format names the JSON schema written by WriteJSON.
const Format = "wallprof.bench/v1"

// RunInfo describes a stored run in reports.
type RunInfo struct {
	ID        int64     `json:"id"`
	Commit    string    `json:"commit"`
	Dirty     bool      `json:"dirty"`
	Time      time.Time `json:"time"`
	Machine   string    `json:"machine"`
	Toolchain string    `json:"toolchain"`
	Label     string    `json:"label"`
	Results   int       `json:"results"`
	// Incomplete: the run was interrupted and holds only its complete rounds.
	Incomplete bool `json:"incomplete"`
}

// Info summarises r.
func (r *Run) Info() RunInfo {
	return RunInfo{r.ID, r.Commit, r.Dirty, r.Time.UTC(), r.Machine, r.Toolchain, r.Label, len(r.Results), r.Incomplete}
}

// Point is one commit of a benchmark's history.
type Point struct {
	Commit      string    `json:"commit"`
	Dirty       bool      `json:"dirty"`
	Time        time.Time `json:"time"`
	Summary     Summary   `json:"summary"`
	ChangePoint bool      `json:"change_point"` // the distribution changed at this commit
	// Incomplete: the samples come from interrupted runs. Such a point is
	// shown apart from the commit's complete runs and left out of the
	// change-point search.
	Incomplete bool `json:"incomplete"`
}

// History is the series of one benchmark across commits.
type History struct {
	Series
	Points []Point `json:"points"`
}

// Report is the JSON document of 'wallprof bench': the runs it ran or
// read, and, depending on the command, their comparison, the explanation
// of its regressions, or histories.
type Report struct {
	Format       string         `json:"format"`
	Command      string         `json:"command"` // run, import, compare, check, history
	Runs         []RunInfo      `json:"runs"`
	Alpha        float64        `json:"alpha,omitempty"`
	Threshold    float64        `json:"threshold,omitempty"`
	Deltas       []Delta        `json:"deltas"`
	Regressions  int            `json:"regressions"`
	Explanations []*Explanation `json:"explanations"`
	Histories    []History      `json:"histories"`
}

// WriteJSON writes rep, with its Format set.
func WriteJSON(w io.Writer, rep *Report) error {
	rep.Format = Format
	for i := range rep.Deltas { // NaN is not JSON
		if math.IsNaN(rep.Deltas[i].Change) {
			rep.Deltas[i].Change = 0
		}
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(rep)
}

// FormatValue formats v of unit with benchstat's scaling (1.234µ, 5.678Ki).
func FormatValue(v float64, unit string) string {
	return benchunit.Scale(v, benchunit.ClassOf(unit))
}

// FormatCI formats the confidence interval of s as benchstat does: the
// larger distance from the center to a bound, in percent of the center;
// "∞" when the sample is too small for an interval.
func FormatCI(s Summary) string { return ci(s) }

func ci(s Summary) string {
	if s.Center == 0 && s.Lo == 0 && s.Hi == 0 {
		return "0%"
	}
	if s.Center == 0 || math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		return "∞"
	}
	pct := math.Max(s.Center-s.Lo, s.Hi-s.Center) / math.Abs(s.Center) * 100
	return fmt.Sprintf("%.0f%%", pct)
}

// WriteTable writes the deltas as a benchstat-like table.
func WriteTable(w io.Writer, deltas []Delta) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\tunit\tbase\t±\tnew\t±\tchange\tp\t")
	for _, d := range deltas {
		mark := ""
		if d.Regression {
			mark = "  REGRESSION"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\tp=%.3f n=%d+%d\t%s\n", d.Pkg+"."+d.Name, d.Unit,
			FormatValue(d.Base.Center, d.Unit), ci(d.Base), FormatValue(d.New.Center, d.Unit), ci(d.New),
			d.FormatChange(), d.P, d.Base.N, d.New.N, mark)
	}
	return tw.Flush()
}

// WriteExplanation writes the functions that grew most.
func WriteExplanation(w io.Writer, ex *Explanation) {
	fmt.Fprintf(w, "%s.%s: functions whose cost per operation grew most\n", ex.Pkg, ex.Name)
	for _, part := range []struct {
		title string
		g     []Growth
		unit  string
		skip  string
	}{{"CPU time", ex.CPU, "sec/op", ""}, {"allocated bytes", ex.Alloc, "B/op", ""}, {"off-CPU time", ex.OffCPU, "sec/op", ex.OffCPUSkipped}} {
		fmt.Fprintf(w, "  %s:\n", part.title)
		if part.skip != "" {
			fmt.Fprintf(w, "    (%s)\n", part.skip)
			continue
		}
		if len(part.g) == 0 {
			fmt.Fprintln(w, "    (no function grew)")
		}
		for _, g := range part.g {
			d, b, n := formatGrowth(g, part.unit)
			fmt.Fprintf(w, "    %+10s  %10s -> %-10s  %s\n", d, b, n, g.Function)
		}
	}
	fmt.Fprintf(w, "  profiles: %s\n", strings.Join(ex.Profiles, " "))
	if len(ex.Profiles) >= 4 {
		fmt.Fprintf(w, "  diff flame graph: wallprof diff %s %s\n", ex.Profiles[0], ex.Profiles[2])
	}
	if len(ex.Profiles) == 6 {
		fmt.Fprintf(w, "  wall-clock diff: wallprof diff %s %s\n", ex.Profiles[4], ex.Profiles[5])
	}
}

// formatGrowth formats a growth's change, base and new value in unit
// (CPU growths are in nanoseconds, shown as sec/op).
func formatGrowth(g Growth, unit string) (delta, base, new string) {
	scale := 1.0
	if unit == "sec/op" {
		scale = 1e-9
	}
	return FormatValue((g.New-g.Base)*scale, unit), FormatValue(g.Base*scale, unit), FormatValue(g.New*scale, unit)
}

// WriteMarkdown writes a Markdown summary of a check.
func WriteMarkdown(w io.Writer, base, head RunInfo, deltas []Delta, exs []*Explanation, opt Options) error {
	opt = opt.withDefaults()
	n := 0
	for _, d := range deltas {
		if d.Regression {
			n++
		}
	}
	fmt.Fprintf(w, "## wallprof bench check\n\nBase `%s`, new `%s`%s: ", short(base.Commit), short(head.Commit), dirtyNote(head.Dirty))
	if n == 0 {
		fmt.Fprintf(w, "no significant regression above %.0f%% (α = %g).\n\n", opt.Threshold*100, opt.Alpha)
	} else {
		fmt.Fprintf(w, "**%d significant regression(s)** above %.0f%% (α = %g).\n\n", n, opt.Threshold*100, opt.Alpha)
	}
	fmt.Fprintln(w, "| benchmark | unit | base | new | change | p |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|")
	for _, d := range deltas {
		ch := d.FormatChange()
		if d.Regression {
			ch = "**" + ch + "** :x:"
		}
		fmt.Fprintf(w, "| `%s.%s` | %s | %s ± %s | %s ± %s | %s | %.3f |\n", d.Pkg, d.Name, d.Unit,
			FormatValue(d.Base.Center, d.Unit), ci(d.Base), FormatValue(d.New.Center, d.Unit), ci(d.New), ch, d.P)
	}
	for _, ex := range exs {
		fmt.Fprintf(w, "\n<details><summary><code>%s.%s</code>: what grew</summary>\n\n```\n", ex.Pkg, ex.Name)
		WriteExplanation(w, ex)
		fmt.Fprintln(w, "```\n</details>")
	}
	return nil
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	if c == "" {
		return "(unknown)"
	}
	return c
}

func dirtyNote(d bool) string {
	if d {
		return " (with uncommitted changes)"
	}
	return ""
}

// Short abbreviates a commit hash for display.
func Short(c string) string { return short(c) }

// Histories returns, for every series whose name is name (with or without
// its -GOMAXPROCS suffix) and whose unit is unit (every unit when ""), the
// median of each commit's samples in the order the commits were first
// run, with the change points found by ChangePoints. The samples of
// interrupted runs (Run.Incomplete) make points of their own, marked
// Incomplete, that the change-point search leaves out.
func Histories(runs []*Run, name, unit string, alpha float64, perms int) []History {
	type acc struct {
		pt  Point
		val []float64
	}
	bySeries := map[Series][]*acc{}
	idx := map[Series]map[string]*acc{}
	for _, r := range runs {
		key := r.Commit
		if r.Dirty {
			key += "+dirty"
		}
		if r.Incomplete {
			key += "+incomplete"
		}
		for s, vals := range r.Samples() {
			if s.Name != name && procsSuffix.ReplaceAllString(s.Name, "") != name && "Benchmark"+procsSuffix.ReplaceAllString(s.Name, "") != name {
				continue
			}
			if unit != "" && s.Unit != unit {
				continue
			}
			if idx[s] == nil {
				idx[s] = map[string]*acc{}
			}
			a := idx[s][key]
			if a == nil {
				a = &acc{pt: Point{Commit: r.Commit, Dirty: r.Dirty, Time: r.Time.UTC(), Incomplete: r.Incomplete}}
				idx[s][key] = a
				bySeries[s] = append(bySeries[s], a)
			}
			a.val = append(a.val, vals...)
		}
	}
	var out []History
	all := map[Series][]float64{}
	for s := range bySeries {
		all[s] = nil
	}
	for _, s := range SortedSeries(all) {
		h := History{Series: s}
		var medians []float64
		var at []int // the index in h.Points of each of medians
		for i, a := range bySeries[s] {
			a.pt.Summary = summarize(a.val)
			h.Points = append(h.Points, a.pt)
			if !a.pt.Incomplete {
				medians = append(medians, a.pt.Summary.Center)
				at = append(at, i)
			}
		}
		for _, i := range ChangePoints(medians, alpha, perms, 3) {
			h.Points[at[i]].ChangePoint = true
		}
		out = append(out, h)
	}
	return out
}

// WriteHistory writes one history as a table with a bar per commit.
func WriteHistory(w io.Writer, h History) {
	fmt.Fprintf(w, "%s\n", h.Series)
	hi := 0.0
	for _, p := range h.Points {
		hi = math.Max(hi, p.Summary.Center)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, p := range h.Points {
		change := ""
		if i > 0 && h.Points[i-1].Summary.Center != 0 {
			change = formatPct(p.Summary.Center/h.Points[i-1].Summary.Center - 1)
		}
		mark := ""
		if p.ChangePoint {
			mark = "<- change point"
		}
		if p.Incomplete {
			mark = "(incomplete run: interrupted)"
		}
		bar := ""
		if hi > 0 {
			bar = strings.Repeat("█", int(math.Round(p.Summary.Center/hi*30)))
		}
		fmt.Fprintf(w, "")
		fmt.Fprintf(tw, "  %s%s\t%s\t%s ± %s\tn=%d\t%s\t%s %s\n", short(p.Commit), map[bool]string{true: "+", false: ""}[p.Dirty],
			p.Time.Format("2006-01-02 15:04"), FormatValue(p.Summary.Center, h.Unit), ci(p.Summary), p.Summary.N, change, bar, mark)
	}
	tw.Flush()
}

// LoadHistories returns the Histories of name in unit stored in st,
// reading only their samples ('wallprof bench history').
func LoadHistories(ctx context.Context, st Store, name, unit string, alpha float64, perms int) ([]History, error) {
	runs, err := st.RunsOf(ctx, name, unit)
	if err != nil {
		return nil, err
	}
	return Histories(runs, name, unit, alpha, perms), nil
}
