//go:build linux && amd64

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/latency"
)

// latencyTarget builds internal/latency/testdata/target (a module of its
// own, go 1.22, so that older toolchains build it) with the Go toolchain
// given ("" for the installed one, else one GOTOOLCHAIN downloads, such as
// "go1.22.12"), stripped with -s -w when strip is set, and returns its path.
// Builds are cached across test runs (groundtruth.BuildGo).
func latencyTarget(t *testing.T, strip bool, toolchain string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "internal", "latency", "testdata", "target"))
	if err != nil {
		t.Fatal(err)
	}
	return groundtruth.BuildGo(t, dir, strip, toolchain)
}

// startTarget starts the target and waits until it waits for SIGUSR1.
func startTarget(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(errPipe).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("target said %q (%v), want ready", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, errPipe) }()
	return cmd
}

// A function that does not exist, and one inlined everywhere, are refused
// with one sentence and exit 1 (no privileges needed: nothing is attached).
func TestLatencyRefuses(t *testing.T) {
	bin := latencyTarget(t, true, "")
	target := startTarget(t, bin)
	pid := strconv.Itoa(target.Process.Pid)
	for fn, want := range map[string]string{
		"main.nope":   "wallprof latency: no function main.nope in the program.\n",
		"main.double": "wallprof latency: main.double is inlined everywhere it is called (into main.main), and inlined calls cannot be measured.\n",
	} {
		code, stdout, stderr := runCmd("latency", "-p", pid, fn)
		if code != exitError || stdout != "" || stderr != want {
			t.Errorf("latency %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", fn, code, stdout, stderr, want)
		}
	}
}

type latencyTruth struct {
	Count  uint64 `json:"count"`
	Panics uint64 `json:"panics"`
	P50Ns  int64  `json:"p50_ns"`
	P90Ns  int64  `json:"p90_ns"`
	P99Ns  int64  `json:"p99_ns"`
	MaxNs  int64  `json:"max_ns"`
	// -bench: nanoseconds per call of main.trivial.
	BenchNs float64 `json:"bench_ns_per_call"`
}

// latencyToolchains are the Go toolchains the ground truth is built with
// besides the installed one (Go 1.26): the latest patch release of each
// older minor version the proxy serves. The go command downloads them
// through the module proxy on first use (GOTOOLCHAIN), into the module
// cache, so CI needs nothing installed beforehand.
var latencyToolchains = []string{"go1.22.12", "go1.23.12", "go1.24.13", "go1.25.14"}

// The ground truth: calls of main.handle over 256 goroutines, sleeping 1
// to 10 ms, one in seven recursing through big frames (the runtime grows
// and copies the stack mid-call), one in a thousand panicking. Every call
// that returns is counted once, and the percentiles agree within 2% with
// the program's own timing; stripped and not, built by the installed Go
// (100,000 calls) and by Go 1.22 to 1.25 (20,000 calls each, to keep the
// test short).
// starvedP99 is a p99 of the ground truth's own timing past which the
// host, not the probes, set the calls' durations (see TestLatencyGroundTruth).
const starvedP99 = 200 * time.Millisecond

// percentileGaps says which of the one function's p50, p90 and p99 lie
// out of the ground truth's bounds: within 2%, or below by at most 2% and
// one probe round trip (trap). None when there is not one function.
func percentileGaps(fns []latency.FuncReport, truth latencyTruth, trap time.Duration) []string {
	if len(fns) != 1 {
		return nil
	}
	fn := fns[0]
	var out []string
	for _, c := range []struct {
		name      string
		got, want int64
	}{{"p50", fn.P50Ns, truth.P50Ns}, {"p90", fn.P90Ns, truth.P90Ns}, {"p99", fn.P99Ns, truth.P99Ns}} {
		diff := float64(c.got - c.want)
		if math.Abs(diff) <= 0.02*float64(c.want) || (diff < 0 && -diff <= 0.02*float64(c.want)+float64(trap)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: wallprof %v, the program %v: more than 2%% apart (a probe round trip: %v)", c.name, time.Duration(c.got), time.Duration(c.want), trap))
	}
	return out
}

func TestLatencyGroundTruth(t *testing.T) {
	requireRecording(t)
	// The program's timing of a call holds the probes' traps (the entry
	// probe's after the program's first clock read, the return probe's
	// before its second); wallprof's holds neither: its clock reads are
	// inside them. The traps cost 10-30 µs a call here, more in a busy
	// hour, against 2.5 ms calls at p50: a program's percentile may exceed
	// wallprof's by 2% and one probe round trip, measured now.
	trap := probeRoundTrip(t)
	type variant struct {
		toolchain string
		strip     bool
		calls     int
	}
	var variants []variant
	for _, tc := range append([]string{""}, latencyToolchains...) {
		calls := 100000
		if tc != "" {
			calls = 20000
		}
		for _, strip := range []bool{false, true} {
			variants = append(variants, variant{tc, strip, calls})
		}
	}
	for _, v := range variants {
		name := v.toolchain
		if name == "" {
			name = "local"
		}
		t.Run(fmt.Sprintf("%s/stripped=%v", name, v.strip), func(t *testing.T) {
			bin := latencyTarget(t, v.strip, v.toolchain)
			var truth latencyTruth
			var rep latency.Report
			// A host that stalls the program (a call sleeps at most 10 ms;
			// its p99 is 18-40 ms here, and once in a CI run 650 ms, its
			// p50 doubled) stretches the gap between the program's clock
			// reads and the probes past the tolerance below: such a run
			// judges nothing, and is made once more.
			for try := 0; ; try++ {
				out := filepath.Join(t.TempDir(), "truth.json")
				target := startTarget(t, bin, "-calls", strconv.Itoa(v.calls), "-goroutines", "256", "-out", out)
				wp, stdout, stderr, done := startLatency(t, target.Process.Pid, "main.handle")
				start := time.Now()
				if err := target.Process.Signal(syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
				if err := target.Wait(); err != nil {
					t.Fatalf("target: %v (crashed under the probes?)", err)
				}
				took := time.Since(start)
				<-done
				if err := wp.Wait(); err != nil {
					t.Fatalf("wallprof latency: %v\n%s", err, stderr.String())
				}
				t.Logf("%d calls in %v; %s", v.calls, took.Round(time.Millisecond), strings.TrimSpace(stderr.String()))
				truth = latencyTruth{}
				readJSON(t, out, &truth)
				rep = latency.Report{}
				if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
				}
				if try == 0 && time.Duration(truth.P99Ns) > starvedP99 {
					t.Logf("the program's own p99 was %v (a call sleeps at most 10 ms): the host stalled it; once more", time.Duration(truth.P99Ns))
					continue
				}
				// Three subtests in ~180 on 2026-11-27 (the test alone
				// and in the whole suite) had wallprof's p50 3.0-3.7%
				// below the program's, ~3 probe round trips, where the
				// others were within 1.2%: a busy moment of the host. A
				// percentile out of bounds is measured once more; an
				// error of wallprof's shows twice.
				if try == 0 && len(percentileGaps(rep.Functions, truth, trap)) > 0 {
					t.Logf("percentiles out of bounds (%s); once more", strings.Join(percentileGaps(rep.Functions, truth, trap), "; "))
					continue
				}
				break
			}
			if rep.Format != latency.Format || len(rep.Functions) != 1 || !rep.TargetExited {
				t.Fatalf("report: format %q, %d functions, target exited %v", rep.Format, len(rep.Functions), rep.TargetExited)
			}
			if v.toolchain != "" && rep.GoVersion != v.toolchain {
				t.Errorf("report says Go %q, the target was built by %s", rep.GoVersion, v.toolchain)
			}
			fn := rep.Functions[0]
			t.Logf("wallprof: count %d p50 %v p90 %v p99 %v max %v; nested %d, abandoned %d, g reused %d, unmatched %d, open at the end %d; program: count %d p50 %v p90 %v p99 %v max %v, %d panics",
				fn.Count, time.Duration(fn.P50Ns), time.Duration(fn.P90Ns), time.Duration(fn.P99Ns), time.Duration(fn.MaxNs),
				fn.Nested, fn.Abandoned, fn.GReused, fn.Unmatched, rep.Cost.OpenCallsAtEnd,
				truth.Count, time.Duration(truth.P50Ns), time.Duration(truth.P90Ns), time.Duration(truth.P99Ns), time.Duration(truth.MaxNs), truth.Panics)
			if fn.Count != truth.Count {
				t.Errorf("wallprof counted %d calls, the program made %d that returned", fn.Count, truth.Count)
			}
			if fn.Abandoned+uint64(rep.Cost.OpenCallsAtEnd) != truth.Panics {
				t.Errorf("abandoned %d + open at the end %d, want the %d panics", fn.Abandoned, rep.Cost.OpenCallsAtEnd, truth.Panics)
			}
			if fn.Unmatched != 0 || fn.ReadErrors != 0 {
				t.Errorf("unmatched returns %d, read errors %d; want none", fn.Unmatched, fn.ReadErrors)
			}
			if fn.Nested == 0 {
				t.Error("no nested call: the recursion was not seen")
			}
			for _, gap := range percentileGaps(rep.Functions, truth, trap) {
				t.Error(gap)
			}
			// The program's own timing of a call starts before the call and
			// ends after it: the longest call it saw may include a
			// preemption just before or after, which the probes do not.
			if float64(fn.MaxNs) > 1.02*float64(truth.MaxNs) {
				t.Errorf("max: wallprof %v, longer than the program's %v", time.Duration(fn.MaxNs), time.Duration(truth.MaxNs))
			}
		})
	}
}

// probeRoundTrip measures what the entry and return probes add to a call
// of a function that does nothing: the target's -bench loop of main.trivial
// with wallprof latency on it, less the same loop without (the median of
// three of each, interleaved).
func probeRoundTrip(t *testing.T) time.Duration {
	t.Helper()
	bin := latencyTarget(t, true, "")
	const calls = 20000
	bench := func(probed bool) float64 {
		out := filepath.Join(t.TempDir(), "bench.json")
		target := startTarget(t, bin, "-bench", strconv.Itoa(calls), "-out", out)
		var wp *exec.Cmd
		var done chan struct{}
		var stderr *bytes.Buffer
		if probed {
			wp, _, stderr, done = startLatency(t, target.Process.Pid, "main.trivial")
		}
		if err := target.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if err := target.Wait(); err != nil {
			t.Fatalf("target: %v", err)
		}
		if probed {
			<-done
			if err := wp.Wait(); err != nil {
				t.Fatalf("wallprof latency: %v\n%s", err, stderr.String())
			}
		}
		var tr latencyTruth
		readJSON(t, out, &tr)
		return tr.BenchNs
	}
	var with, without []float64
	for range 3 {
		with = append(with, bench(true))
		without = append(without, bench(false))
	}
	slices.Sort(with)
	slices.Sort(without)
	d := time.Duration(max(with[1]-without[1], 0))
	t.Logf("a probe round trip: %v a call (%.0f ns with the probes, %.0f without)", d, with[1], without[1])
	return d
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// A native function, libc:usleep, in a C program that times its own calls:
// every call counted, percentiles within 2%.
func TestLatencyNative(t *testing.T) {
	requireRecording(t)
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc)")
	}
	bin := filepath.Join(t.TempDir(), "native")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "../../internal/latency/testdata/native/main.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	var truthOut bytes.Buffer
	target := exec.Command(bin, "1000")
	target.Stdout = &truthOut
	errPipe, _ := target.StderrPipe()
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Process.Kill() })
	if line, _ := bufio.NewReader(errPipe).ReadString('\n'); line != "ready\n" {
		t.Fatalf("target said %q", line)
	}
	wp := exec.Command(wallprofBin(t), "latency", "-p", strconv.Itoa(target.Process.Pid), "--json", "libc:usleep")
	var stdout bytes.Buffer
	wp.Stdout = &stdout
	wpErr, _ := wp.StderrPipe()
	if err := wp.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(wpErr)
	if line, _ := r.ReadString('\n'); !strings.Contains(line, "probes on 1 functions") {
		_ = wp.Process.Kill()
		t.Fatalf("wallprof latency: %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	_ = target.Process.Signal(syscall.SIGUSR1)
	if err := target.Wait(); err != nil {
		t.Fatalf("target: %v", err)
	}
	if err := wp.Wait(); err != nil {
		t.Fatalf("wallprof latency: %v", err)
	}
	var truth latencyTruth
	if err := json.Unmarshal(truthOut.Bytes(), &truth); err != nil {
		t.Fatalf("target output %q: %v", truthOut.String(), err)
	}
	var rep latency.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Functions) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	fn := rep.Functions[0]
	t.Logf("wallprof: count %d p50 %v p90 %v p99 %v; program: count %d p50 %v p90 %v p99 %v", fn.Count,
		time.Duration(fn.P50Ns), time.Duration(fn.P90Ns), time.Duration(fn.P99Ns),
		truth.Count, time.Duration(truth.P50Ns), time.Duration(truth.P90Ns), time.Duration(truth.P99Ns))
	if fn.Count != truth.Count || fn.Unmatched != 0 {
		t.Errorf("counted %d calls (%d unmatched returns), the program made %d", fn.Count, fn.Unmatched, truth.Count)
	}
	// A native call stays on its thread: every call is split, and usleep
	// hardly runs.
	if sp := fn.Split; sp == nil || sp.Calls != fn.Count || sp.Moved != 0 {
		t.Errorf("split %+v of %d calls; want every call split", sp, fn.Count)
	} else if run, runq, blocked := sp.Shares(); run > 0.05 || blocked < 0.5 {
		t.Errorf("usleep: running %.1f%%, runnable %.1f%%, blocked %.1f%%; want mostly blocked", 100*run, 100*runq, 100*blocked)
	} else {
		t.Logf("usleep: running %.1f%%, runnable %.1f%%, blocked %.1f%%", 100*run, 100*runq, 100*blocked)
	}
	// The program times each call from outside: its interval holds the
	// probes' (a few µs) and, on a busy host, any preemption between its
	// clock read and the call (CI: p50 40 µs, 2.6%, longer than wallprof's,
	// p90 and p99 within 0.05%). So wallprof may be shorter by 3%, and
	// longer only by its bucket's half width (0.8%) and rounding.
	for _, c := range [][2]int64{{fn.P50Ns, truth.P50Ns}, {fn.P90Ns, truth.P90Ns}, {fn.P99Ns, truth.P99Ns}} {
		if d := float64(c[0]-c[1]) / float64(c[1]); d > 0.01 || d < -0.03 {
			t.Errorf("wallprof %v, the program %v: %+.1f%%, want within -3%% and +1%%", time.Duration(c[0]), time.Duration(c[1]), 100*d)
		}
	}
}

// startLatency starts 'wallprof latency --json FN' on pid and returns once
// its probes are in place: the command, its stdout, its stderr (complete
// once done is closed).
func startLatency(t *testing.T, pid int, fn string, flags ...string) (wp *exec.Cmd, stdout, stderr *bytes.Buffer, done chan struct{}) {
	t.Helper()
	args := append([]string{"latency", "-p", strconv.Itoa(pid), "--json"}, flags...)
	wp = exec.Command(wallprofBin(t), append(args, fn)...)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	wp.Stdout = stdout
	errPipe, _ := wp.StderrPipe()
	if err := wp.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(errPipe)
	line, _ := r.ReadString('\n')
	if !strings.Contains(line, "probes on 1 functions") {
		_ = wp.Process.Kill()
		t.Fatalf("wallprof latency: %q", line)
	}
	stderr.WriteString(line)
	done = make(chan struct{})
	go func() { _, _ = io.Copy(stderr, r); close(done) }()
	return wp, stdout, stderr, done
}
