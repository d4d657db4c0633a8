package present

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// DiffFormat identifies the JSON diff report's schema. Fields are only
// added within a version.
const DiffFormat = "wallprof.diff/v1"

// DiffOptions configures WriteDiff.
type DiffOptions struct {
	Top    int    // functions listed per table; 0 means DefaultTop, negative all
	JSON   bool   // write the DiffReport as JSON
	Weight Weight // the time compared per function (states are always all compared)
	// BeforeName and AfterName name the two profiles in the report
	// (file names, say); "" leaves them out.
	BeforeName, AfterName string
}

// DurationError says that a profile's recording duration is unknown (zero),
// so its time per second of recording cannot be computed.
type DurationError struct {
	Which string // "before" or "after"
	Name  string // DiffOptions.BeforeName or AfterName
}

func (e *DurationError) Error() string {
	name := e.Which + " profile"
	if e.Name != "" {
		name = e.Name
	}
	return fmt.Sprintf("%s has no recording duration, so its time per second of recording is unknown", name)
}

// DiffReport compares two profiles normalised to time per second of
// recording: every time is nanoseconds per second (ns/s), rounded.
type DiffReport struct {
	Format string   `json:"format"` // DiffFormat
	Weight string   `json:"weight"` // weight of the function tables
	Before DiffSide `json:"before"`
	After  DiffSide `json:"after"`
	// States are "wall" then each state, with the time sampled in it.
	States []DiffRow `json:"states"`
	// Flat compares each function's time at the leaf, Cum its time anywhere
	// on the stack. Rows are sorted by |delta|, largest first, then name.
	Flat DiffTable `json:"flat"`
	Cum  DiffTable `json:"cum"`
}

// DiffSide describes one of the compared profiles.
type DiffSide struct {
	Name       string `json:"name,omitempty"`
	Command    string `json:"command"`
	DurationNS int64  `json:"duration_ns"`
	WallNS     int64  `json:"wall_ns"` // sampled wall time, not normalised
}

// DiffTable is one ranking of functions by change.
type DiffTable struct {
	Functions int       `json:"functions"` // functions with time in either profile
	Grew      int       `json:"grew"`      // of those, how many grew
	Shrank    int       `json:"shrank"`    // and how many shrank
	Rows      []DiffRow `json:"rows"`
}

// DiffRow is one function or state. DeltaPercent is the change relative to
// before; null when before is 0 (the function is new).
type DiffRow struct {
	Name         string   `json:"name"`
	BeforeNSPerS int64    `json:"before_ns_per_s"`
	AfterNSPerS  int64    `json:"after_ns_per_s"`
	DeltaNSPerS  int64    `json:"delta_ns_per_s"`
	DeltaPercent *float64 `json:"delta_percent"`
}

// NewDiff compares before and after per second of recording. It fails with
// a *DurationError when either has no duration.
func NewDiff(before, after *profile.Profile, opt DiffOptions) (*DiffReport, error) {
	if before.Duration <= 0 {
		return nil, &DurationError{Which: "before", Name: opt.BeforeName}
	}
	if after.Duration <= 0 {
		return nil, &DurationError{Which: "after", Name: opt.AfterName}
	}
	top := opt.Top
	if top == 0 {
		top = DefaultTop
	}
	r := &DiffReport{
		Format: DiffFormat,
		Weight: opt.Weight.String(),
		Before: diffSide(before, opt.BeforeName),
		After:  diffSide(after, opt.AfterName),
	}
	bs, as := before.TotalByState(), after.TotalByState()
	var bw, aw int64
	for s := range bs {
		bw, aw = bw+bs[s], aw+as[s]
	}
	r.States = append(r.States, diffRow("wall", bw, aw, before.Duration, after.Duration))
	for s := profile.State(0); s < profile.NumStates; s++ {
		r.States = append(r.States, diffRow(s.String(), bs[s], as[s], before.Duration, after.Duration))
	}
	bflat, bcum, _ := funcTimes(before, opt.Weight)
	aflat, acum, _ := funcTimes(after, opt.Weight)
	r.Flat = diffTable(bflat, aflat, before.Duration, after.Duration, top)
	r.Cum = diffTable(bcum, acum, before.Duration, after.Duration, top)
	return r, nil
}

func diffSide(p *profile.Profile, name string) DiffSide {
	var wall int64
	for _, s := range p.Samples {
		wall += s.Value
	}
	return DiffSide{Name: name, Command: p.Command, DurationNS: int64(p.Duration), WallNS: wall}
}

// perSecond is ns of time over a recording of length d, per second.
func perSecond(ns int64, d time.Duration) int64 {
	return int64(math.Round(float64(ns) * 1e9 / float64(d)))
}

func diffRow(name string, before, after int64, bd, ad time.Duration) DiffRow {
	r := DiffRow{Name: name, BeforeNSPerS: perSecond(before, bd), AfterNSPerS: perSecond(after, ad)}
	r.DeltaNSPerS = r.AfterNSPerS - r.BeforeNSPerS
	if r.BeforeNSPerS != 0 {
		p := pct(r.DeltaNSPerS, r.BeforeNSPerS)
		r.DeltaPercent = &p
	}
	return r
}

// diffTable ranks the functions with time in either b or a by the change
// of their time per second.
func diffTable(b, a map[string]int64, bd, ad time.Duration, top int) DiffTable {
	names := map[string]bool{}
	for n := range b {
		names[n] = true
	}
	for n := range a {
		names[n] = true
	}
	t := DiffTable{Functions: len(names)}
	rows := make([]DiffRow, 0, len(names))
	for n := range names {
		row := diffRow(n, b[n], a[n], bd, ad)
		switch {
		case row.DeltaNSPerS > 0:
			t.Grew++
		case row.DeltaNSPerS < 0:
			t.Shrank++
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		x, y := abs64(rows[i].DeltaNSPerS), abs64(rows[j].DeltaNSPerS)
		if x != y {
			return x > y
		}
		if rows[i].AfterNSPerS != rows[j].AfterNSPerS {
			return rows[i].AfterNSPerS > rows[j].AfterNSPerS
		}
		return rows[i].Name < rows[j].Name
	})
	if top >= 0 && len(rows) > top {
		rows = rows[:top]
	}
	t.Rows = rows
	return t
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// WriteDiff writes the comparison of before and after (see DiffReport) as
// text, or as JSON with opt.JSON.
func WriteDiff(w io.Writer, before, after *profile.Profile, opt DiffOptions) error {
	r, err := NewDiff(before, after, opt)
	if err != nil {
		return err
	}
	if opt.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r)
	}
	bw := bufio.NewWriter(w)
	kv := &table{}
	for _, s := range []struct {
		label string
		side  DiffSide
	}{{"before:", r.Before}, {"after:", r.After}} {
		desc := fmt.Sprintf("%s of wall time sampled over %s", fmtDur(s.side.WallNS), fmtDur(s.side.DurationNS))
		if s.side.Command != "" {
			desc += ", " + oneLine(s.side.Command)
		}
		if s.side.Name != "" {
			desc = s.side.Name + ": " + desc
		}
		kv.add(s.label, desc)
	}
	kv.add("times:", "per second of recording; delta = after - before")
	kv.write(bw)

	fmt.Fprintln(bw)
	st := diffRowTable("state")
	for _, row := range r.States {
		addDiffRow(st, stateTitle(row.Name), row)
	}
	st.write(bw)
	for _, t := range []struct {
		what string
		tab  DiffTable
	}{{"self (flat)", r.Flat}, {"total (cum)", r.Cum}} {
		fmt.Fprintln(bw)
		fmt.Fprintf(bw, "functions by change in %s %s time: %d of %d functions; %d grew, %d shrank\n",
			t.what, weightTitles[r.Weight], len(t.tab.Rows), t.tab.Functions, t.tab.Grew, t.tab.Shrank)
		ft := diffRowTable("function")
		for _, row := range t.tab.Rows {
			addDiffRow(ft, oneLine(row.Name), row)
		}
		ft.write(bw)
	}
	return bw.Flush()
}

func diffRowTable(name string) *table {
	return &table{
		header: []string{"before/s", "after/s", "delta/s", "delta%", name},
		right:  []bool{true, true, true, true, false},
	}
}

func addDiffRow(t *table, name string, r DiffRow) {
	delta := fmtDur(r.DeltaNSPerS)
	if r.DeltaNSPerS > 0 {
		delta = "+" + delta
	}
	dp := "new"
	switch {
	case r.DeltaPercent != nil && *r.DeltaPercent > 0:
		dp = "+" + fmtPct(*r.DeltaPercent)
	case r.DeltaPercent != nil:
		dp = fmtPct(*r.DeltaPercent)
	case r.AfterNSPerS == 0:
		dp = "-"
	}
	t.add(fmtDur(r.BeforeNSPerS), fmtDur(r.AfterNSPerS), delta, dp, name)
}
