package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseWorkloadReport(t *testing.T) {
	stderr := "[ perf record: Woken up 1 times ]\n" +
		"pingpong: iters=300 elapsed_ns=2000000 switches_per_s=300000 user_ns=1000 sys_ns=2000 start_mono_ns=10 end_mono_ns=20\n" +
		"[ perf record: Captured and wrote 0.1 MB ]\n"
	r := parseWorkloadReport(stderr, "pingpong")
	if !r.hasFields || r.Elapsed != 2*time.Millisecond || r.CPU != 3000 || r.StartNS != 10 || r.EndNS != 20 || r.SwitchesPerSec != 300000 {
		t.Errorf("got %+v", r)
	}
	if r := parseWorkloadReport(stderr, "cpubound"); r.found {
		t.Errorf("cpubound found in pingpong output: %+v", r)
	}
	r = parseWorkloadReport("cpubound: iters=5 checksum=00ff elapsed_ns=7 user_ns=1 sys_ns=0 start_mono_ns=1 end_mono_ns=9", "cpubound")
	if r.Checksum != "00ff" || r.Elapsed != 7 || r.Iters != 5 {
		t.Errorf("got %+v", r)
	}
}

func TestParseSelfReport(t *testing.T) {
	for _, c := range []struct {
		in        string
		cpu, bpf  time.Duration
		finish    time.Duration
		hasFinish bool
	}{
		{"wallprof: cost: profiler CPU 120ms (3.1% of target CPU), BPF 40ms (1.0%)", 120 * time.Millisecond, 40 * time.Millisecond, 0, false},
		{"wallprof: cost: profiler CPU 1.5s (10% of target CPU), BPF 2.25ms (0.1%)\nwallprof: wrote /tmp/x.pb.gz (12 stacks) in 35ms", 1500 * time.Millisecond, 2250 * time.Microsecond, 35 * time.Millisecond, true},
		{"wallprof: Cost: Profiler CPU: 0.25 (5% of target CPU), BPF time 0.5 s", 250 * time.Millisecond, 500 * time.Millisecond, 0, false},
		{"wallprof: target exit to profile written: 80ms", 0, 0, 80 * time.Millisecond, true},
		// The lines cmd/wallprof prints today.
		{"wallprof: recorded 1.2s of \"pingpong\": 2 threads, 33 stack samples, lost events: none\n" +
			"wallprof: cost: profiler CPU 12.345ms (1.2% of target CPU), BPF 150µs (0.0%) in 5000 program runs\n" +
			"wallprof: wrote /tmp/x.pb.gz (pprof, 12345 bytes) 41ms after the recording ended; peak memory 30 MiB",
			12345 * time.Microsecond, 150 * time.Microsecond, 41 * time.Millisecond, true},
	} {
		r := parseSelfReport(c.in)
		if r.ProfilerCPU != c.cpu || r.BPF != c.bpf || r.Finish != c.finish || r.HasFinish != c.hasFinish {
			t.Errorf("%q: got %+v", c.in, r)
		}
	}
	// The exact lines of cmd/wallprof at da2053c, with and without BPF statistics.
	r := parseSelfReport(`wallprof: recorded 7.376s of "./pingpong --iters 1000000": 2 threads, 1592 stack samples, lost events: switch-in-missed 50
wallprof: cost: profiler CPU 165.193ms (3.09% of target CPU), BPF 175.83ms (3.29%) in 1006658 program runs
wallprof: wrote /tmp/pp.pb.gz (pprof, 1013 bytes) 266ms after the recording ended; peak memory 43 MiB`)
	if !r.HasCost || !r.HasBPF || r.ProfilerCPU != 165193*time.Microsecond || r.BPF != 175830*time.Microsecond ||
		r.CPUPct != 3.09 || r.BPFPct != 3.29 || r.Runs != 1006658 || r.Finish != 266*time.Millisecond || r.PeakMiB != 43 {
		t.Errorf("wallprof lines: got %+v", r)
	}
	r = parseSelfReport(`wallprof: cost: profiler CPU 43.578ms (1.23% of target CPU), BPF run time not measured
wallprof: wrote /tmp/x.pb.gz (pprof, 5206 bytes) 196ms after the recording ended; peak memory 44 MiB`)
	if !r.HasCost || r.HasBPF || r.CPUPct != 1.23 || r.Finish != 196*time.Millisecond || r.PeakMiB != 44 {
		t.Errorf("--no-bpf-stats lines: got %+v", r)
	}
	// Since the start-up cost is reported apart from the recording's.
	r = parseSelfReport(`wallprof: cost: profiler CPU 6.912ms while recording (0.26% of target CPU), BPF 64.3ms (2.43%) in 781416 program runs, estimated from the 11% of the time it was measured; 48ms of CPU to start`)
	if !r.HasCost || !r.HasBPF || r.ProfilerCPU != 6912*time.Microsecond || r.CPUPct != 0.26 || r.BPF != 64300*time.Microsecond ||
		r.BPFPct != 2.43 || r.Runs != 781416 {
		t.Errorf("while-recording line: got %+v", r)
	}
	if r := parseSelfReport("pingpong: iters=1 elapsed_ns=5\n"); r.HasCost || r.HasFinish {
		t.Errorf("found a cost in workload output: %+v", r)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSelectConfigs(t *testing.T) {
	cs, err := selectConfigs("bpftrace, perf-99")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if got := len(names); got != 3 || names[0] != "none" || names[1] != "perf-99" || names[2] != "bpftrace" {
		t.Errorf("got %v, want none first then run order", names)
	}
	if _, err := selectConfigs("none,nope"); err == nil {
		t.Error("unknown configuration accepted")
	}
}

func TestCSVRoundTrip(t *testing.T) {
	in := []result{{Config: "wallprof-99", Workload: "pingpong-pinned", Round: 2,
		W:       workloadReport{Elapsed: 3e9, CPU: 2e9, Iters: 1000, SwitchesPerSec: 5e5},
		Self:    selfReport{ProfilerCPU: 5e7, BPF: 6e8, CPUPct: 1.5, BPFPct: 16.7, Runs: 3600, HasCost: true, HasBPF: true, Finish: 2e8, HasFinish: true, PeakMiB: 44},
		ToolCPU: 3e8, ToolRSSKB: 45000, CmdWall: 4e9, Startup: 5e7, Tail: 3e8}}
	path := t.TempDir() + "/results.csv"
	if err := writeCSV(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := readCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0] != in[0] {
		t.Errorf("got %+v\nwant %+v", out, in)
	}
}

func TestSelectConfigsDefault(t *testing.T) {
	names := func(cs []config) string {
		var n []string
		for _, c := range cs {
			n = append(n, c.Name)
		}
		return strings.Join(n, ",")
	}
	t.Setenv("WALLPROF_BASE", "")
	def, err := selectConfigs("")
	if err != nil {
		t.Fatal(err)
	}
	// The default must run without WALLPROF_BASE, and without the
	// variants that only serve a comparison.
	if got, want := names(def), "none,wallprof-99,wallprof-999,wallprof-99-nostats,perf-99,perf-999,timer-999,perf-sched,bpftrace"; got != want {
		t.Errorf("default configurations %s, want %s", got, want)
	}
	t.Setenv("WALLPROF_BASE", "/tmp/wp-base")
	def, _ = selectConfigs("")
	if got, want := names(def), "none,wallprof-99,wallprof-999,wallprof-99-nostats,wallprof-base-99,wallprof-base-99-nostats,perf-99,perf-999,timer-999,perf-sched,bpftrace"; got != want {
		t.Errorf("with WALLPROF_BASE set, default configurations %s, want %s", got, want)
	}
	named, err := selectConfigs("timer-bpf-999,wallprof-99-fullstats")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(named), "none,wallprof-99-fullstats,timer-bpf-999"; got != want {
		t.Errorf("named optional configurations: %s, want %s", got, want)
	}
	if _, err := selectConfigs("none,nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown configuration: err %v", err)
	}
}

func TestParseStat(t *testing.T) {
	out := "# started on Sun Nov 22 11:30:00 2026\n\n" +
		"1234567,,instructions:u,1000000,100.00,,\n" +
		"89,,cpu_core/instructions/,1000000,100.00,,\n" +
		"42,,context-switches,1000000,100.00,,\n"
	if v, err := parseStat([]byte(out), "instructions"); err != nil || v != 1234567+89 {
		t.Errorf("instructions: %v, %v; want %d", v, err, 1234567+89)
	}
	if v, err := parseStat([]byte(out), "context-switches"); err != nil || v != 42 {
		t.Errorf("context-switches: %v, %v", v, err)
	}
	if _, err := parseStat([]byte("<not supported>,,instructions,0,100.00,,\n"), "instructions"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("not supported: err %v", err)
	}
	if _, err := parseStat([]byte(out), "cycles"); err == nil {
		t.Error("no error for an event that is not there")
	}
	if v, err := parseStat([]byte("12.50,msec,task-clock,12500000,100.00,0.9,CPUs utilized\n"), "task-clock"); err != nil || v != 12.5 {
		t.Errorf("task-clock: %v, %v", v, err)
	}
}
