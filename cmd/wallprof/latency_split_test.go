//go:build linux && amd64

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wallprof/wallprof/internal/latency"
)

type splitTruth struct {
	Count      uint64 `json:"count"`
	WallNs     int64  `json:"wall_ns"`
	RunningNs  int64  `json:"running_ns"`
	RunnableNs int64  `json:"runnable_ns"`
	BlockedNs  int64  `json:"blocked_ns"`
}

// runLatencyOn starts wallprof latency --json on the target (started and
// waiting for SIGUSR1), lets the target run to its exit, checks the output
// against its schema, and returns the report and wallprof's stderr.
func runLatencyOn(t *testing.T, target *exec.Cmd, fn string, flags ...string) (*latency.Report, string) {
	t.Helper()
	wp, stdout, stderr, done := startLatency(t, target.Process.Pid, fn, flags...)
	if err := target.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := target.Wait(); err != nil {
		t.Fatalf("target: %v", err)
	}
	<-done
	if err := wp.Wait(); err != nil {
		t.Fatalf("wallprof latency: %v\n%s", err, stderr.String())
	}
	var rep latency.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Functions) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	schema, err := filepath.Abs(filepath.Join(schemaDir, "wallprof.latency.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsonschema.NewCompiler().Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(stdout.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("the output does not match %s: %v", schema, err)
	}
	return &rep, stderr.String()
}

// eachToolchain runs f as a subtest for the target built, stripped, by the
// installed Go ("local") and by Go 1.22.
func eachToolchain(t *testing.T, f func(t *testing.T, bin string)) {
	for _, tc := range []string{"", "go1.22.12"} {
		name := tc
		if name == "" {
			name = "local"
		}
		t.Run(name, func(t *testing.T) { f(t, latencyTarget(t, true, tc)) })
	}
}

// The split of a call's time into running, runnable and blocked, against
// the program's own truth (doc/latency-split.md): goroutines locked to
// their threads, more of them than CPUs, call main.work (spin 1-4 ms,
// sleep 1-4 ms), and the program sums each call's thread CPU time and run
// queue wait. Every call is split, and wallprof's three shares are within
// 2 points of the program's; by Go 1.26 and 1.22, stripped.
func TestLatencySplit(t *testing.T) {
	requireRecording(t)
	eachToolchain(t, func(t *testing.T, bin string) {
		out := filepath.Join(t.TempDir(), "truth.json")
		target := startTarget(t, bin, "-split", "-calls", "1500", "-goroutines", "4", "-out", out)
		rep, stderr := runLatencyOn(t, target, "main.work")
		var truth splitTruth
		readJSON(t, out, &truth)
		fn := rep.Functions[0]
		sp := fn.Split
		if sp == nil {
			t.Fatalf("no split in the report:\n%s", stderr)
		}
		run, runq, blocked := sp.Shares()
		w := float64(truth.WallNs)
		trun, trunq, tblocked := float64(truth.RunningNs)/w, float64(truth.RunnableNs)/w, float64(truth.BlockedNs)/w
		t.Logf("%d calls, %d split, %d moved; wallprof: running %.1f%% runnable %.1f%% blocked %.1f%% of %v; program: running %.1f%% runnable %.1f%% blocked %.1f%% of %v",
			fn.Count, sp.Calls, sp.Moved, 100*run, 100*runq, 100*blocked, time.Duration(sp.WallNs),
			100*trun, 100*trunq, 100*tblocked, time.Duration(truth.WallNs))
		if fn.Count != truth.Count || sp.Calls != truth.Count || sp.Moved != 0 {
			t.Errorf("%d calls counted, %d split, %d moved; the program made %d on locked threads: want all split", fn.Count, sp.Calls, sp.Moved, truth.Count)
		}
		// Every call sleeps: its goroutine stops running on the way.
		if !sp.SeqKnown || sp.Parked != sp.Calls || sp.Exact.Calls != 0 {
			t.Errorf("parked known %v, %d of %d split calls parked, %d ran throughout; want all parked", sp.SeqKnown, sp.Parked, sp.Calls, sp.Exact.Calls)
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"running", run, trun}, {"runnable", runq, trunq}, {"blocked", blocked, tblocked}} {
			if math.Abs(c.got-c.want) > 0.02 {
				t.Errorf("%s: wallprof %.1f%%, the program %.1f%%: more than 2 points apart", c.name, 100*c.got, 100*c.want)
			}
		}
		var bucketCalls uint64
		for _, b := range sp.Buckets {
			bucketCalls += b.Calls
		}
		if bucketCalls != sp.Calls {
			t.Errorf("the split's buckets hold %d calls, the split %d", bucketCalls, sp.Calls)
		}
		// The text output shows the split per bucket and in all.
		var text bytes.Buffer
		latency.WriteText(&text, fn)
		if !strings.Contains(text.String(), "where the time went: running") || strings.Count(text.String(), "blocked") != len(sp.Buckets)+1 {
			t.Errorf("text output without the split:\n%s", text.String())
		}
	})
}

// Calls that only compute, on locked threads (main.work -nonap): most run
// throughout (the rest were preempted), and those are split with no
// blocked time; the CPU time of all the calls is the program's within 2%.
// (The shares are not compared with the program's: with four threads
// spinning on two shared CPUs, the program's own brackets, wider than the
// probes', catch waits for a CPU that fall just outside the probes: in one
// run 2.8 s of its 7.2 s of run queue wait, over 1,500 calls: mostly at
// the program's own reads of its counters, which are system calls, and
// about 0.3 ms a call at the probes' traps; doc/latency-split.md.)
func TestLatencySplitCompute(t *testing.T) {
	requireRecording(t)
	bin := latencyTarget(t, true, "")
	out := filepath.Join(t.TempDir(), "truth.json")
	target := startTarget(t, bin, "-split", "-nonap", "-calls", "1500", "-goroutines", "4", "-out", out)
	rep, _ := runLatencyOn(t, target, "main.work")
	var truth splitTruth
	readJSON(t, out, &truth)
	sp := rep.Functions[0].Split
	if sp == nil {
		t.Fatal("no split")
	}
	e := sp.Exact
	w := float64(truth.WallNs)
	t.Logf("%d calls split, %d parked (preempted), %d ran throughout: running %.1f%% runnable %.1f%% blocked %.1f%%; program (all calls): running %.1f%% runnable %.1f%% blocked %.1f%%",
		sp.Calls, sp.Parked, e.Calls, 100*float64(e.RunningNs)/float64(e.WallNs), 100*float64(e.RunnableNs)/float64(e.WallNs), 100*float64(e.BlockedNs)/float64(e.WallNs),
		100*float64(truth.RunningNs)/w, 100*float64(truth.RunnableNs)/w, 100*float64(truth.BlockedNs)/w)
	run, runq, blocked := sp.Shares()
	t.Logf("all %d split calls: running %.1f%% runnable %.1f%% blocked %.1f%%; wallprof running %v runnable %v wall %v, program running %v runnable %v wall %v", sp.Calls, 100*run, 100*runq, 100*blocked, time.Duration(sp.RunningNs), time.Duration(sp.RunnableNs), time.Duration(sp.WallNs), time.Duration(truth.RunningNs), time.Duration(truth.RunnableNs), time.Duration(truth.WallNs))
	if sp.Calls != truth.Count || e.Calls < truth.Count/2 || e.WallNs <= 0 {
		t.Fatalf("%d calls split, %d of them ran throughout; the program made %d", sp.Calls, e.Calls, truth.Count)
	}
	if b := float64(e.BlockedNs) / float64(e.WallNs); b > 0.02 {
		t.Errorf("calls that only compute were blocked %.1f%% of the time", 100*b)
	}
	if math.Abs(float64(sp.RunningNs-truth.RunningNs)) > 0.02*float64(truth.RunningNs) {
		t.Errorf("running: wallprof %v, the program %v: more than 2%% apart", time.Duration(sp.RunningNs), time.Duration(truth.RunningNs))
	}
}

// Goroutines that park in the call (main.handle sleeps, unlocked) mostly
// return on another thread: those calls are counted as moved, not split;
// split + moved is every call timed, and every split call is known to
// have parked.
func TestLatencySplitMoved(t *testing.T) {
	requireRecording(t)
	bin := latencyTarget(t, false, "")
	out := filepath.Join(t.TempDir(), "truth.json")
	target := startTarget(t, bin, "-calls", "5000", "-goroutines", "64", "-out", out)
	rep, _ := runLatencyOn(t, target, "main.handle")
	fn := rep.Functions[0]
	if fn.Split == nil {
		t.Fatal("no split in the report")
	}
	sp := fn.Split
	t.Logf("%d calls: %d split (%d parked), %d moved", fn.Count, sp.Calls, sp.Parked, sp.Moved)
	if sp.Calls+sp.Moved != fn.Count || sp.Moved == 0 {
		t.Errorf("%d calls: %d split + %d moved; want the sum, and some moved", fn.Count, sp.Calls, sp.Moved)
	}
	if sp.Parked != sp.Calls || sp.Exact.Calls != 0 {
		t.Errorf("%d split calls, %d parked, %d ran throughout; every call sleeps", sp.Calls, sp.Parked, sp.Exact.Calls)
	}
}

type waitsTruth struct {
	Count   uint64 `json:"count"`
	WallNs  int64  `json:"wall_ns"`
	SpinNs  int64  `json:"spin_ns"`
	ChanNs  int64  `json:"chan_ns"`
	SleepNs int64  `json:"sleep_ns"`
}

// A goroutine that is not locked to a thread calls main.wait: it spins
// (2-6 ms), waits for a timer's channel (2-5 ms) and sleeps (1-4 ms), and
// the program sums the wall time of each part. Every call stops running on
// the way; the states wallprof samples from the goroutine table during the
// calls (every 2 ms, ~5,000 samples: a share's sampling error is under a
// point) give running, "chan receive" and "sleep" within 3 points of the
// parts' shares of the calls' time, and the rest (runnable, the moments
// between the parts) under 3%; by Go 1.26 and 1.22, stripped. One
// goroutine: with the target spinning on every CPU, wallprof's reads wait
// for a CPU until a goroutine stops, and see running ones less often
// (doc/latency-split.md; with two goroutines on this 2-CPU machine,
// running came out 1 to 3 points low).
func TestLatencyWaits(t *testing.T) {
	requireRecording(t)
	eachToolchain(t, func(t *testing.T, bin string) {
		out := filepath.Join(t.TempDir(), "truth.json")
		target := startTarget(t, bin, "-waits", "-calls", "1000", "-goroutines", "1", "-out", out)
		rep, stderr := runLatencyOn(t, target, "main.wait", "--sample-goroutines", "2ms")
		var truth waitsTruth
		readJSON(t, out, &truth)
		fn := rep.Functions[0]
		wr := fn.Waits
		if wr == nil {
			t.Fatalf("no goroutine states in the report:\n%s", stderr)
		}
		got := map[string]float64{}
		for _, s := range wr.States {
			got[s.State] = s.Share
		}
		w := float64(truth.WallNs)
		want := map[string]float64{"running": float64(truth.SpinNs) / w, "chan receive": float64(truth.ChanNs) / w, "sleep": float64(truth.SleepNs) / w}
		t.Logf("%d calls, %d stopped, %d seen in %d samples; wallprof %v (%d samples unread); program: running %.1f%%, chan receive %.1f%%, sleep %.1f%% of %v",
			fn.Count, wr.Calls, wr.Sampled, wr.Samples, wr.States, wr.Unread, 100*want["running"], 100*want["chan receive"], 100*want["sleep"], time.Duration(truth.WallNs))
		if fn.Count != truth.Count || wr.Calls != truth.Count {
			t.Errorf("%d calls counted, %d sent as stopped; the program made %d, each of which sleeps", fn.Count, wr.Calls, truth.Count)
		}
		if wr.Samples < 3000 {
			t.Errorf("only %d samples", wr.Samples)
		}
		rest := 1.0
		for state, share := range want {
			rest -= got[state]
			if math.Abs(got[state]-share) > 0.03 {
				t.Errorf("%s: wallprof %.1f%%, the program %.1f%%: more than 3 points apart", state, 100*got[state], 100*share)
			}
		}
		if rest > 0.03 {
			t.Errorf("%.1f%% of the samples in other states", 100*rest)
		}
		var text bytes.Buffer
		latency.WriteText(&text, fn)
		if !strings.Contains(text.String(), "their goroutine's state during the") || !strings.Contains(text.String(), "chan receive") {
			t.Errorf("text output without the goroutine states:\n%s", text.String())
		}
	})
}

// --slow with --profile: the calls of main.wait that took at least 13 ms
// (its spin, channel wait and sleep add up to 5 to 15 ms, the slowest tenth
// over 13) are written as a
// pprof profile of where their goroutine was when the table was read: its
// stack through runtime.chanrecv while it waited for the timer's channel
// (wait_reason "chan receive"), through time.Sleep while it slept
// ("sleep"), and [running] under main.wait while it spun; every sample is
// under main.wait, and the shares of the three are near the slow calls'
// make-up.
func TestLatencySlowProfile(t *testing.T) {
	requireRecording(t)
	bin := latencyTarget(t, true, "")
	out := filepath.Join(t.TempDir(), "truth.json")
	prof := filepath.Join(t.TempDir(), "slow.pb.gz")
	target := startTarget(t, bin, "-waits", "-calls", "600", "-goroutines", "1", "-out", out)
	rep, stderr := runLatencyOn(t, target, "main.wait", "--sample-goroutines", "2ms", "--slow", "13ms", "--profile", prof)
	if !strings.Contains(stderr, "wrote "+prof) {
		t.Fatalf("no profile written:\n%s", stderr)
	}
	p := readProfile(t, prof)
	by := map[string]int64{}
	var total int64
	for _, s := range p.Samples {
		funcs := stackFuncs(s)
		if !slices.Contains(funcs, "main.wait") {
			t.Errorf("a sample outside main.wait: %v", funcs)
		}
		total += s.Value
		switch {
		case s.Labels["wait_reason"] == "chan receive" && slices.Contains(funcs, "runtime.chanrecv1"):
			by["chan"] += s.Value
		case s.Labels["wait_reason"] == "sleep" && slices.Contains(funcs, "time.Sleep"):
			by["sleep"] += s.Value
		case s.Labels["goroutine_state"] == "running" && slices.Contains(funcs, "main.spinUntil"):
			// On a CPU, with the stack sampled there.
			by["running"] += s.Value
			by["spin"] += s.Value
		case s.Labels["goroutine_state"] == "running" && funcs[len(funcs)-1] == runningOffCPU:
			by["running"] += s.Value
			by["waiting for a CPU"] += s.Value
		default:
			by["other"] += s.Value
		}
	}
	fn := rep.Functions[0]
	var slow int64
	if i := strings.Index(stderr, "wrote "+prof+": "); i >= 0 {
		fmt.Sscanf(stderr[i+len("wrote "+prof+": "):], "%d calls", &slow)
	}
	t.Logf("%d calls, %d of at least 13ms, p90 %v; profile: %v of %v", fn.Count, slow, time.Duration(fn.P90Ns), by, time.Duration(total))
	// Each slow call took 13 to 16 ms: the reads during them, each
	// weighing the mean time between reads, add up to about that.
	if slow < 20 || total < slow*int64(11*time.Millisecond) || total > slow*int64(18*time.Millisecond) {
		t.Fatalf("the profile holds %v for %d slow calls of 13-16 ms", time.Duration(total), slow)
	}
	for _, k := range []string{"chan", "sleep", "running"} {
		if share := float64(by[k]) / float64(total); share < 0.15 {
			t.Errorf("%s: %.1f%% of the slow calls' samples, want a real share (%v)", k, 100*share, by)
		}
	}
	if share := float64(by["other"]) / float64(total); share > 0.05 {
		t.Errorf("%.1f%% of the samples neither running nor in the channel wait or the sleep", 100*share)
	}
	// The goroutine ran in main.spinUntil, on a CPU of its own (GOMAXPROCS
	// 3, one goroutine, two CPUs): the running time has its on-CPU stacks,
	// but for the time its thread waited for a CPU (other tests, other
	// tenants) or sampling noise. No "[running]" without a stack.
	if share := float64(by["spin"]) / float64(by["running"]); share < 0.6 {
		t.Errorf("%.1f%% of the running time has an on-CPU stack in main.spinUntil, want most (%v)\n%s", 100*share, by, stderr)
	}
}
