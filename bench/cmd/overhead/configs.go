package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// config is one way of running a workload.
type config struct {
	Name string
	// Wrap returns the command that runs workload argv under the tool
	// (argv itself for "none"). Nil for tools that run alongside.
	Wrap func(e *env, argv []string) []string
	// Alongside returns the command of a tool started before the workload,
	// stopped with SIGINT after it; Ready is the line it prints when attached.
	Alongside func(e *env, workload string) []string
	Ready     string
	Wallprof  bool // needs the wallprof binary
	Base      bool // needs the baseline wallprof binary (WALLPROF_BASE)
	// Optional configurations run only when named in CONFIGS, or, with
	// WithBase, also by default when WALLPROF_BASE is set.
	Optional, WithBase bool
}

// env is what the configurations need to build their commands.
type env struct {
	Wallprof string // path of the wallprof binary
	// WallprofBase is another wallprof binary (env WALLPROF_BASE), e.g. built
	// from an earlier commit, to compare with in the same interleaved runs.
	WallprofBase string
	Bpftrace     string // path of bpftrace
	OffcpuBT     string // path of bench/offcpu.bt
	OutDir       string // where profiles are written
	Perf         string // path of perf
	Timerfloor   string // path of bench/cmd/timerfloor's binary
	AttachSh     string // path of bench/attach.sh
	Count        string // perf stat event counted over every run (COUNT), "" for none
}

func (e *env) out(name string) string { return filepath.Join(e.OutDir, name) }

func wallprofAt(name string, hz int, extra ...string) func(*env, []string) []string {
	return func(e *env, argv []string) []string {
		cmd := []string{e.Wallprof, "record", "-F", fmt.Sprint(hz), "-o", e.out(name + ".pb.gz")}
		cmd = append(cmd, extra...)
		return append(append(cmd, "--"), argv...)
	}
}

// wallprofBaseAt is wallprofAt with the baseline binary.
func wallprofBaseAt(name string, hz int, extra ...string) func(*env, []string) []string {
	return func(e *env, argv []string) []string {
		cmd := []string{e.WallprofBase, "record", "-F", fmt.Sprint(hz), "-o", e.out(name + ".pb.gz")}
		cmd = append(cmd, extra...)
		return append(append(cmd, "--"), argv...)
	}
}

// attached runs the workload under bench/attach.sh, with wallprof's
// command mode (record or top) attached to it by PID.
func attached(mode, name string) func(*env, []string) []string {
	return func(e *env, argv []string) []string {
		return append([]string{e.AttachSh, e.Wallprof, mode, e.out(name), "--"}, argv...)
	}
}

// allConfigs are the configurations in the order they run in each round.
var allConfigs = []config{
	{Name: "none", Wrap: func(_ *env, argv []string) []string { return argv }},
	// The same again: its ratio to none is the noise of the measure (A/A).
	{Name: "none-aa", Wrap: func(_ *env, argv []string) []string { return argv }, Optional: true},
	// The default: BPF statistics on 10% of the time (--bpf-stats sampled).
	{Name: "wallprof-99", Wrap: wallprofAt("wallprof-99", 99), Wallprof: true},
	{Name: "wallprof-999", Wrap: wallprofAt("wallprof-999", 999), Wallprof: true},
	// With kernel.bpf_stats_enabled all the time (exact BPF run time), and
	// never: the cost of measuring the BPF run time (two clock reads per
	// program run).
	{Name: "wallprof-99-fullstats", Wrap: wallprofAt("wallprof-99-fullstats", 99, "--bpf-stats", "full"), Wallprof: true, Optional: true},
	{Name: "wallprof-99-nostats", Wrap: wallprofAt("wallprof-99-nostats", 99, "--bpf-stats", "off"), Wallprof: true},
	// The way without sched_exit_tp (kernels before 6.16): a probe on
	// sys_exit, which every syscall of the machine runs. env execs wallprof.
	{Name: "wallprof-99-sysexit", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_EXIT_TP=0"}, wallprofAt("wallprof-99-sysexit", 99)(e, argv)...)
	}, Wallprof: true, Optional: true},
	{Name: "wallprof-99-sysexit-nostats", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_EXIT_TP=0"}, wallprofAt("wallprof-99-sysexit-nostats", 99, "--bpf-stats", "off")(e, argv)...)
	}, Wallprof: true, Optional: true},
	// Where a switch's BPF time goes in the resumption accounting
	// (WALLPROF_BENCH_CUT: the switch program stops part way; its profile
	// is wrong): 6 at once (an empty
	// program, in wallprof's recording), 1 before the target
	// check, 2 after it, 3 after the thread lookup, 4 after reading the
	// counters and the clock; 5 all of it and one more thread lookup.
	cutConfig(6), cutConfig(1), cutConfig(2), cutConfig(3), cutConfig(4), cutConfig(5),
	// cut1 without the BPF statistics, and without the unwind tables (no
	// re-reading of the command's mappings as it starts).
	{Name: "wallprof-99-cut1-nostats", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=resume", "WALLPROF_BENCH_CUT=1"}, wallprofAt("wallprof-99-cut1-nostats", 99, "--bpf-stats", "off")(e, argv)...)
	}, Wallprof: true, Optional: true},
	{Name: "wallprof-99-cut1-fp", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=resume", "WALLPROF_BENCH_CUT=1", "WALLPROF_UNWIND=fp"}, wallprofAt("wallprof-99-cut1-fp", 99)(e, argv)...)
	}, Wallprof: true, Optional: true},
	// record's default walks the threads (no program at a switch); the
	// accounting at each thread's resumption that top and the agent use,
	// one program run per switch (WALLPROF_ACCOUNTING=resume).
	{Name: "wallprof-99-resume", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=resume"}, wallprofAt("wallprof-99-resume", 99)(e, argv)...)
	}, Wallprof: true, Optional: true},
	{Name: "wallprof-999-resume", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=resume"}, wallprofAt("wallprof-999-resume", 999)(e, argv)...)
	}, Wallprof: true, Optional: true},
	// The walk named (the default, where the kernel allows it).
	{Name: "wallprof-99-walk", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=walk"}, wallprofAt("wallprof-99-walk", 99)(e, argv)...)
	}, Wallprof: true, Optional: true},
	// The walk with the walker all but idle (a walk every 200 ms): what
	// the timers' samples and the hooks cost walking, without the walks.
	{Name: "wallprof-99-walk-rare", Wallprof: true, Optional: true, Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=walk", "WALLPROF_WALK_EVERY=200ms"}, wallprofAt("wallprof-99-walk-rare", 99)(e, argv)...)
	}},
	{Name: "wallprof-99-walk-fp", Wallprof: true, Optional: true, Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=walk", "WALLPROF_UNWIND=fp"}, wallprofAt("wallprof-99-walk-fp", 99)(e, argv)...)
	}},
	// The walk's first pass from a BPF timer (Linux 6.7+, opt-in:
	// doc/walk-timer.md) rather than from wallprof's thread.
	{Name: "wallprof-99-walktimer", Wallprof: true, Optional: true, Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_WALK_TIMER=1"}, wallprofAt("wallprof-99-walktimer", 99)(e, argv)...)
	}},
	{Name: "wallprof-999-walktimer", Wallprof: true, Optional: true, Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_WALK_TIMER=1"}, wallprofAt("wallprof-999-walktimer", 999)(e, argv)...)
	}},
	{Name: "wallprof-999-walk", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=walk"}, wallprofAt("wallprof-999-walk", 999)(e, argv)...)
	}, Wallprof: true, Optional: true},
	// The baseline binary (WALLPROF_BASE), for before/after in one run.
	{Name: "wallprof-base-99", Wrap: wallprofBaseAt("wallprof-base-99", 99), Base: true, Optional: true, WithBase: true},
	{Name: "wallprof-base-999", Wrap: wallprofBaseAt("wallprof-base-999", 999), Base: true, Optional: true},
	{Name: "wallprof-base-99-fullstats", Wrap: wallprofBaseAt("wallprof-base-99-fullstats", 99, "--bpf-stats", "full"), Base: true, Optional: true},
	{Name: "wallprof-base-99-nostats", Wrap: wallprofBaseAt("wallprof-base-99-nostats", 99, "--bpf-stats", "off"), Base: true, Optional: true, WithBase: true},
	// Attached by PID before the workload starts (bench/attach.sh): top
	// against record attached the same way, at the same rate.
	{Name: "attach-99", Wrap: attached("record", "attach-99"), Wallprof: true, Optional: true},
	{Name: "top-99", Wrap: attached("top", "top-99"), Wallprof: true, Optional: true},
	{Name: "agent-99", Wrap: attached("agent", "agent-99"), Wallprof: true, Optional: true},
	{Name: "perf-99", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Perf, "record", "-g", "-F", "99", "-o", e.out("perf.data"), "--"}, argv...)
	}},
	{Name: "perf-999", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Perf, "record", "-g", "-F", "999", "-o", e.out("perf999.data"), "--"}, argv...)
	}},
	// Stacks without frame pointers: wallprof's in-kernel unwinder against
	// its frame-pointer walk alone, and perf copying 8 KiB of stack per
	// sample to unwind afterwards.
	{Name: "wallprof-99-fp", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_UNWIND=fp"}, wallprofAt("wallprof-99-fp", 99)(e, argv)...)
	}, Wallprof: true, Optional: true},
	{Name: "wallprof-999-fp", Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_UNWIND=fp"}, wallprofAt("wallprof-999-fp", 999)(e, argv)...)
	}, Wallprof: true, Optional: true},
	{Name: "perf-dwarf-999", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Perf, "record", "--call-graph", "dwarf", "-F", "999", "-o", e.out("perfdwarf.data"), "--"}, argv...)
	}, Optional: true},
	// The floor at 999 Hz: the cpu-clock timers that wallprof opens on
	// every CPU, firing with nothing attached, and with an empty BPF
	// program. What any sampler of that frequency pays on this machine.
	{Name: "timer-999", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Timerfloor, "-F", "999", "--"}, argv...)
	}},
	// The floor of wallprof at 99 Hz: its timers with an empty program, and
	// an empty program on each tracepoint its default mode uses.
	{Name: "hook-floor-99", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Timerfloor, "-F", "99", "-bpf", "-hooks", "default", "--"}, argv...)
	}, Optional: true},
	// The same for walk mode: its tracepoints are the new threads', the
	// forks', the exits' and the tasks' release (a thread's exit path).
	{Name: "hook-floor-99-walk", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Timerfloor, "-F", "99", "-bpf", "-hooks", "sched_wakeup_new,sched_process_fork,sched_process_exit,sched_process_free", "--"}, argv...)
	}, Optional: true},
	{Name: "timer-bpf-999", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Timerfloor, "-F", "999", "-bpf", "--"}, argv...)
	}, Optional: true},
	{Name: "perf-sched", Wrap: func(e *env, argv []string) []string {
		return append([]string{e.Perf, "record", "-e", "sched:sched_switch", "-g", "-o", e.out("perf2.data"), "--"}, argv...)
	}},
	{Name: "bpftrace", Alongside: func(e *env, workload string) []string {
		// -B line: flush the "attached" line at once although stdout is a pipe.
		return []string{e.Bpftrace, "-B", "line", e.OffcpuBT, workload}
	}, Ready: "offcpu.bt: attached"},
}

// selectConfigs returns the configurations named in list (comma-separated;
// empty: all), with "none" always first since ratios are relative to it.
func selectConfigs(list string) ([]config, error) {
	if list == "" {
		var out []config
		for _, c := range allConfigs {
			if !c.Optional || (c.WithBase && os.Getenv("WALLPROF_BASE") != "") {
				out = append(out, c)
			}
		}
		return out, nil
	}
	want := map[string]bool{"none": true}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []config
	for _, c := range allConfigs {
		if want[c.Name] {
			out = append(out, c)
			delete(want, c.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown configuration %q (known: %s)", n, configNames())
	}
	return out, nil
}

// configNames lists the configurations, the optional ones in brackets.
func configNames() string {
	var names []string
	for _, c := range allConfigs {
		if c.Optional {
			names = append(names, "["+c.Name+"]")
		} else {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ",")
}

// cutConfig is wallprof-99 with its switch program cut at stage n
// (WALLPROF_BENCH_CUT).
func cutConfig(n int) config {
	name := fmt.Sprintf("wallprof-99-cut%d", n)
	return config{Name: name, Wrap: func(e *env, argv []string) []string {
		return append([]string{"env", "WALLPROF_ACCOUNTING=resume", fmt.Sprintf("WALLPROF_BENCH_CUT=%d", n)}, wallprofAt(name, 99)(e, argv)...)
	}, Wallprof: true, Optional: true}
}
