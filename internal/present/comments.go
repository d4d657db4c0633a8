package present

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// The wallprof comment format, version 1.
//
// pprof has no fields for what wallprof measures besides stacks, so
// WritePprof stores it in the profile's comments, one record per comment,
// each a single line:
//
//	wallprof:v1 <kind> <fields>
//
// Fields are key=value pairs separated by single spaces. A value is either a
// bare token (no spaces, quotes or '=') or a Go double-quoted string
// (strconv.Quote). Durations are integer nanoseconds. The kinds are:
//
//	wallprof:v1 profile states=on-cpu,runnable,sleeping,disk,other
//	wallprof:v1 command "<command line>"
//	wallprof:v1 program "<path the program was run as>"
//	wallprof:v1 thread pid=<n> tid=<n> name="<comm>" start=<ns> end=<ns> exited=<bool> on-cpu=<ns> runnable=<ns> sleeping=<ns> disk=<ns> other=<ns> samples=<n>
//	wallprof:v1 lost cause=<cause> n=<count>
//	wallprof:v1 cost profiler_cpu=<ns> bpf_run=<ns> bpf_runs=<n> target_cpu=<ns> bpf_stats_permille=<share of the recording the BPF statistics were on, 1000 = exact>
//	wallprof:v1 kernel mapping=<mapping id>
//	wallprof:v1 recorder accounting=<resumption|switch-time> kernel=<uname -r>
//	wallprof:v1 goroutines version=<go version> snapshots=<n> interval=<ns> max=<n> dropped=<n> retried=<n> failed=<n> covered=<ns> longest_gap=<ns>
//	wallprof:v1 note "<text>"
//
// In "goroutines", covered (the time the snapshots charged) and
// longest_gap were added later: files without them have an unknown
// coverage.
//
// Every file has the "profile" record, first: it marks the file as written
// by wallprof and lists the state names used in the samples' state labels.
// command, program and note take one quoted string instead of fields;
// program is the path the program was run as (Profile.Program), which names
// pprof's main mapping. "kernel" marks a kernel mapping whose file name does
// not start with "[kernel.kallsyms]" (those are recognised by name). Readers ignore unknown kinds and unknown
// keys, so fields can be added within v1; an incompatible change bumps the
// version, and a reader refuses versions it does not know.
//
// Comments without the "wallprof:" prefix are for people (`go tool pprof
// -comments`) and are regenerated on every write. The records themselves
// are stored as unreferenced functions (see recordFunction).
const (
	commentPrefix  = "wallprof:"
	commentVersion = "v1"
	commentLead    = commentPrefix + commentVersion + " "
)

// recordFunction marks the pprof functions that carry wallprof records
// (their SystemName): no location refers to them, so pprof's reports never
// show them, while the comments, which pprof prints at the top of every
// report, stay short and for people. Files written before kept the records
// in the comments; readers take them from both.
const recordFunction = "wallprof:record"

// encodeComments returns the human-readable comments and the wallprof
// records for p.
func encodeComments(p *profile.Profile) (human, records []string) {
	var states []string
	for s := profile.State(0); s < profile.NumStates; s++ {
		states = append(states, s.String())
	}
	rec := []string{commentLead + "profile states=" + strings.Join(states, ",")}
	if p.Command != "" {
		human = append(human, "command: "+oneLine(p.Command))
		rec = append(rec, commentLead+"command "+strconv.Quote(p.Command))
	}
	if p.Program != "" {
		rec = append(rec, commentLead+"program "+strconv.Quote(p.Program))
	}
	human = append(human, "lost events: "+lostSummary(p.Lost))
	for _, c := range sortedCauses(p.Lost) {
		rec = append(rec, fmt.Sprintf("%slost cause=%s n=%d", commentLead, token(c), p.Lost[c]))
	}
	if c := p.Cost; c != nil {
		human = append(human, fmt.Sprintf("wallprof cost: profiler CPU %s, BPF run time %s in %d runs, target CPU %s",
			fmtDur(int64(c.ProfilerCPU)), fmtDur(int64(c.BPFRunTime)), c.BPFRunCount, fmtDur(int64(c.TargetCPU))))
		rec = append(rec, fmt.Sprintf("%scost profiler_cpu=%d bpf_run=%d bpf_runs=%d target_cpu=%d bpf_stats_permille=%d startup_cpu=%d",
			commentLead, int64(c.ProfilerCPU), int64(c.BPFRunTime), c.BPFRunCount, int64(c.TargetCPU),
			int64(c.BPFStatsShare*1000+0.5), int64(c.StartupCPU)))
	}
	if r := p.Recorder; r != nil {
		human = append(human, "recorded with: "+recorderSummary(r))
		rec = append(rec, fmt.Sprintf("%srecorder accounting=%s kernel=%s", commentLead, token(r.Accounting), token(r.Kernel)))
	}
	for _, m := range p.Mappings {
		if m != nil && m.Kernel && !isKernelFile(m.File) {
			rec = append(rec, fmt.Sprintf("%skernel mapping=%d", commentLead, m.ID))
		}
	}
	for _, t := range p.Threads {
		if t == nil {
			continue
		}
		rec = append(rec, fmt.Sprintf("%sthread pid=%d tid=%d name=%s start=%d end=%d exited=%t on-cpu=%d runnable=%d sleeping=%d disk=%d other=%d samples=%d cpu-samples=%d",
			commentLead, t.PID, t.TID, strconv.Quote(t.Name), int64(t.Start), int64(t.End), t.Exited,
			int64(t.Time[profile.OnCPU]), int64(t.Time[profile.Runnable]), int64(t.Time[profile.Sleeping]),
			int64(t.Time[profile.Disk]), int64(t.Time[profile.Other]), t.Samples, t.CPUSamples))
	}
	if g := p.GoInfo; g != nil {
		covers := ""
		if c, ok := g.Coverage(p.Duration); ok {
			covers = fmt.Sprintf(", covering %s of the %s recording (%.0f%%)", fmtDur(int64(g.Covered)), fmtDur(int64(p.Duration)), 100*c)
			if g.Before > 0 {
				covers = fmt.Sprintf(", covering %s of the %s %s (%.0f%%)", fmtDur(int64(g.Covered)), fmtDur(int64(g.Span(p.Duration))), g.SpanText(), 100*c)
			}
		}
		human = append(human, fmt.Sprintf("goroutines: %s, %d snapshots of the goroutine table every %s%s, up to %d goroutines, %d inconsistent reads dropped (sample type %q)",
			g.Version, g.Snapshots, g.Interval, covers, g.MaxGoroutines, g.Dropped, goroutineType))
		rec = append(rec, fmt.Sprintf("%sgoroutines version=%s snapshots=%d interval=%d max=%d dropped=%d retried=%d failed=%d covered=%d longest_gap=%d before=%d",
			commentLead, token(g.Version), g.Snapshots, int64(g.Interval), g.MaxGoroutines, g.Dropped, g.Retried, g.Failed,
			int64(g.Covered), int64(g.LongestGap), int64(g.Before)))
	}
	for _, n := range p.Notes {
		human = append(human, "note: "+oneLine(n))
		rec = append(rec, commentLead+"note "+strconv.Quote(n))
	}
	return human, rec
}

// commentState collects what decodeComment finds.
type commentState struct {
	found          bool // at least one wallprof record
	command        string
	program        string
	threads        []*profile.Thread
	lost           map[string]uint64
	cost           *profile.Cost
	notes          []string
	kernelMappings map[uint64]bool
	goInfo         *profile.GoInfo
	recorder       *profile.Recorder
}

// decodeComment parses one comment. Comments that are not wallprof records
// are returned as other=true.
func (st *commentState) decodeComment(c string) (other bool, err error) {
	if !strings.HasPrefix(c, commentPrefix) {
		return true, nil
	}
	rest := c[len(commentPrefix):]
	version, rest, _ := strings.Cut(rest, " ")
	if version != commentVersion {
		return false, fmt.Errorf("it was written by a newer wallprof (comment format %q, this version reads %q)", version, commentVersion)
	}
	st.found = true
	kind, rest, _ := strings.Cut(rest, " ")
	switch kind {
	case "command", "program", "note":
		s, err := strconv.Unquote(rest)
		if err != nil {
			return false, fmt.Errorf("bad wallprof %s comment %q: %v", kind, c, err)
		}
		switch kind {
		case "command":
			st.command = s
		case "program":
			st.program = s
		default:
			st.notes = append(st.notes, s)
		}
		return false, nil
	}
	f, err := parseFields(rest)
	if err != nil {
		return false, fmt.Errorf("bad wallprof %s comment %q: %v", kind, c, err)
	}
	switch kind {
	case "thread":
		st.threads = append(st.threads, f.thread())
	case "lost":
		if st.lost == nil {
			st.lost = map[string]uint64{}
		}
		st.lost[f.str("cause")] += f.uint("n")
	case "cost":
		st.cost = &profile.Cost{
			ProfilerCPU: f.dur("profiler_cpu"),
			BPFRunTime:  f.dur("bpf_run"),
			BPFRunCount: f.uint("bpf_runs"),
			TargetCPU:   f.dur("target_cpu"),
		}
		if f.has("startup_cpu") {
			st.cost.StartupCPU = f.dur("startup_cpu")
		}
		if f.has("bpf_stats_permille") {
			st.cost.BPFStatsShare = float64(f.uint("bpf_stats_permille")) / 1000
		} else if st.cost.BPFRunCount > 0 {
			st.cost.BPFStatsShare = 1 // written before the field existed: exact
		}
	case "goroutines":
		st.goInfo = &profile.GoInfo{Version: f.str("version"), Snapshots: int(f.uint("snapshots")), Interval: f.dur("interval"),
			MaxGoroutines: int(f.uint("max")), Dropped: int(f.uint("dropped")), Retried: int(f.uint("retried")), Failed: int(f.uint("failed")),
			Covered: f.dur("covered"), LongestGap: f.dur("longest_gap"), Before: f.dur("before")}
	case "recorder":
		st.recorder = &profile.Recorder{Accounting: f.str("accounting"), Kernel: f.str("kernel")}
	case "kernel":
		if st.kernelMappings == nil {
			st.kernelMappings = map[uint64]bool{}
		}
		st.kernelMappings[f.uint("mapping")] = true
	}
	if f.err != nil {
		return false, fmt.Errorf("bad wallprof %s comment %q: %v", kind, c, f.err)
	}
	return false, nil
}

// fields are the key=value pairs of one record; the first conversion error
// is kept in err.
type fields struct {
	kv  map[string]string
	err error
}

func parseFields(s string) (*fields, error) {
	f := &fields{kv: map[string]string{}}
	for s != "" {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, fmt.Errorf("expected key=value at %q", s)
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("bad quoted value for %s", key)
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			i := strings.IndexByte(rest, ' ')
			if i < 0 {
				i = len(rest)
			}
			val, rest = rest[:i], rest[i:]
		}
		if rest != "" {
			if rest[0] != ' ' {
				return nil, fmt.Errorf("expected a space after %s", key)
			}
			rest = rest[1:]
		}
		f.kv[key] = val
		s = rest
	}
	return f, nil
}

func (f *fields) str(k string) string { return f.kv[k] }

func (f *fields) has(k string) bool { _, ok := f.kv[k]; return ok }

func (f *fields) int(k string) int64 {
	v, ok := f.kv[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s=%q is not an integer", k, v)
	}
	return n
}

func (f *fields) uint(k string) uint64 {
	v, ok := f.kv[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s=%q is not a non-negative integer", k, v)
	}
	return n
}

func (f *fields) dur(k string) time.Duration { return time.Duration(f.int(k)) }

func (f *fields) bool(k string) bool {
	v, ok := f.kv[k]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s=%q is not a boolean", k, v)
	}
	return b
}

func (f *fields) thread() *profile.Thread {
	t := &profile.Thread{
		PID:     int(f.int("pid")),
		TID:     int(f.int("tid")),
		Name:    f.str("name"),
		Start:   f.dur("start"),
		End:     f.dur("end"),
		Exited:  f.bool("exited"),
		Samples: int(f.int("samples")),
		// Absent before session 6.
		CPUSamples: int(f.int("cpu-samples")),
	}
	for s := profile.State(0); s < profile.NumStates; s++ {
		t.Time[s] = f.dur(s.String())
	}
	return t
}

// token returns s as a field value: bare when that is unambiguous, quoted
// otherwise.
func token(s string) string {
	if s == "" || strings.ContainsAny(s, " \"=\\") || strings.IndexFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func sortedCauses(lost map[string]uint64) []string {
	causes := make([]string, 0, len(lost))
	for c := range lost {
		causes = append(causes, c)
	}
	sort.Strings(causes)
	return causes
}

// lostSummary is "none" or "cause=n, cause=n" sorted by cause.
func lostSummary(lost map[string]uint64) string {
	var parts []string
	for _, c := range sortedCauses(lost) {
		parts = append(parts, fmt.Sprintf("%s=%d", c, lost[c]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func isKernelFile(f string) bool { return strings.HasPrefix(f, kernelFile) }

// oneLine replaces line breaks so that s prints on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// recorderSummary says in words how a recording was made.
func recorderSummary(r *profile.Recorder) string {
	var how string
	switch r.Accounting {
	case profile.AccountResumption:
		how = "off-CPU time accounted at each thread's resumption (sched_exit_tp)"
	case profile.AccountSwitchTime:
		how = "off-CPU time accounted at each context switch (sched_switch)"
	case profile.AccountWalk:
		how = "threads walked from wallprof's CPU, no program at a context switch"
	case profile.AccountWalkTimer:
		how = "threads walked by a BPF timer on one CPU, no program at a context switch"
	case "":
		how = "off-CPU accounting unknown"
	default:
		how = "off-CPU accounting " + r.Accounting
	}
	if r.Kernel != "" {
		how += ", Linux " + r.Kernel
	}
	return how
}
