package present

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// GoroutinesFormat names the JSON schema of a GoroutineReport.
const GoroutinesFormat = "wallprof.goroutines/v1"

// GoroutineReport is a Go program's goroutine time by group (creation
// site): how many goroutines, and the share of their time running,
// runnable and waiting, waiting broken down by the runtime's reason.
type GoroutineReport struct {
	Format    string          `json:"format"`
	Command   string          `json:"command"`
	GoVersion string          `json:"go_version"`
	Info      *profile.GoInfo `json:"-"`
	Snapshots int             `json:"snapshots"`
	Dropped   int             `json:"inconsistent_reads_dropped"`
	// RecordingNs is the recording's duration; CoveredNs the time the
	// snapshots of the goroutine table charged (waiting and runnable time
	// exist only there), Coverage its share of the recording (after
	// BeforeNs), and LongestGapNs the longest time the table went unread.
	// The last three are absent for profiles written before wallprof
	// measured them. BeforeNs is how long a launched command's recording
	// ran before the command exec'ed: no goroutines then, left out of the
	// coverage.
	BeforeNs     int64    `json:"before_ns,omitempty"`
	RecordingNs  int64    `json:"recording_ns"`
	CoveredNs    int64    `json:"covered_ns,omitempty"`
	Coverage     *float64 `json:"coverage_percent,omitempty"`
	LongestGapNs int64    `json:"longest_gap_ns,omitempty"`
	// Warnings say why the view may mislead (a low coverage).
	Warnings []string         `json:"warnings,omitempty"`
	TotalNs  int64            `json:"total_ns"` // goroutine time of the groups shown
	Focus    string           `json:"focus,omitempty"`
	Groups   []GoroutineGroup `json:"groups"`
}

// GoroutineGroup is one creation site's goroutines.
type GoroutineGroup struct {
	Group      string  `json:"group"` // "created by F", or the main goroutine's function
	CreatedBy  string  `json:"created_by,omitempty"`
	Func       string  `json:"func,omitempty"`
	Goroutines int     `json:"goroutines"` // distinct goroutines seen parked or runnable
	TimeNs     int64   `json:"time_ns"`
	Share      float64 `json:"share_percent"` // of TotalNs
	// Running, Runnable and Waiting are shares of the group's time.
	Running  float64       `json:"running_percent"`
	Runnable float64       `json:"runnable_percent"`
	Waiting  float64       `json:"waiting_percent"`
	Reasons  []ReasonShare `json:"waiting_by_reason"`
}

// ReasonShare is the share of a group's time waiting for one reason.
type ReasonShare struct {
	Reason  string  `json:"reason"`
	TimeNs  int64   `json:"time_ns"`
	Percent float64 `json:"percent"` // of the group's time
}

// ErrNoGoroutines says a profile has no goroutine view.
var ErrNoGoroutines = fmt.Errorf("the profile has no goroutine view: it was not recorded from a Go program, or with --goroutines off")

// MatchGoroutine reports whether a goroutine sample belongs to a group
// that focus selects: it matches the group (its creator) or the
// goroutine's own function.
func MatchGoroutine(g *profile.GoSample, focus *regexp.Regexp) bool {
	return focus == nil || focus.MatchString(profile.GroupKey(g)) || focus.MatchString(g.CreatedBy) || focus.MatchString(g.Func)
}

// FocusGoroutines returns the goroutine samples of the groups focus selects.
func FocusGoroutines(gs []*profile.GoSample, focus *regexp.Regexp) []*profile.GoSample {
	if focus == nil {
		return gs
	}
	var out []*profile.GoSample
	for _, g := range gs {
		if MatchGoroutine(g, focus) {
			out = append(out, g)
		}
	}
	return out
}

// NewGoroutineReport groups p's goroutine view.
func NewGoroutineReport(p *profile.Profile, focus *regexp.Regexp) (*GoroutineReport, error) {
	if len(p.Goroutines) == 0 {
		return nil, ErrNoGoroutines
	}
	r := &GoroutineReport{Format: GoroutinesFormat, Command: p.Command, Info: p.GoInfo, RecordingNs: int64(p.Duration)}
	if g := p.GoInfo; g != nil {
		r.GoVersion, r.Snapshots, r.Dropped = g.Version, g.Snapshots, g.Dropped
		if c, ok := g.Coverage(p.Duration); ok {
			pc := 100 * c
			r.CoveredNs, r.Coverage, r.LongestGapNs = int64(g.Covered), &pc, int64(g.LongestGap)
			if g.Before > 0 && g.Before < p.Duration {
				r.BeforeNs = int64(g.Before)
			}
		}
	}
	if w := GoCoverageWarning(p); w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	if focus != nil {
		r.Focus = focus.String()
	}
	groups := profile.Groups(FocusGoroutines(p.Goroutines, focus))
	for _, g := range groups {
		r.TotalNs += g.Total
	}
	for _, g := range groups {
		row := GoroutineGroup{Group: g.Key, CreatedBy: g.CreatedBy, Func: g.Func, Goroutines: g.Goroutines, TimeNs: g.Total,
			Share: pct(g.Total, r.TotalNs), Running: pct(g.Time[profile.GRunning], g.Total),
			Runnable: pct(g.Time[profile.GRunnable], g.Total), Waiting: pct(g.Time[profile.GWaiting], g.Total)}
		for reason, ns := range g.Reasons {
			row.Reasons = append(row.Reasons, ReasonShare{Reason: reason, TimeNs: ns, Percent: pct(ns, g.Total)})
		}
		sort.Slice(row.Reasons, func(i, j int) bool {
			if row.Reasons[i].TimeNs != row.Reasons[j].TimeNs {
				return row.Reasons[i].TimeNs > row.Reasons[j].TimeNs
			}
			return row.Reasons[i].Reason < row.Reasons[j].Reason
		})
		r.Groups = append(r.Groups, row)
	}
	return r, nil
}

// WriteGoroutineReport writes r as text, or JSON.
func WriteGoroutineReport(w io.Writer, r *GoroutineReport, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Goroutines of %s", r.Command)
	if r.GoVersion != "" {
		fmt.Fprintf(&b, " (%s)", r.GoVersion)
	}
	b.WriteString("\n")
	if i := r.Info; i != nil {
		covers := ""
		if r.Coverage != nil {
			covers = fmt.Sprintf(", covering %s of the %s recording (%.1f%%; longest gap %s)",
				fmtDur(r.CoveredNs), fmtDur(r.RecordingNs), *r.Coverage, fmtDur(r.LongestGapNs))
			if r.BeforeNs > 0 {
				covers = fmt.Sprintf(", covering %s of the %s since the command started, %s into the recording (%.1f%%; longest gap %s)",
					fmtDur(r.CoveredNs), fmtDur(r.RecordingNs-r.BeforeNs), fmtDur(r.BeforeNs), *r.Coverage, fmtDur(r.LongestGapNs))
			}
		}
		fmt.Fprintf(&b, "goroutine table read %d times, every %s%s; up to %d goroutines; %d inconsistent reads dropped\n",
			i.Snapshots, i.Interval, covers, i.MaxGoroutines, i.Dropped)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	b.WriteString("Goroutine time: each goroutine's own time, summed over the group, so ten goroutines that\n" +
		"sleep for a second are ten seconds of one group. Running time comes from on-CPU samples.\n")
	if r.Focus != "" {
		fmt.Fprintf(&b, "Groups matching %q only.\n", r.Focus)
	}
	b.WriteString("\n")
	t := &table{right: []bool{false, true, true, true, true, true, true, false},
		header: []string{"group", "goroutines", "time", "share", "running", "runnable", "waiting", "waiting by reason"}}
	for _, g := range r.Groups {
		n := "-"
		if g.Goroutines > 0 {
			n = fmt.Sprint(g.Goroutines)
		}
		var reasons []string
		for _, rs := range g.Reasons {
			reasons = append(reasons, fmt.Sprintf("%s %.1f%%", rs.Reason, rs.Percent))
		}
		t.add(g.Group, n, fmtDur(g.TimeNs), fmt.Sprintf("%.1f%%", g.Share), fmt.Sprintf("%.1f%%", g.Running),
			fmt.Sprintf("%.1f%%", g.Runnable), fmt.Sprintf("%.1f%%", g.Waiting), strings.Join(reasons, ", "))
		if g.Func != "" && !strings.HasSuffix(g.Group, g.Func) && g.Group != "main goroutine" {
			t.add("  "+g.Func, "", "", "", "", "", "", "")
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	t.write(w)
	return nil
}

// GoCoverageWarning returns a warning when p's goroutine view is known to
// cover less than profile.MinCoverage of the recording, else "".
func GoCoverageWarning(p *profile.Profile) string {
	g := p.GoInfo
	if !g.LowCoverage(p.Duration) {
		return ""
	}
	c, _ := g.Coverage(p.Duration)
	of := "of the recording"
	if g.Before > 0 {
		of = "of the time since the command started"
	}
	return fmt.Sprintf("the goroutine view covers only %.0f%% %s (%s of %s; the goroutine table was read %d times, "+
		"longest gap %s): waiting and runnable time are missing for the rest of it, running time (from thread samples) may not be, "+
		"so the groups' times and their running/runnable/waiting split are off",
		100*c, of, fmtDur(int64(g.Covered)), fmtDur(int64(g.Span(p.Duration))), g.Snapshots, fmtDur(int64(g.LongestGap)))
}

// GoroutineView returns the goroutine view of p as a profile whose samples
// are goroutine time, for flame graphs and reports: running is on-CPU,
// runnable is runnable, and waiting is sleeping (blocked), with the wait
// reason, goroutine id and creator as labels.
func GoroutineView(p *profile.Profile, focus *regexp.Regexp) *profile.Profile {
	v := &profile.Profile{Start: p.Start, Duration: p.Duration, Period: p.Period, Command: p.Command,
		Mappings: p.Mappings, Locs: p.Locs, GoInfo: p.GoInfo, Notes: p.Notes, Recorder: p.Recorder}
	for _, g := range FocusGoroutines(p.Goroutines, focus) {
		st := profile.Sleeping
		switch g.State {
		case profile.GRunning:
			st = profile.OnCPU
		case profile.GRunnable:
			st = profile.Runnable
		}
		labels := map[string]string{"gstate": g.State.String(), "created_by": g.CreatedBy}
		if g.WaitReason != "" {
			labels["wait_reason"] = g.WaitReason
		}
		v.Samples = append(v.Samples, &profile.Sample{Stack: g.Stack, PID: g.PID, Thread: profile.GroupKey(g), State: st, Value: g.Value, Labels: labels})
	}
	return v
}
