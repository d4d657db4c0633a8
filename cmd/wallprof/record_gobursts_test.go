package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

var burstsFreq = flag.String("bursts-freq", "", "TestRecordGoBursts: record at this -F instead of the default rate")

// burstComputeFuncs are the gogt --bursts functions that burn CPU.
var burstComputeFuncs = []string{"main.burstCompute", "main.crowdCompute"}

// TestRecordGoBursts records the Go ground-truth workload in its --bursts
// mode, whose goroutines compute, sleep, wait on a channel and read a pipe
// in phases of 1–5 ms, shorter than the default sampling period, with more
// goroutines runnable than there are CPUs; at the default rate, built
// normally and stripped. The goroutine view must give every phase its
// share of its group's time within 2 points of what the workload measured;
// the thread view must give the compute functions their share of the
// process's CPU time, and leave kernel functions where threads block
// (do_nanosleep, futex_wait, ep_poll, pipe_read) at most 0.5% of the
// on-CPU time: short bursts' CPU time went there before on-CPU time was
// credited only to timer samples. (Where a preempted thread switches out,
// irqentry_exit_to_user_mode, a timer that fired with interrupts off is
// taken as well, more so under load, as perf's is: TestRecordAgreesWithPerf
// compares those with perf.) The recording lasts 16 s: a phase's error
// is the noise of about 800 snapshots (standard deviation 0.62 point over
// 192 phases of 8 s recordings, largest 1.92; one CI run's 2.12 failed), so
// 2 points is about 4.5 standard deviations. -bursts-freq records at another
// rate (go test -run TestRecordGoBursts ./cmd/wallprof -args -bursts-freq 999).
func TestRecordGoBursts(t *testing.T) {
	requireRecording(t)
	dir := groundtruth.WorkloadDir(t, "gogt")
	for _, v := range []struct {
		name     string
		stripped bool
	}{{"local", false}, {"local-stripped", true}} {
		t.Run(v.name, func(t *testing.T) {
			bin := groundtruth.BuildGo(t, dir, v.stripped, "")
			tmp := t.TempDir()
			out, truthPath := filepath.Join(tmp, "bursts.pb.gz"), filepath.Join(tmp, "truth.json")
			args := []string{"record", "-o", out}
			if *burstsFreq != "" {
				args = append(args, "-F", *burstsFreq)
			}
			args = append(args, "--", bin, "--bursts", "--truth", truthPath, "--duration", "16s")
			code, stderr := wallprof(t, args...)
			if code != 0 {
				t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
			}
			truth, err := groundtruth.ReadTruth(truthPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := truth.Validate(); err != nil {
				t.Fatalf("truth: %v", err)
			}
			if truth.Mode != "bursts" || truth.Process == nil {
				t.Fatalf("truth of mode %q, process %+v; want bursts", truth.Mode, truth.Process)
			}
			p := readProfile(t, out)
			if err := p.Validate(); err != nil {
				t.Errorf("invariant: %v", err)
			}
			checkAccounting(t, p)
			if p.GoInfo == nil || len(p.Goroutines) == 0 {
				t.Fatalf("no goroutine view:\n%s", stderr)
			}
			t.Logf("%s at %v: %d snapshots every %s, up to %d goroutines, %d inconsistent reads dropped, %d failed; process CPU %v over %v, run delay %v (truth)",
				p.GoInfo.Version, time.Duration(p.Period), p.GoInfo.Snapshots, p.GoInfo.Interval, p.GoInfo.MaxGoroutines, p.GoInfo.Dropped, p.GoInfo.Failed,
				time.Duration(truth.Process.CPUNS), time.Duration(truth.Process.WallNS), time.Duration(truth.Process.RunDelayNS))
			checkCoverage(t, p, stderr)
			checkBurstPhases(t, p, truth)
			checkBurstCPU(t, p, truth)
		})
	}
}

// gstateTimes is goroutine time by state, with the waiting part by reason.
type gstateTimes struct {
	total   int64
	state   [profile.NumGStates]int64
	reasons map[string]int64
}

func (a *gstateTimes) add(g *profile.GoSample) {
	if a.reasons == nil {
		a.reasons = map[string]int64{}
	}
	a.total += g.Value
	a.state[g.State] += g.Value
	if g.State == profile.GWaiting {
		a.reasons[g.WaitReason] += g.Value
	}
}

func (a *gstateTimes) String() string {
	share := func(v int64) float64 { return 100 * float64(v) / float64(max(a.total, 1)) }
	return fmt.Sprintf("running %5.1f%% runnable %5.1f%% waiting %5.1f%% [%s]", share(a.state[profile.GRunning]),
		share(a.state[profile.GRunnable]), share(a.state[profile.GWaiting]), reasons(a.reasons, max(a.total, 1)))
}

// checkBurstPhases compares, per goroutine group of the truth, each phase's
// share of the group's goroutine time in its phases (the time whose stack
// has the phase's function) with its share of the wall time the workload
// measured in them, and each group's share of all the groups' time.
func checkBurstPhases(t *testing.T, p *profile.Profile, truth *groundtruth.Truth) {
	t.Helper()
	groups := map[string]*gstateTimes{}
	phases := map[string]map[string]*gstateTimes{}
	var profTotal, truthTotal int64
	for _, g := range truth.Groups {
		c := creatorOf(g)
		groups[c] = &gstateTimes{}
		phases[c] = map[string]*gstateTimes{}
		for name := range g.Phases {
			phases[c][name] = &gstateTimes{}
		}
		truthTotal += g.WallNS
	}
	for _, g := range p.Goroutines {
		a := groups[g.CreatedBy]
		if a == nil {
			continue
		}
		a.add(g)
		profTotal += g.Value
		for name, ph := range phases[g.CreatedBy] {
			if goStackHas(g, name) {
				ph.add(g)
			}
		}
	}
	if profTotal == 0 {
		t.Fatal("no goroutine time for any group")
	}
	share := func(part, whole int64) float64 { return 100 * float64(part) / float64(whole) }
	for _, g := range truth.Groups {
		c := creatorOf(g)
		a := groups[c]
		got, want := share(a.total, profTotal), share(g.WallNS, truthTotal)
		t.Logf("group %-14s %7.2fs share %5.1f%% truth %5.1f%% error %+5.2f points; %v", g.Name, time.Duration(a.total).Seconds(), got, want, got-want, a)
		if d := got - want; d > tolerancePoints || d < -tolerancePoints {
			t.Errorf("group %s: %.1f%% of the goroutines' time, the workload measured %.1f%%", g.Name, got, want)
		}
		if a.total == 0 {
			t.Errorf("group %s: no goroutine time", g.Name)
			continue
		}
		// A phase's share of the group's time in its phases: the loop
		// between phases (the workload's bookkeeping, and reading the CPU
		// clock around compute phases) is in none, for the workload and
		// for the profile.
		var onPhases, truthPhases int64
		for name, ph := range phases[c] {
			onPhases += ph.total
			truthPhases += g.Phases[name].WallNS
		}
		for _, name := range keysOf(g.Phases) {
			ph := phases[c][name]
			got, want := share(ph.total, onPhases), share(g.Phases[name].WallNS, truthPhases)
			t.Logf("  phase %-18s %7.2fs share %5.1f%% truth %5.1f%% error %+5.2f points; %v", name, time.Duration(ph.total).Seconds(), got, want, got-want, ph)
			if d := got - want; d > tolerancePoints || d < -tolerancePoints {
				t.Errorf("%s: phase %s has %.1f%% of the group's goroutine time in its phases, the workload measured %.1f%% of their wall time", g.Name, name, got, want)
			}
		}
		if rest := a.total - onPhases; len(g.Phases) > 1 {
			t.Logf("  (in none of its phases: %v, %.1f%%; the workload measured %.1f%%)", time.Duration(rest), share(rest, a.total),
				share(g.WallNS-truthPhases, g.WallNS))
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// burstPhaseOf names the gogt --bursts phase function on a sample's
// stack, or "no phase".
func burstPhaseOf(s *profile.Sample) string {
	for _, fn := range []string{"main.burstCompute", "main.burstSleep", "main.burstChan", "main.burstPipe",
		"main.burstFeeder", "main.burstWriter", "main.crowdCompute", "main.crowdSleep"} {
		if stackHas(s, fn) {
			return fn
		}
	}
	return "no phase"
}

// checkBurstCPU checks the thread view: the compute phases' share of the
// process's on-CPU time against the CPU time the workload measured for
// them, and no more than 0.5% of on-CPU time on a kernel function where
// threads block.
func checkBurstCPU(t *testing.T, p *profile.Profile, truth *groundtruth.Truth) {
	t.Helper()
	var exact time.Duration
	for _, th := range p.Threads {
		exact += th.Time[profile.OnCPU]
	}
	var cpu, waiting time.Duration
	compute := map[string]time.Duration{} // by compute function, and "" for any
	leaves := map[string]time.Duration{}
	waitingLeaves := map[string]time.Duration{} // by leaf and the phase on the stack
	for _, s := range p.Samples {
		if s.State != profile.OnCPU {
			continue
		}
		v := time.Duration(s.Value)
		cpu += v
		for _, fn := range burstComputeFuncs {
			if stackHas(s, fn) {
				compute[fn] += v
				compute[""] += v
				break
			}
		}
		leaf := "(no stack)"
		if len(s.Stack) > 0 && len(s.Stack[0].Frames) > 0 {
			leaf = s.Stack[0].Frames[0].Function
			if m := s.Stack[0].Mapping; m != nil && m.Kernel && symbolize.IsKernelBlock(leaf) {
				waiting += v
				waitingLeaves[leaf+" in "+burstPhaseOf(s)] += v
			}
		}
		leaves[leaf] += v
	}
	if cpu == 0 {
		t.Fatal("no on-CPU samples")
	}
	t.Logf("thread view: on-CPU %v in samples (exact %v); the workload measured %v", cpu, exact, time.Duration(truth.Process.CPUNS))
	truthCompute := map[string]time.Duration{}
	for _, fn := range burstComputeFuncs {
		ph, n := truth.PhaseTotal(fn)
		if n == 0 || ph.CPUNS == 0 {
			t.Fatalf("the truth has no CPU time for %s", fn)
		}
		truthCompute[fn] += ph.CPU()
		truthCompute[""] += ph.CPU()
	}
	// The compute functions' share of the process's on-CPU time against
	// the CPU time the workload measured in them. Each one's own share is
	// logged, not checked: it is the share of the timer samples that caught
	// it, about 2,700 at 99 Hz on two CPUs in 16 s, so its standard error
	// is near 0.7 point (burstCompute's 14%), and runs 2 points off by
	// chance alone would fail now and then.
	share := func(part, whole time.Duration) float64 { return 100 * float64(part) / float64(whole) }
	for _, fn := range append([]string{""}, burstComputeFuncs...) {
		name := fn
		if fn == "" {
			name = "compute phases"
		}
		got, want := share(compute[fn], cpu), share(truthCompute[fn], truth.Process.CPU())
		t.Logf("  %-18s on-CPU %-13v %5.1f%% of it, truth %-13v %5.1f%%, error %+.2f points", name,
			compute[fn].Round(time.Microsecond), got, truthCompute[fn].Round(time.Microsecond), want, got-want)
		if d := got - want; fn == "" && (d > tolerancePoints || d < -tolerancePoints) {
			t.Errorf("%s: %.1f%% of the process's on-CPU time, the workload measured %.1f%%", name, got, want)
		}
	}
	t.Logf("on-CPU time on kernel waiting functions as leaf: %v = %.2f%% [%s]; top on-CPU leaves: %s",
		waiting, share(waiting, cpu), topDurations(waitingLeaves, cpu, 10), topDurations(leaves, cpu, 8))
	if waiting > cpu/200 {
		t.Errorf("%v (%.1f%%) of on-CPU time on kernel functions where threads wait: %s", waiting, share(waiting, cpu), topDurations(waitingLeaves, cpu, 10))
	}
}

// topDurations formats the n largest values of m as shares of total.
func topDurations(m map[string]time.Duration, total time.Duration, n int) string {
	keys := keysOf(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var parts []string
	for i, k := range keys {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f%%", k, 100*float64(m[k])/float64(total)))
	}
	return strings.Join(parts, ", ")
}
