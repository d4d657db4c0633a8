package main

import (
	"github.com/wallprof/wallprof/internal/profile"
)

// recordFormat is the schema id of 'wallprof record --json'.
const recordFormat = "wallprof.record/v1"

// recordSummary is what 'wallprof record --json' writes: the summary lines
// of stderr, for CI jobs and scripts (doc/schemas/wallprof.record.v1.json).
type recordSummary struct {
	Format       string            `json:"format"`
	Command      string            `json:"command"`
	PIDs         []int             `json:"pids"`
	Output       string            `json:"output"`
	OutputFormat string            `json:"output_format"`
	Bytes        int64             `json:"bytes"`
	StoppedBy    string            `json:"stopped_by"`
	CommandExit  *int              `json:"command_exit_status,omitempty"`
	DurationNs   int64             `json:"duration_ns"`
	FrequencyHz  int               `json:"frequency_hz"`
	Threads      int               `json:"threads"`
	Samples      int               `json:"samples"`
	TimeNs       map[string]int64  `json:"time_ns"`
	Lost         map[string]uint64 `json:"lost"`
	Notes        []string          `json:"notes"`
	Goroutines   *recordGoroutines `json:"goroutines,omitempty"`
	Cost         *recordCost       `json:"cost,omitempty"`
}

type recordGoroutines struct {
	GoVersion     string `json:"go_version"`
	MaxGoroutines int    `json:"max_goroutines"`
	Snapshots     int    `json:"snapshots"`
	Dropped       int    `json:"dropped"`
	Failed        int    `json:"failed"`
}

type recordCost struct {
	ProfilerCPUNs  int64   `json:"profiler_cpu_ns"`
	StartupCPUNs   int64   `json:"startup_cpu_ns"`
	BPFRunTimeNs   int64   `json:"bpf_run_time_ns"`
	BPFRunCount    uint64  `json:"bpf_run_count"`
	BPFStatsShare  float64 `json:"bpf_stats_share"`
	TargetCPUNs    int64   `json:"target_cpu_ns"`
	ProfilerCPUPct float64 `json:"profiler_cpu_percent"`
}

// newRecordSummary summarises a recording written to output.
func newRecordSummary(p *profile.Profile, pids []int, output, format string, bytes int64, freq int, stoppedBy string) *recordSummary {
	s := &recordSummary{Format: recordFormat, Command: p.Command, PIDs: pids, Output: output, OutputFormat: format,
		Bytes: bytes, StoppedBy: stoppedBy, DurationNs: int64(p.Duration), FrequencyHz: freq,
		Threads: len(p.Threads), TimeNs: map[string]int64{}, Lost: p.Lost, Notes: p.Notes}
	if s.PIDs == nil {
		s.PIDs = []int{}
		seen := map[int]bool{}
		for _, t := range p.Threads {
			if !seen[t.PID] {
				seen[t.PID] = true
				s.PIDs = append(s.PIDs, t.PID)
			}
		}
	}
	if s.Lost == nil {
		s.Lost = map[string]uint64{}
	}
	if s.Notes == nil {
		s.Notes = []string{}
	}
	for st := profile.State(0); st < profile.NumStates; st++ {
		s.TimeNs[st.String()] = 0
	}
	for _, t := range p.Threads {
		s.Samples += t.Samples
		for st, d := range t.Time {
			s.TimeNs[profile.State(st).String()] += int64(d)
		}
	}
	if g := p.GoInfo; g != nil {
		s.Goroutines = &recordGoroutines{GoVersion: g.Version, MaxGoroutines: g.MaxGoroutines, Snapshots: g.Snapshots,
			Dropped: g.Dropped, Failed: g.Failed}
	}
	if c := p.Cost; c != nil {
		s.Cost = &recordCost{ProfilerCPUNs: int64(c.ProfilerCPU), StartupCPUNs: int64(c.StartupCPU),
			BPFRunTimeNs: int64(c.BPFRunTime), BPFRunCount: c.BPFRunCount, BPFStatsShare: c.BPFStatsShare,
			TargetCPUNs: int64(c.TargetCPU)}
		if c.TargetCPU > 0 {
			s.Cost.ProfilerCPUPct = 100 * float64(c.ProfilerCPU) / float64(c.TargetCPU)
		}
	}
	return s
}
