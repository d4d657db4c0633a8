package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// requireRecording skips a test that needs to record when this machine
// cannot (not root, no BTF, old kernel), but fails it under CI=true: CI runs
// as root and must exercise the recorder.
func requireRecording(t *testing.T) {
	t.Helper()
	if msg := preflight(); msg != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but recording is impossible here: %s", msg)
		}
		t.Skipf("cannot record here: %s", msg)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// wallprofBin builds the command once per test run.
func wallprofBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wallprof-test-bin")
		if err != nil {
			buildErr = err
			return
		}
		// Readable by all: a test runs it as an unprivileged user.
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "wallprof")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// wallprof runs the built command and returns its exit code and stderr.
func wallprof(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(wallprofBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run wallprof: %v", err)
	}
	return code, stderr.String()
}

func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	p, err := present.ReadProfileFile(path)
	if err != nil {
		t.Fatalf("read profile: %v", err)
	}
	return p
}

// stackHas reports whether a sample's stack contains function fn.
func stackHas(s *profile.Sample, fn string) bool {
	for _, l := range s.Stack {
		for _, f := range l.Frames {
			if f.Function == fn {
				return true
			}
		}
	}
	return false
}

// phaseTimes sums, for one thread, the sampled time whose stack contains fn,
// by state.
func phaseTimes(p *profile.Profile, tid int, fn string) [profile.NumStates]time.Duration {
	var out [profile.NumStates]time.Duration
	for _, s := range p.Samples {
		if s.TID == tid && stackHas(s, fn) {
			out[s.State] += time.Duration(s.Value)
		}
	}
	return out
}

func findThread(p *profile.Profile, tid int) *profile.Thread {
	for _, th := range p.Threads {
		if th.TID == tid {
			return th
		}
	}
	return nil
}

// blocking are the phases of the C workload that block; the others only
// compute (and wait for a CPU).
var blocking = map[string]bool{"do_sleep": true, "read_pipe": true, "feed_pipe": true,
	"wait_cond": true, "stage_wait": true,
	// --bursts
	"serve_sleep": true, "serve_wait": true, "feed_replies": true, "crowd_nap": true, "crowd_wait": true}

// tolerancePoints is the accuracy the recorder promises: each phase's share
// of its thread's time within 2 percentage points of the measured truth.
const tolerancePoints = 2.0

// checkPhases compares every phase of every truth thread with the profile:
// its wall share and its on-CPU, runnable and blocked shares, within
// tolerancePoints.
func checkPhases(t *testing.T, p *profile.Profile, truth *groundtruth.Truth) {
	t.Helper()
	checkPhasesWithin(t, p, truth, tolerancePoints)
}

// phaseError is one measure of one phase: the profile's share of its
// thread's lifetime against the truth's, in percentage points.
type phaseError struct {
	key      string // thread/phase measure, e.g. "server/serve_sleep off-CPU"
	tid      int
	got, err float64 // the profile's share, and its error
	// slack is the share of the thread's CPU time that no timer sample
	// caught ([on-CPU, not sampled]): it belongs to some phase, unknown
	// which, so a phase's wall and on-CPU shares may fall short by it.
	slack float64
	// stolen is the share of the thread's time that the hypervisor took
	// while it held a CPU (steal, which the workload measures: its phases'
	// Stolen): the walk counts it blocked, where the thread blocked next
	// (doc/recorder.md), so any of its phase measures may be off by it.
	stolen float64
	msg    string
}

// unsampledTimes is, per thread, its on-CPU time that no timer sample caught.
func unsampledTimes(p *profile.Profile) map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, s := range p.Samples {
		if s.State == profile.OnCPU && stackHas(s, collect.UnsampledFunction) {
			out[s.TID] += time.Duration(s.Value)
		}
	}
	return out
}

// phaseErrors compares every phase of every truth thread with the profile:
// its wall share and its on-CPU, runnable and blocked shares. A thread
// missing from the profile is an error.
func phaseErrors(p *profile.Profile, truth *groundtruth.Truth) ([]phaseError, error) {
	var out []phaseError
	unsampled := unsampledTimes(p)
	for _, tt := range truth.Threads {
		th := findThread(p, tt.TID)
		if th == nil {
			return nil, fmt.Errorf("thread %d (%s) is missing from the profile", tt.TID, tt.Name)
		}
		life := th.Lifetime().Seconds()
		var stolen time.Duration
		for _, ph := range tt.Phases {
			stolen += ph.Stolen()
		}
		for _, name := range tt.PhaseNames() {
			ph := tt.Phases[name]
			got := phaseTimes(p, tt.TID, name)
			var wall time.Duration
			for _, d := range got {
				wall += d
			}
			blocked := got[profile.Sleeping] + got[profile.Disk] + got[profile.Other]
			type check struct {
				what      string
				got, want time.Duration
			}
			checks := []check{{"wall", wall, ph.Wall()}, {"on-CPU", got[profile.OnCPU], ph.CPU()}}
			if blocking[name] {
				// schedstat's run_delay, the workload's only measure of
				// runnable time, also counts the time a blocked thread
				// stays on the run queue under EEVDF's delayed dequeue
				// (Linux 6.12+), so for a phase that blocks only the
				// off-CPU total is ground truth.
				checks = append(checks, check{"off-CPU", got[profile.Runnable] + blocked, ph.Wall() - ph.CPU()})
			} else {
				checks = append(checks, check{"runnable", got[profile.Runnable], ph.RunDelay()},
					check{"blocked", blocked, ph.Blocked()})
			}
			for _, c := range checks {
				gp, wp := 100*c.got.Seconds()/life, 100*c.want.Seconds()/life
				key := fmt.Sprintf("%s/%s %s", tt.Name, name, c.what)
				var slack float64
				if c.what == "wall" || c.what == "on-CPU" {
					slack = 100 * unsampled[tt.TID].Seconds() / life
				}
				out = append(out, phaseError{key: key, tid: tt.TID, got: gp, err: gp - wp, slack: slack, stolen: 100 * stolen.Seconds() / life,
					msg: fmt.Sprintf("%s: profile %.1f%% (%v), truth %.1f%% (%v) of %v", key, gp,
						c.got.Round(time.Millisecond), wp, c.want.Round(time.Millisecond), th.Lifetime().Round(time.Millisecond))})
			}
		}
	}
	return out, nil
}

// checkPhasesWithin is checkPhases with a tolerance in percentage points.
func checkPhasesWithin(t *testing.T, p *profile.Profile, truth *groundtruth.Truth, tol float64) {
	t.Helper()
	errs, err := phaseErrors(p, truth)
	if err != nil {
		t.Error(err)
		return
	}
	for _, e := range errs {
		if e.err > tol+e.stolen || e.err < -tol-e.slack-e.stolen {
			if e.slack > 0 {
				e.msg += fmt.Sprintf(" (%.1f points of the thread's CPU time not sampled)", e.slack)
			}
			if e.stolen > 0 {
				e.msg += fmt.Sprintf(" (%.1f points of the thread's time stolen by the hypervisor)", e.stolen)
			}
			t.Error(e.msg)
			logStacks(t, p, e.tid)
		} else {
			t.Log(e.msg)
		}
	}
}

func TestRecordCGroundTruth(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	dir := t.TempDir()
	out, truthPath := filepath.Join(dir, "cgt.pb.gz"), filepath.Join(dir, "truth.json")
	p, truth, stderr := recordTruth(t, out, truthPath, "record", "-F", "999", "-o", out, "--", cgt, "--truth", truthPath, "--late-threads", "--scale", "2")
	if err := p.Validate(); err != nil {
		t.Errorf("invariant: %v", err)
	}
	checkPhases(t, p, truth)
	checkAccounting(t, p)

	// The thread started mid-recording is there, with its own lifetime.
	late := truth.Thread("late")
	if len(late) != 1 {
		t.Fatalf("truth has %d late threads", len(late))
	}
	th := findThread(p, late[0].TID)
	if th == nil || th.Start <= 0 || th.End >= p.Duration || th.Lifetime() > p.Duration/2 {
		t.Errorf("late thread not recorded as starting mid-recording: %+v (recording %v)", th, p.Duration)
	}
	// The frame that frame-pointer unwinding loses (the caller of a libc
	// function without frame pointers) is there.
	for _, fn := range []string{"do_sleep", "read_pipe", "wait_cond"} {
		found := false
		for _, s := range p.Samples {
			if s.State.OffCPU() && stackHas(s, fn) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no off-CPU sample has %s in its stack", fn)
		}
	}
	if !strings.Contains(stderr, "cost: profiler CPU") {
		t.Errorf("no cost line in:\n%s", stderr)
	}
}

// wantAccounting is the off-CPU accounting that a recording here should
// use: walking the threads where the kernel has sched_exit_tp and schedstat,
// unless WALLPROF_ACCOUNTING=resume asks for the accounting at each thread's
// resumption (that top and the agent use) or WALLPROF_RESUME=0 (or
// WALLPROF_ACCOUNTING=switch) for the switch-time accounting of older
// kernels (`make test` runs the ground-truth tests with both too). A walk's
// first pass runs from a BPF timer where the kernel has the open-coded task
// iterator (Linux 6.7+) with WALLPROF_WALK_TIMER=1.
func wantAccounting() string {
	btf, _ := os.ReadFile("/sys/kernel/btf/vmlinux")
	_, err := os.Stat("/proc/self/schedstat")
	modern := bytes.Contains(btf, []byte("btf_trace_sched_exit_tp")) && err == nil
	switch os.Getenv("WALLPROF_ACCOUNTING") {
	case "switch":
		return profile.AccountSwitchTime
	case "resume":
		if modern {
			return profile.AccountResumption
		}
		return profile.AccountSwitchTime
	case "walk":
	default:
		if os.Getenv("WALLPROF_RESUME") == "0" {
			return profile.AccountSwitchTime
		}
	}
	if modern {
		if bytes.Contains(btf, []byte("bpf_iter_task_new")) && os.Getenv("WALLPROF_WALK_TIMER") == "1" {
			return profile.AccountWalkTimer
		}
		return profile.AccountWalk
	}
	return profile.AccountSwitchTime
}

// walking reports whether an accounting walks the threads.
func walking(accounting string) bool {
	return accounting == profile.AccountWalk || accounting == profile.AccountWalkTimer
}

// checkAccounting checks that the profile says which accounting made it,
// and that it is the one expected here.
func checkAccounting(t *testing.T, p *profile.Profile) {
	t.Helper()
	want := wantAccounting()
	if p.Recorder == nil {
		t.Errorf("the profile does not say how it was recorded; want accounting %q", want)
		return
	}
	if p.Recorder.Accounting != want {
		t.Errorf("accounting %q, want %q (WALLPROF_RESUME=%q)", p.Recorder.Accounting, want, os.Getenv("WALLPROF_RESUME"))
	}
	if rel, _, _, err := linux.KernelRelease(); err == nil && p.Recorder.Kernel != rel {
		t.Errorf("kernel %q in the profile, uname says %q", p.Recorder.Kernel, rel)
	}
}

func TestRecordAttachTargetExits(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	wallprofBin(t) // built before the workload's clock starts
	dir := t.TempDir()
	truthPath := filepath.Join(dir, "truth.json")
	// The workload waits before starting its threads, so that the recorder
	// is attached by then even on a loaded machine; it exits abruptly while
	// its second stage runs.
	target := exec.Command(cgt, "--truth", truthPath, "--start-delay", "1500", "--exit-after", "1300")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()
	go target.Wait()
	out := filepath.Join(dir, "attach.pb.gz")
	start := time.Now()
	code, stderr := wallprof(t, "record", "-p", fmt.Sprint(target.Process.Pid), "--duration", "30s", "-o", out)
	elapsed := time.Since(start)
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	t.Log(stderr)
	if elapsed > 15*time.Second {
		t.Errorf("recording did not stop when the target exited (took %v)", elapsed)
	}
	if !strings.Contains(stderr, "exited during the recording") {
		t.Errorf("stderr does not say the target exited:\n%s", stderr)
	}
	p := readProfile(t, out)
	if err := p.Validate(); err != nil {
		t.Errorf("invariant: %v", err)
	}
	truth, err := groundtruth.ReadTruth(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	if !truth.Partial {
		t.Fatal("truth is not partial: the workload did not exit early")
	}
	// Threads that finished their phases before the exit are checked fully.
	var done []groundtruth.ThreadTruth
	for _, tt := range truth.Threads {
		if tt.EndNS > 0 && tt.Name != "contend" && tt.Name != "spinner" {
			done = append(done, tt)
			if th := findThread(p, tt.TID); th != nil && th.Start == 0 {
				t.Fatalf("thread %s started before the recorder attached: the recorder took more than 1.5s to start", tt.Name)
			}
		}
	}
	if len(done) < 4 {
		t.Fatalf("only %d workload threads finished before the exit", len(done))
	}
	checkPhases(t, p, &groundtruth.Truth{Threads: done})
	if len(p.Notes) == 0 {
		t.Error("the profile carries no note that the target exited")
	}
}

func TestRecordSIGTERMWritesProfile(t *testing.T) {
	requireRecording(t)
	out := filepath.Join(t.TempDir(), "term.pb.gz")
	cmd := exec.Command(wallprofBin(t), "record", "-o", out, "--", "sleep", "30")
	var stderr syncBuffer
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// 1.5 s after the recording began (wallprof says so once it has
	// started, in 0.3 s or, on a loaded machine, over 0.8 s).
	began := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
			if strings.HasPrefix(sc.Text(), "wallprof: recording ") {
				close(began)
			}
		}
	}()
	select {
	case <-began:
	case <-copied:
	case <-time.After(20 * time.Second):
	}
	time.Sleep(1500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() {
		<-copied
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wallprof exited with %v after SIGTERM:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("wallprof did not stop after SIGTERM")
	}
	p := readProfile(t, out)
	if p.Duration < time.Second || p.Duration > 10*time.Second {
		t.Errorf("recording lasted %v, want about 1.5s", p.Duration)
	}
	var sleeping time.Duration
	for _, th := range p.Threads {
		sleeping += th.Time[profile.Sleeping]
	}
	if sleeping < time.Second {
		t.Errorf("sleep 30 should be sleeping for most of the recording, got %v:\n%s", sleeping, stderr.String())
	}
	found := false
	for _, s := range p.Samples {
		if s.State == profile.Sleeping && (stackHas(s, "hrtimer_nanosleep") || stackHas(s, "do_nanosleep") ||
			stackHas(s, "__x64_sys_clock_nanosleep")) {
			found = true
		}
	}
	if !found {
		t.Error("no sleeping sample of sleep(1) in nanosleep")
	}
}

// logStacks logs a thread's samples, to diagnose a failed comparison.
func logStacks(t *testing.T, p *profile.Profile, tid int) {
	t.Helper()
	for _, s := range p.Samples {
		if s.TID != tid {
			continue
		}
		var names []string
		for _, l := range s.Stack {
			for _, f := range l.Frames {
				names = append(names, f.Function)
			}
		}
		t.Logf("  %s %v %s", s.State, time.Duration(s.Value), strings.Join(names, ";"))
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// With -- COMMAND, the processes the command starts are recorded too.
func TestRecordFollowsChildren(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	dir := t.TempDir()
	out, truthPath := filepath.Join(dir, "sh.pb.gz"), filepath.Join(dir, "truth.json")
	// The shell forks the workload (no exec in place: it runs a second command after it).
	script := fmt.Sprintf("%s --scale 0.5 --truth %s; true", cgt, truthPath)
	p, truth, _ := recordTruth(t, out, truthPath, "record", "-o", out, "--", "/bin/sh", "-c", script)
	pids := map[int]bool{}
	for _, th := range p.Threads {
		pids[th.PID] = true
	}
	if !pids[truth.PID] || len(pids) < 2 {
		t.Fatalf("the child process %d is not in the profile (processes: %v)", truth.PID, pids)
	}
	for _, tt := range truth.Threads {
		if findThread(p, tt.TID) == nil {
			t.Errorf("thread %d (%s) of the child is missing", tt.TID, tt.Name)
		}
	}
	found := false
	for _, s := range p.Samples {
		if s.PID == truth.PID && stackHas(s, "burn_cpu") {
			found = true
		}
	}
	if !found {
		t.Error("the child's burn_cpu is in no stack: its process was not symbolized")
	}
}

// With the kernel's BPF statistics already on (an administrator's sysctl),
// the sampled mode must not scale the measured run time up as if it had
// been measured a tenth of the time: the programs were measured throughout.
func TestRecordCostWithStatsAlreadyOn(t *testing.T) {
	requireRecording(t)
	const sysctl = "/proc/sys/kernel/bpf_stats_enabled"
	old, err := os.ReadFile(sysctl)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s under CI: %v", sysctl, err)
		}
		t.Skipf("no %s: %v", sysctl, err)
	}
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		t.Fatalf("turn BPF statistics on: %v", err)
	}
	defer os.WriteFile(sysctl, old, 0o644)

	pp := groundtruth.Build(t, "pingpong")
	// The programs at each switch: resume mode (a walk runs none).
	t.Setenv("WALLPROF_ACCOUNTING", "resume")
	stderr := recordPingPong(t, pp)
	rate, ns, runs := switchesAndRuns(t, stderr)
	switches := rate * ns / 1e9
	// sched_switch and at most a few other programs run per context
	// switch; scaled up from a window, the count came out ~7 per switch.
	if per := runs / switches; per < 0.8 || per > 4 {
		t.Errorf("%.0f program runs for %.0f context switches (%.2f per switch), want 1 to 4:\n%s", runs, switches, per, stderr)
	}
	// Where the kernel has sched_exit_tp and schedstat, the accounting runs
	// once per switch of the machine, at the resumption, not at sched_switch
	// as well (unless WALLPROF_RESUME=0). Each of the ping-pong's switches here goes through the idle
	// task (the other thread was woken on the other CPU): two switches of
	// the machine, two runs (the switch-time accounting: four).
	if wantAccounting() == profile.AccountResumption {
		if per := runs / switches; per > 2.6 {
			t.Errorf("%.2f program runs per context switch of the ping-pong on a kernel with sched_exit_tp and schedstat, want about 2 (resume mode)", per)
		}
	}

	// Walk mode, the default where the kernel allows it: no program at a
	// switch; the timer's, the walks' (a handful of threads, 800 times a
	// second) and the threads' creation and exit.
	t.Setenv("WALLPROF_ACCOUNTING", "")
	if !walking(wantAccounting()) {
		return
	}
	stderr = recordPingPong(t, pp)
	// The walks' runs go with time (~5,000 a second here: two passes over
	// two threads 800 times a second), not with the switches: a tenth of a
	// run per switch of this ping-pong even when it runs slowly (73,000
	// switches a second under CI's load), against 2 when the accounting
	// runs at each resumption.
	rate, ns, runs = switchesAndRuns(t, stderr)
	if per := runs / (rate * ns / 1e9); per > 0.25 {
		t.Errorf("walk mode: %.0f program runs for %.0f context switches (%.3f per switch), want almost none:\n%s", runs, rate*ns/1e9, per, stderr)
	}
}

// The walker sleeps without giving up its P; a signal that ends its sleep
// early may be the runtime's request to stop the world, which it repeats
// every 100 µs until the walker yields. Slept through, each of the
// collector's stops waited for the rest of the walker's sleep: with walks
// 2 s apart, a 5-s ping-pong took 16 s to record and 1.6 s of wallprof's
// CPU. Long intervals are what low rates and processes of many threads
// give (a walk of N threads comes N/64 times less often).
func TestRecordLongWalkIntervalsLetTheRuntimeStop(t *testing.T) {
	stderr, ran, recorded, _ := recordPingPongWalkingEvery(t, "2s")
	if extra := recorded - ran; extra > 5 {
		t.Errorf("recorded %.1fs of a %.1fs ping-pong with walks 2 s apart: %.1fs more, want under 5s:\n%s", recorded, ran, extra, stderr)
	}
}

// The end of the command ends the recording at once, however far apart the
// walks: the walker's sleep is interrupted. Slept out, walks 20 s apart
// (drawn 10 to 30 s) kept the recording going 10 s or more past the
// ping-pong's exit, as at -F 1 on a process of many threads (walks up to a
// sampling period apart), where a Ctrl-C waited out the sleep.
func TestRecordStopsAtOnceBetweenLongWalks(t *testing.T) {
	stderr, ran, recorded, took := recordPingPongWalkingEvery(t, "20s")
	if extra := recorded - ran; extra > 3 {
		t.Errorf("recorded %.1fs of a %.1fs ping-pong with walks 20 s apart: %.1fs more, want under 3s:\n%s", recorded, ran, extra, stderr)
	}
	if took > 10*time.Second {
		t.Errorf("wallprof record took %v for a %.1fs ping-pong, want under 10s", took.Round(time.Millisecond), ran)
	}
}

// recordPingPongWalkingEvery records the ping-pong with walks every apart
// (WALLPROF_WALK_EVERY) and returns wallprof's stderr, the ping-pong's run
// time and the recording's length (seconds), and how long the command took.
func recordPingPongWalkingEvery(t *testing.T, every string) (stderr string, ran, recorded float64, took time.Duration) {
	t.Helper()
	requireRecording(t)
	if !walking(wantAccounting()) {
		t.Skip("the threads are not walked on this kernel")
	}
	t.Setenv("WALLPROF_WALK_EVERY", every)
	start := time.Now()
	stderr = recordPingPong(t, groundtruth.Build(t, "pingpong"))
	took = time.Since(start)
	e := regexp.MustCompile(`elapsed_ns=(\d+)`).FindStringSubmatch(stderr)
	r := regexp.MustCompile(`recorded ([0-9.]+)s of`).FindStringSubmatch(stderr)
	if e == nil || r == nil {
		t.Fatalf("no run time or recording length in:\n%s", stderr)
	}
	ns, _ := strconv.ParseFloat(e[1], 64)
	recorded, _ = strconv.ParseFloat(r[1], 64)
	return stderr, ns / 1e9, recorded, took
}

// recordPingPong records 100,000 round trips of the ping-pong pp and
// returns wallprof's and the ping-pong's stderr.
func recordPingPong(t *testing.T, pp string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "pp.pb.gz")
	code, stderr := wallprof(t, "record", "-o", out, "--", pp, "--iters", "100000")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	return stderr
}

// switchesAndRuns reads the ping-pong's switch rate and run time and
// wallprof's count of BPF program runs from a recording's stderr.
func switchesAndRuns(t *testing.T, stderr string) (rate, ns, runs float64) {
	t.Helper()
	m := regexp.MustCompile(`switches_per_s=(\d+)`).FindStringSubmatch(stderr)
	e := regexp.MustCompile(`elapsed_ns=(\d+)`).FindStringSubmatch(stderr)
	r := regexp.MustCompile(`BPF [0-9.]+[µnm]?s \([0-9.]+%\) in (\d+) program runs([^;\n]*)`).FindStringSubmatch(stderr)
	if m == nil || e == nil || r == nil {
		t.Fatalf("no switch rate or BPF cost in:\n%s", stderr)
	}
	if strings.Contains(r[2], "estimated") {
		t.Errorf("BPF run time estimated from a window although the statistics were on throughout: %q", r[0])
	}
	rate, _ = strconv.ParseFloat(m[1], 64)
	ns, _ = strconv.ParseFloat(e[1], 64)
	runs, _ = strconv.ParseFloat(r[1], 64)
	return rate, ns, runs
}

// A thread that burns CPU is sampled at -F, not at the kernel's tick rate
// (HZ, 250 here): its CPU time counter only moves at ticks and switches, so
// a timer faster than that must add what the counter has not caught up with
// yet, or most of its samples see no new CPU time and are skipped. Each run
// checks the rate of stacks taken and that the samples still add up to the
// measured on-CPU time.
func TestRecordSamplesAtFrequency(t *testing.T) {
	requireRecording(t)
	bin := groundtruth.Build(t, "cpubound")
	for _, hz := range []int{99, 999, 4999} {
		out := filepath.Join(t.TempDir(), "cpu.pb.gz")
		code, stderr := wallprof(t, "record", "-F", strconv.Itoa(hz), "-o", out, "--", bin, "--iters", "400000000")
		if code != 0 {
			t.Fatalf("-F %d: wallprof record exited %d:\n%s", hz, code, stderr)
		}
		p := readProfile(t, out)
		if len(p.Threads) != 1 {
			t.Fatalf("-F %d: %d threads, want 1", hz, len(p.Threads))
		}
		th := p.Threads[0]
		cpu := th.Time[profile.OnCPU]
		want := cpu.Seconds() * float64(hz)
		if got := float64(th.CPUSamples); got < 0.8*want || got > 1.2*want {
			t.Errorf("-F %d: %d on-CPU stacks taken in %v of CPU time, want about %.0f", hz, th.CPUSamples, cpu, want)
		} else {
			t.Logf("-F %d: %d on-CPU stacks taken in %v of CPU time (%.0f expected)", hz, th.CPUSamples, cpu, want)
		}
		sampled := p.TotalByState()[profile.OnCPU]
		if d := time.Duration(sampled) - cpu; d > cpu/100 || d < -cpu/100 {
			t.Errorf("-F %d: on-CPU samples add up to %v, measured %v", hz, time.Duration(sampled), cpu)
		}
	}
}

// onCPULeafShare is the share of p's on-CPU time (of process pid, or all
// when pid is 0) whose leaf frame is a function for which is returns true
// (symbolize.IsKernelBlock, symbolize.IsKernelWait).
func onCPULeafShare(p *profile.Profile, pid int, is func(string) bool) float64 {
	var all, wait int64
	for _, s := range p.Samples {
		if s.State != profile.OnCPU || (pid != 0 && s.PID != pid) || len(s.Stack) == 0 {
			continue
		}
		all += s.Value
		if fs := s.Stack[0].Frames; len(fs) > 0 && is(fs[0].Function) {
			wait += s.Value
		}
	}
	if all == 0 {
		return 0
	}
	return float64(wait) / float64(all)
}

// recordBursts records `cgt --bursts 8` with the given extra flags and
// returns the profile and the truth.
func recordBursts(t *testing.T, cgt string, flags ...string) (*profile.Profile, *groundtruth.Truth) {
	t.Helper()
	dir := t.TempDir()
	out, truthPath := filepath.Join(dir, "bursts.pb.gz"), filepath.Join(dir, "truth.json")
	args := append([]string{"record", "-o", out}, flags...)
	args = append(args, "--", cgt, "--truth", truthPath, "--bursts", "8")
	p, truth, _ := recordTruth(t, out, truthPath, args...)
	if err := p.Validate(); err != nil {
		t.Errorf("invariant: %v", err)
	}
	return p, truth
}

// TestRecordCBursts records threads whose phases are shorter than the
// sampling period (3 ms of CPU, 5 ms asleep, 2 ms on a pipe, and a crowd of
// short bursts wanting more CPUs than there are), at the default rate and at
// 999 Hz: every phase's share of its thread's wall, on-CPU and off-CPU time
// within a point and a half of what the workload measured, and no on-CPU
// time on the functions the threads block in.
//
// At the default rate one recording's error is the walk's known bias (the
// waits that end between a walk's instant and its read lose their samples
// to where the thread blocks next: doc/recorder.md) and its noise: on
// 2026-11-26, 18 recordings on this 2-CPU VM, the worst mean errors +0.6 to
// +0.8 point (the server's sleep) with a standard deviation of 0.2-0.4, and
// 7 of the 18 had a phase over one point (up to 1.6). The bias itself is
// bounded by TestRecordCBurstsUnbiased49Hz's means.
func TestRecordCBursts(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	for _, c := range []struct {
		name  string
		flags []string
		tol   float64
	}{
		{"default-rate", nil, 1.5},
		// At 999 Hz the bound was a point until 2026-11-27, when a CI
		// run had the crowd's bursts 1.03 off; that day the worst phase
		// of a run was 0.5-1.3 points off in six runs, three of them of
		// the build before the session's changes (0.7, 0.9, 1.3): the
		// noise of a busy host, not a change. doc/recorder.md has the
		// distribution of earlier days.
		{"999Hz", []string{"-F", "999"}, 1.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, truth := recordBursts(t, cgt, c.flags...)
			checkPhasesWithin(t, p, truth, c.tol)
			if share := onCPULeafShare(p, truth.PID, symbolize.IsKernelBlock); share > 0.005 {
				t.Errorf("%.1f%% of the on-CPU time has a kernel function that blocks as its leaf, want under 0.5%%", 100*share)
			}
		})
	}
}

// TestRecordCBurstsOffCPUBudget records the bursts with the accounting at
// each resumption (top's, the agent's, record -a's) and an off-CPU budget
// that leaves out a third to a half of the stacks of one period that come
// due (150 a second per CPU): those left out are dropped, not deferred, and
// each thread's thin samples scaled to its time in each state, so no phase
// is biased. The bound is 3 points: thinned this much, the off-CPU sampling
// is noisier (the worst phase 1.3, 1.3, 1.3 and 1.8 points off in four
// runs, the crowd's naps); the designs that were biased were 12-15 points
// off (the due weight deferred to the thread's next resumption: the
// server's compute phase got 15 points of blocked time) and 51 (whole
// samples dropped and all scaled: a 4 s wait given to the naps).
func TestRecordCBurstsOffCPUBudget(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	t.Setenv("WALLPROF_ACCOUNTING", "resume")
	t.Setenv("WALLPROF_OFFCPU_RATE", "150")
	p, truth := recordBursts(t, cgt)
	if p.Recorder == nil || p.Recorder.Accounting != profile.AccountResumption {
		t.Skipf("recorded with %+v: this kernel does not account at each resumption", p.Recorder)
	}
	notes := strings.Join(p.Notes, "\n")
	if !strings.Contains(notes, "off-CPU stacks were held to 150 a second per CPU") {
		t.Fatalf("no note of the off-CPU budget; the budget did not bind, or is not said:\n%s", notes)
	}
	checkPhasesWithin(t, p, truth, 3)
}

// TestRecordCBurstsUnbiased49Hz records the bursts at 49 Hz, where a
// recording's sampling error is larger, several times: each phase measure's
// error, averaged over the runs, must be close to zero (a bias does not
// average out; noise does), and no single run far off. A mean fails when
// it is more than 0.6 point off (plus the time the hypervisor stole) by
// more than twice its standard error over the runs: a bias of that size
// shown, not a noisy run of a smaller one. The walk's own bias here is up to
// 0.6 point on four measures (doc/recorder.md, "Its known bias": on
// 2026-11-26, the server's sleep +0.49 to +0.61 in three runs of this
// test); a bare 0.6 bound on the mean failed in CI.
func TestRecordCBurstsUnbiased49Hz(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	const runs = 8
	counts := map[string]int{}
	for _, tt := range recordBurstsRoles {
		counts[tt.role] = tt.n
	}
	// Per key, each run's error (the mean of the role's threads: two
	// servers, three crowd threads) and the stolen time.
	perRun, stolen := map[string][]float64{}, map[string]float64{}
	var keys []string
	for i := 0; i < runs; i++ {
		p, truth := recordBursts(t, cgt, "-F", "49")
		errs, err := phaseErrors(p, truth)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			role, _, _ := strings.Cut(e.key, "/")
			if _, ok := perRun[e.key]; !ok {
				keys = append(keys, e.key)
				perRun[e.key] = make([]float64, runs)
			}
			perRun[e.key][i] += e.err / float64(counts[role])
			stolen[e.key] += e.stolen / float64(runs*counts[role])
			if e.err > 3+e.stolen || e.err < -3-e.stolen {
				t.Errorf("run %d: %s", i+1, e.msg)
			}
		}
	}
	for _, k := range keys {
		mean, se := meanSE(perRun[k])
		st := stolen[k]
		msg := fmt.Sprintf("%s: mean error %+.2f points (standard error %.2f) over %d runs (%.2f points stolen by the hypervisor)", k, mean, se, runs, st)
		if math.Abs(mean)-2*se > 0.6+st {
			t.Errorf("%s: a bias over 0.6 point; each run: %.2f", msg, perRun[k])
		} else {
			t.Log(msg)
		}
	}
}

// meanSE returns the mean of xs and its standard error.
func meanSE(xs []float64) (mean, se float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1) / float64(len(xs)))
}

// recordBurstsRoles are the thread roles of cgt --bursts and how many
// threads each has.
var recordBurstsRoles = []struct {
	role string
	n    int
}{{"server", 2}, {"feeder", 2}, {"crowd", 3}}

// recordTruth runs wallprof with args, which write the profile to out and
// have a ground-truth workload write its truth to truthPath, and returns
// the profile, the truth and wallprof's output; any failure ends the test.
func recordTruth(t *testing.T, out, truthPath string, args ...string) (*profile.Profile, *groundtruth.Truth, string) {
	t.Helper()
	code, stderr := wallprof(t, args...)
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	t.Log(stderr)
	truth, err := groundtruth.ReadTruth(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	return readProfile(t, out), truth, stderr
}
