// Command overhead measures what recording costs a workload: it runs each
// bench workload (pingpong: context-switch bound; cpubound: CPU bound) with
// no profiler, under wallprof at 99 and 999 Hz, under perf record (on-CPU
// sampling, and sched_switch tracing as the off-CPU alternative) and next to
// a bpftrace off-CPU script, interleaving the configurations round by round,
// and prints the medians and their ratios to the unprofiled runs.
//
// It is driven by bench/overhead.sh, which builds the binaries; see
// bench/README.md for what each column means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	binDir, offcpu, outDir string
	rounds                 int
	configs, workloads     string
	iters                  iterDefaults
	report                 string
	markdown               bool
	count                  string // perf stat event to count per run, "" for none
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func envStr(name, def string) string {
	if s := os.Getenv(name); s != "" {
		return s
	}
	return def
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.binDir, "bin", "bench/.bin", "`dir` holding pingpong, cpubound and wallprof")
	fs.StringVar(&o.offcpu, "offcpu", "bench/offcpu.bt", "the bpftrace off-CPU `script`")
	fs.StringVar(&o.outDir, "out", "", "`dir` for profiles and results.csv (default: a new temporary dir)")
	fs.IntVar(&o.rounds, "rounds", envInt("ROUNDS", 5), "rounds of interleaved runs (env ROUNDS)")
	fs.StringVar(&o.configs, "configs", os.Getenv("CONFIGS"), "comma-separated configurations (env CONFIGS; default: all but the [bracketed] ones, which run when named, the wallprof-base ones also when WALLPROF_BASE is set): "+configNames())
	fs.StringVar(&o.workloads, "workloads", envStr("WORKLOADS", "pingpong-pinned,pingpong,cpubound"), "comma-separated workloads (env WORKLOADS)")
	fs.IntVar(&o.iters.pingpong, "pingpong-iters", envInt("PINGPONG_ITERS", 100000), "unpinned pingpong round trips (env PINGPONG_ITERS)")
	fs.IntVar(&o.iters.pingpongPinned, "pingpong-pinned-iters", envInt("PINGPONG_PINNED_ITERS", 1000000), "pinned pingpong round trips (env PINGPONG_PINNED_ITERS)")
	fs.IntVar(&o.iters.pingpong150k, "pingpong150k-iters", envInt("PINGPONG150K_ITERS", pingpong150kN), "pingpong150k round trips (env PINGPONG150K_ITERS; a longer run tells a cost at the start from a steady one)")
	fs.IntVar(&o.iters.cpubound, "cpubound-iters", envInt("CPUBOUND_ITERS", 1000000000), "cpubound steps (env CPUBOUND_ITERS)")
	fs.IntVar(&o.iters.flood, "flood-iters", envInt("FLOOD_ITERS", 400000), "flood round trips per pair (env FLOOD_ITERS)")
	fs.StringVar(&o.count, "count", os.Getenv("COUNT"), "also count this perf `event` (e.g. instructions) over every whole command with perf stat (env COUNT; needs hardware counters for instructions)")
	fs.StringVar(&o.report, "report", "", "print the tables of an earlier `results.csv` and exit (several, comma-separated: pooled, rounds paired within each)")
	fs.BoolVar(&o.markdown, "markdown", false, "with -report: as Markdown tables")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.rounds < 1 {
		return nil, errors.New("-rounds must be at least 1")
	}
	return &o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	if o.report != "" {
		if err := reprint(stdout, o.report, o.markdown); err != nil {
			fmt.Fprintln(stderr, "overhead:", err)
			return 1
		}
		return 0
	}
	configs, err := selectConfigs(o.configs)
	if err == nil {
		err = bench(ctx, o, configs, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "overhead:", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, o *options, configs []config, stdout, stderr io.Writer) error {
	var workloads []workload
	for _, label := range strings.Split(o.workloads, ",") {
		w, err := parseWorkload(strings.TrimSpace(label), o.iters)
		if err != nil {
			return err
		}
		workloads = append(workloads, w)
	}
	e, err := setup(o, configs, workloads)
	if err != nil {
		return err
	}
	var results []result
	for _, wl := range workloads {
		if _, err := runWrapped(ctx, wl.outer(wl.argv(o.binDir)), wl.Bin); err != nil { // warm-up, not counted
			return fmt.Errorf("warm-up: %w", err)
		}
		for round := 1; round <= o.rounds; round++ {
			// Each round starts one configuration later than the
			// previous one, so that no configuration always runs in
			// the same place of a round (these VMs drift within a
			// round: a fixed order showed the last configuration
			// ~1% slower on its own).
			for i := range configs {
				c := configs[(i+round-1)%len(configs)]
				r, err := runOne(ctx, e, c, o.binDir, wl)
				if err != nil {
					return fmt.Errorf("%s, %s, round %d: %w", wl.Label, c.Name, round, err)
				}
				r.Config, r.Workload, r.Round = c.Name, wl.Label, round
				fmt.Fprintf(stderr, "%s %-19s round %d/%d: wall %v, cpu %v, tool cpu %v\n", wl.Label, c.Name, round,
					o.rounds, r.W.Elapsed.Round(1e5), r.W.CPU.Round(1e5), r.ToolCPU.Round(1e5))
				results = append(results, r)
			}
		}
		checkChecksums(stderr, results, wl.Label)
	}
	var labels []string
	for _, wl := range workloads {
		labels = append(labels, wl.Label)
	}
	fmt.Fprintf(stdout, "\n%d rounds, interleaved; medians; output in %s\n", o.rounds, e.OutDir)
	if e.Count != "" {
		fmt.Fprintf(stdout, "count: %s over the whole command (perf stat); every run was under perf stat, so compare these times only with each other\n", e.Count)
	}
	fmt.Fprintln(stdout)
	printTables(stdout, labels, configs, results, false)
	if err := writeMarkdown(filepath.Join(e.OutDir, "tables.md"), labels, configs, results); err != nil {
		return err
	}
	return writeCSV(filepath.Join(e.OutDir, "results.csv"), results)
}

func runOne(ctx context.Context, e *env, c config, binDir string, wl workload) (result, error) {
	argv := wl.argv(binDir)
	if e.Count == "" {
		if c.Alongside != nil {
			return runAlongside(ctx, wl.outer(c.Alongside(e, wl.Bin)), wl.outer(argv), c.Ready, wl.Bin, e.out(c.Name+".out"))
		}
		return runWrapped(ctx, wl.outer(c.Wrap(e, argv)), wl.Bin)
	}
	// Counting: perf stat around the whole command; around the tool and
	// the workload each for a tool that runs alongside.
	stat := func(name string, cmd []string) ([]string, string) {
		file := e.out(c.Name + "." + name + ".stat")
		return statArgv(e.Perf, e.Count, file, cmd), file
	}
	var r result
	var err error
	var files []string
	if c.Alongside != nil {
		tool, tf := stat("tool", c.Alongside(e, wl.Bin))
		work, wf := stat("workload", argv)
		files = []string{tf, wf}
		r, err = runAlongside(ctx, wl.outer(tool), wl.outer(work), c.Ready, wl.Bin, e.out(c.Name+".out"))
	} else {
		cmd, f := stat("run", c.Wrap(e, argv))
		files = []string{f}
		r, err = runWrapped(ctx, wl.outer(cmd), wl.Bin)
	}
	if err != nil {
		return r, err
	}
	r.Count, err = readStat(e.Count, files...)
	return r, err
}

// setup checks privileges and tools and creates the output directory.
func setup(o *options, configs []config, workloads []workload) (*env, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("run as root: perf, bpftrace and wallprof need it")
	}
	e := &env{OffcpuBT: o.offcpu, OutDir: o.outDir}
	for _, wl := range workloads {
		bin := filepath.Join(o.binDir, wl.Bin)
		if wl.Cmd != nil {
			bin = wl.Cmd[0]
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("workload binary missing (bench/overhead.sh builds it): %w", err)
		}
		if wl.Pin != pinNone {
			if _, err := exec.LookPath(taskset[0]); err != nil {
				return nil, fmt.Errorf("workload %s: %w", wl.Label, err)
			}
		}
	}
	for _, c := range configs {
		var err error
		switch {
		case c.Wallprof:
			e.Wallprof = filepath.Join(o.binDir, "wallprof")
			if _, serr := os.Stat(e.Wallprof); serr != nil {
				err = fmt.Errorf("wallprof is not built (%s missing): build it with "+
					"'go build -o %s ./cmd/wallprof', or leave it out: CONFIGS=none,perf-99,perf-sched,bpftrace", e.Wallprof, e.Wallprof)
			}
			if err == nil && (c.Name == "top-99" || c.Name == "attach-99") {
				e.AttachSh, err = filepath.Abs("bench/attach.sh")
				if _, serr := os.Stat(e.AttachSh); err == nil && serr != nil {
					err = fmt.Errorf("bench/attach.sh not found: run from the repository's root (bench/overhead.sh does)")
				}
			}
		case c.Base:
			e.WallprofBase = os.Getenv("WALLPROF_BASE")
			if e.WallprofBase == "" {
				err = errors.New("set WALLPROF_BASE to the wallprof binary to compare with (e.g. built from an earlier commit)")
			} else {
				_, err = os.Stat(e.WallprofBase)
			}
		case strings.HasPrefix(c.Name, "perf"):
			e.Perf, err = exec.LookPath("perf")
		case strings.HasPrefix(c.Name, "timer"), strings.HasPrefix(c.Name, "hook-floor"):
			e.Timerfloor = filepath.Join(o.binDir, "timerfloor")
			if _, serr := os.Stat(e.Timerfloor); serr != nil {
				err = fmt.Errorf("timerfloor is not built (%s missing): build it with 'go build -o %s ./bench/cmd/timerfloor'", e.Timerfloor, e.Timerfloor)
			}
		case c.Name == "bpftrace":
			if e.Bpftrace, err = exec.LookPath("bpftrace"); err == nil {
				_, err = os.Stat(o.offcpu)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("configuration %s: %w", c.Name, err)
		}
	}
	if o.count != "" {
		var err error
		if e.Perf, err = exec.LookPath("perf"); err != nil {
			return nil, fmt.Errorf("COUNT=%s needs perf: %w", o.count, err)
		}
		if err := checkCountable(e.Perf, o.count); err != nil {
			return nil, err
		}
		e.Count = o.count
	}
	if e.OutDir == "" {
		dir, err := os.MkdirTemp("", "wallprof-bench-")
		if err != nil {
			return nil, err
		}
		e.OutDir = dir
	}
	return e, os.MkdirAll(e.OutDir, 0o755)
}

// checkChecksums warns if cpubound computed different checksums: a run that
// did not do the same work cannot be compared.
func checkChecksums(stderr io.Writer, results []result, wl string) {
	seen := map[string]bool{}
	for _, r := range results {
		if r.Workload == wl && r.W.Checksum != "" {
			seen[r.W.Checksum] = true
		}
	}
	if len(seen) > 1 {
		fmt.Fprintf(stderr, "overhead: warning: %s printed %d different checksums\n", wl, len(seen))
	}
}
