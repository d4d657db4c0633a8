package main

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// workloadReport is the line a bench workload prints on stderr at exit:
// "pingpong: iters=N elapsed_ns=.. user_ns=.. sys_ns=.. start_mono_ns=..
// end_mono_ns=.." (see testdata/workloads/*/*.c).
type workloadReport struct {
	Elapsed          time.Duration // the workload's own timed loop
	CPU              time.Duration // user+sys of the whole workload process
	StartNS, EndNS   int64         // CLOCK_MONOTONIC at main's entry and at exit
	SwitchesPerSec   float64       // pingpong only
	Checksum         string        // cpubound only
	Iters            int64
	found, hasFields bool
}

// parseWorkloadReport finds the report line of workload name in stderr.
func parseWorkloadReport(stderr, name string) workloadReport {
	var r workloadReport
	for _, line := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+": ")
		if !ok || !strings.Contains(rest, "elapsed_ns=") {
			continue
		}
		r.found = true
		kv := map[string]string{}
		for _, f := range strings.Fields(rest) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		num := func(k string) int64 { n, _ := strconv.ParseInt(kv[k], 10, 64); return n }
		r.Elapsed = time.Duration(num("elapsed_ns"))
		r.CPU = time.Duration(num("user_ns") + num("sys_ns"))
		r.StartNS, r.EndNS = num("start_mono_ns"), num("end_mono_ns")
		r.SwitchesPerSec, _ = strconv.ParseFloat(kv["switches_per_s"], 64)
		r.Checksum = kv["checksum"]
		r.Iters = num("iters")
		r.hasFields = r.Elapsed > 0 && r.EndNS > 0
	}
	return r
}

// selfReport is what wallprof says about its own cost on stderr, e.g.
// "wallprof: cost: profiler CPU 120ms (3.1% of target CPU), BPF 40ms (1.0%)
// in 5000 program runs" ("BPF run time not measured" with --bpf-stats off) and
// "wallprof: wrote F (..) 41ms after the recording ended; peak memory 30 MiB".
type selfReport struct {
	ProfilerCPU, BPF time.Duration
	CPUPct, BPFPct   float64 // of the target's CPU, as wallprof computes it
	Runs             int64   // BPF program runs
	HasCost, HasBPF  bool
	Finish           time.Duration // end of target to profile written, if printed
	HasFinish        bool
	PeakMiB          float64 // wallprof's own peak memory, if printed
}

var (
	durRE       = `([0-9]+(?:\.[0-9]+)?\s*(?:ns|us|µs|ms|s|m|h)?)`
	costCPURE   = regexp.MustCompile(`(?i)profiler\s+CPU\s*[:=]?\s*` + durRE)
	costBPFRE   = regexp.MustCompile(`(?i)\bBPF\s*(?:time|run time|CPU)?\s*[:=]?\s*` + durRE)
	finishRE    = regexp.MustCompile(`(?i)(?:wrote|written|writ(?:e|ing)|flush\w*|finish\w*|finaliz\w*|saved?)\b.*?\bin\s+` + durRE)
	finishAltR  = regexp.MustCompile(`(?i)(?:exit|end)\w*\s+to\s+(?:profile\s+)?(?:written|write|output)\w*\s*[:=]?\s*` + durRE)
	finishAfter = regexp.MustCompile(`(?i)(?:wrote|written)\b.*?` + durRE + `\s+after\b`)
	cpuPctRE    = regexp.MustCompile(`(?i)profiler\s+CPU\s*[:=]?\s*` + durRE + `(?:\s+while\s+recording)?\s*\(\s*([0-9.]+)\s*%`)
	bpfPctRE    = regexp.MustCompile(`(?i)\bBPF\s*(?:time|run time|CPU)?\s*[:=]?\s*` + durRE + `\s*\(\s*([0-9.]+)\s*%`)
	runsRE      = regexp.MustCompile(`(?i)\bin\s+([0-9]+)\s+(?:BPF\s+)?program\s+runs`)
	peakMemRE   = regexp.MustCompile(`(?i)peak\s+memory\s*[:=]?\s*([0-9.]+)\s*(KiB|MiB|GiB|kB|MB|GB)`)
)

// parseSelfReport reads wallprof's lines on stderr leniently: it only needs
// the words "profiler CPU <dur>" and "BPF <dur>" on a "wallprof:" line that
// mentions "cost", and for the finishing time "wrote ... <dur> after the
// recording ended", "... written ... in <dur>" or "exit to profile written
// <dur>".
func parseSelfReport(stderr string) selfReport {
	var r selfReport
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(strings.ToLower(line), "wallprof") {
			continue
		}
		if strings.Contains(strings.ToLower(line), "cost") {
			if m := costCPURE.FindStringSubmatch(line); m != nil {
				r.ProfilerCPU, r.HasCost = parseDur(m[1]), true
			}
			if m := costBPFRE.FindStringSubmatch(line); m != nil {
				r.BPF, r.HasBPF = parseDur(m[1]), true
			}
			if m := cpuPctRE.FindStringSubmatch(line); m != nil {
				r.CPUPct, _ = strconv.ParseFloat(m[2], 64)
			}
			if m := bpfPctRE.FindStringSubmatch(line); m != nil {
				r.BPFPct, _ = strconv.ParseFloat(m[2], 64)
			}
			if m := runsRE.FindStringSubmatch(line); m != nil {
				r.Runs, _ = strconv.ParseInt(m[1], 10, 64)
			}
			continue
		}
		if m := peakMemRE.FindStringSubmatch(line); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			switch strings.ToLower(m[2]) {
			case "kib", "kb":
				f /= 1024
			case "gib", "gb":
				f *= 1024
			}
			r.PeakMiB = f
		}
		for _, re := range []*regexp.Regexp{finishAfter, finishRE, finishAltR} {
			if m := re.FindStringSubmatch(line); m != nil {
				r.Finish, r.HasFinish = parseDur(m[1]), true
				break
			}
		}
	}
	return r
}

// parseDur accepts Go durations ("1.5s", "120ms", "3µs") and bare numbers
// (seconds).
func parseDur(s string) time.Duration {
	s = strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if d, err := time.ParseDuration(s); err == nil {
		return d
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second))
	}
	return 0
}
