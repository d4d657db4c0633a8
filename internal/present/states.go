package present

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// StateRow is one function's or one thread's time in a profile, split by
// state: the time it was itself where the time went (a function at the
// leaf of the stack; a thread's own time), and, for a function, its total
// wall time with it anywhere on the stack.
type StateRow struct {
	Name  string
	ID    int // the process's or thread's id, in those views
	Self  [profile.NumStates]int64
	Total int64 // a function's cum wall time; a thread's wall time
	// Cum is a function's total time by state (a thread's: its Self).
	Cum [profile.NumStates]int64
}

// Cumulative returns the row with its total time by state in place of its
// self time: for a function, the time with it anywhere on the stack.
func (r StateRow) Cumulative() StateRow {
	r.Self = r.Cum
	return r
}

// Wall is the row's self time in every state.
func (r StateRow) Wall() int64 {
	var w int64
	for _, v := range r.Self {
		w += v
	}
	return w
}

// Blocked is the row's self time blocked (sleeping, disk, other).
func (r StateRow) Blocked() int64 {
	return r.Self[profile.Sleeping] + r.Self[profile.Disk] + r.Self[profile.Other]
}

// StateTable is the rows of a view of a profile and the total they are
// shares of.
type StateTable struct {
	Rows []StateRow
	// Wall is the time all rows share: the samples' total for functions,
	// the threads' accounted time for threads.
	Wall int64
}

// FunctionStates is the table of functions of p: each leaf function's self
// time by state, and its total (cum) wall time, counted once per sample
// however deep it recurses. Functions are named as in the other views.
func FunctionStates(p *profile.Profile) StateTable {
	rows := map[string]*StateRow{}
	row := func(name string) *StateRow {
		r := rows[name]
		if r == nil {
			r = &StateRow{Name: name}
			rows[name] = r
		}
		return r
	}
	var t StateTable
	for _, s := range p.Samples {
		if len(s.Stack) == 0 || s.State >= profile.NumStates {
			continue
		}
		t.Wall += s.Value
		seen := map[string]bool{}
		for i, l := range s.Stack {
			for j, f := range l.Frames {
				if i == 0 && j == 0 {
					row(f.Function).Self[s.State] += s.Value
				}
				if !seen[f.Function] {
					seen[f.Function] = true
					r := row(f.Function)
					r.Total += s.Value
					r.Cum[s.State] += s.Value
				}
			}
		}
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, *r)
	}
	return t
}

// ThreadStates is the table of threads of p, from their exact totals,
// named "name (tid)".
func ThreadStates(p *profile.Profile) StateTable {
	var t StateTable
	for _, th := range p.Threads {
		r := StateRow{Name: fmt.Sprintf("%s (%d)", th.Name, th.TID), ID: th.TID}
		for i, d := range th.Time {
			r.Self[i] = int64(d)
		}
		r.Total = r.Wall()
		r.Cum = r.Self
		t.Wall += r.Total
		t.Rows = append(t.Rows, r)
	}
	return t
}

// StateColumns are the columns of a state table, in order, and the keys
// it sorts by.
var StateColumns = []string{"wall", "cpu", "runq", "sleep", "disk", "total"}

// value is a row's value in column c (one of StateColumns).
func (r StateRow) value(c string) int64 {
	switch c {
	case "cpu":
		return r.Self[profile.OnCPU]
	case "runq":
		return r.Self[profile.Runnable]
	case "sleep":
		return r.Self[profile.Sleeping] + r.Self[profile.Other]
	case "disk":
		return r.Self[profile.Disk]
	case "total":
		return r.Total
	}
	return r.Wall()
}

// Cumulative makes every row's state columns its total time by state.
func (t *StateTable) Cumulative() {
	for i := range t.Rows {
		t.Rows[i] = t.Rows[i].Cumulative()
	}
}

// Sort orders the rows by column c, largest first, then by name, and keeps
// those with time in that column; with match set, only those whose name it
// matches.
func (t *StateTable) Sort(c string, match *regexp.Regexp) {
	rows := t.Rows[:0]
	for _, r := range t.Rows {
		if r.value(c) > 0 && (match == nil || match.MatchString(r.Name)) {
			rows = append(rows, r)
		}
	}
	t.Rows = rows
	sort.SliceStable(t.Rows, func(i, j int) bool {
		a, b := t.Rows[i].value(c), t.Rows[j].value(c)
		if a != b {
			return a > b
		}
		return t.Rows[i].Name < t.Rows[j].Name
	})
}

// StateHeader is the header line of WriteStateRows.
func StateHeader(width int) string {
	return clip(fmt.Sprintf("%6s %6s %6s %6s %6s %6s  %s", "WALL%", "CPU%", "RUNQ%", "SLEEP%", "DISK%", "TOTAL%", "NAME"), width)
}

// StateLine formats one row as shares of wall, in width columns (0: no
// limit). SLEEP% holds sleeping and other blocked time; WALL% is the sum
// of CPU%, RUNQ%, SLEEP% and DISK%.
func StateLine(r StateRow, wall int64, width int) string {
	pct := func(v int64) string {
		if wall <= 0 || v == 0 {
			return "     -"
		}
		return fmt.Sprintf("%6.1f", 100*float64(v)/float64(wall))
	}
	return clip(fmt.Sprintf("%s %s %s %s %s %s  %s", pct(r.Wall()), pct(r.value("cpu")), pct(r.value("runq")),
		pct(r.value("sleep")), pct(r.value("disk")), pct(r.Total), r.Name), width)
}

// WriteStateRows writes the header and the first n rows of t (all if n is
// not positive), each line cut at width columns (0: no limit).
func WriteStateRows(w io.Writer, t StateTable, n, width int) error {
	if _, err := fmt.Fprintln(w, StateHeader(width)); err != nil {
		return err
	}
	for i, r := range t.Rows {
		if n > 0 && i >= n {
			break
		}
		if _, err := fmt.Fprintln(w, StateLine(r, t.Wall, width)); err != nil {
			return err
		}
	}
	return nil
}

// clip cuts s to width runes (0: no limit).
func clip(s string, width int) string {
	if width <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	if width <= 1 {
		return string(r[:width])
	}
	return string(r[:width-1]) + "…"
}

// StateSummary is one line with the shares of wall time by state:
// "on-CPU 12.0% · runnable 3.1% · sleeping 80.2% · disk 0.0% · other 4.7%".
func StateSummary(totals [profile.NumStates]int64) string {
	var wall int64
	for _, v := range totals {
		wall += v
	}
	names := []string{"on-CPU", "runnable", "sleeping", "disk", "other"}
	parts := make([]string, 0, len(names))
	for i, n := range names {
		share := 0.0
		if wall > 0 {
			share = 100 * float64(totals[i]) / float64(wall)
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", n, share))
	}
	return strings.Join(parts, " · ")
}
