package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// requireTracefs mounts tracefs when it is not, for perf's tracepoints.
func requireTracefs(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/sys/kernel/tracing/events/sched"); err == nil {
		return
	}
	if out, err := exec.Command("mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing").CombinedOutput(); err != nil {
		t.Fatalf("mount tracefs: %v: %s", err, out)
	}
}

// The README's perf recipe, run as written against a program that
// computes and sleeps: perf record -a -g with cpu-clock and sched_switch,
// perf script with the fields the conversion needs, wallprof convert --pid.
// The other ways people run perf script get the sentence that says what
// to add.
func TestConvertRealPerf(t *testing.T) {
	requireRecording(t) // perf record -a needs root, as recording does
	requirePerf(t)
	requireTracefs(t)
	dir := t.TempDir()
	app := exec.Command("sh", "-c", `while :; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.1; done`)
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { app.Process.Kill(); app.Wait() }()
	pid := strconv.Itoa(app.Process.Pid)
	data := filepath.Join(dir, "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-o", data, "-a", "-g", "-e", "cpu-clock", "-e", "sched:sched_switch", "--", "sleep", "2").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v: %s", err, out)
	}
	script := func(name string, args ...string) string {
		out, err := exec.Command("perf", append([]string{"script", "-i", data}, args...)...).Output()
		if err != nil {
			t.Fatalf("perf script %q: %v", args, err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// The recipe.
	recipe := script("app.perf", "-F", "+pid,+ip,+sym,+dso")
	out := filepath.Join(dir, "app.pb.gz")
	code, stdout, stderr := runCmd("convert", recipe, "--pid", pid, "-o", out)
	if code != exitOK || strings.Contains(stderr, "warning") || strings.Contains(stderr, "skipped") {
		t.Fatalf("convert: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	p := readProfile(t, out)
	var byState [profile.NumStates]int64
	for _, s := range p.Samples {
		if s.PID != app.Process.Pid {
			t.Fatalf("a sample of process %d, want only %s", s.PID, pid)
		}
		if len(s.Stack) == 0 {
			t.Errorf("a %s sample without a stack", s.State)
		}
		byState[s.State] += s.Value
	}
	// About a fifth computing and the rest sleeping, in the 2 s recorded
	// (the shares depend on the machine: only that both are there).
	if byState[profile.OnCPU] < int64(50*time.Millisecond) || byState[profile.Sleeping] < int64(500*time.Millisecond) {
		t.Errorf("on-CPU %v, sleeping %v: want both from the program that computes and sleeps",
			time.Duration(byState[profile.OnCPU]), time.Duration(byState[profile.Sleeping]))
	}

	// The shell lived through the recording: its states add up to it,
	// less the wait it was in when perf started (its switch-out is not in
	// the input: up to one sleep, 0.1 s). On a Firecracker VM's Linux
	// 6.18, switches out of CPU 1's idle task are never traced: the
	// shell's wake-ups there have no switch-in, and the conversion must
	// bound them (it left them out, 30% of the recording counted).
	var all int64
	for _, v := range byState {
		all += v
	}
	t.Logf("the shell: %v of the %v recorded (on-CPU %v, sleeping %v)", time.Duration(all), p.Duration,
		time.Duration(byState[profile.OnCPU]), time.Duration(byState[profile.Sleeping]))
	if all < int64(p.Duration)*85/100 {
		t.Errorf("the shell's states add up to %v of the %v recorded: want at least 85%%", time.Duration(all), p.Duration)
	}

	// perf script as is: no PIDs, so --pid keeps nothing; say the fields.
	plain := script("plain.perf")
	code, _, stderr = runCmd("convert", plain, "--pid", pid, "-o", filepath.Join(dir, "plain.pb.gz"))
	if code != exitError || !strings.Contains(stderr, "-F +pid,+ip,+sym,+dso") {
		t.Errorf("plain perf script with --pid: exit %d, stderr:\n%s", code, stderr)
	}
	// -F +pid alone: indented event lines, and sched_switch without call
	// chains; read all the same. Whether enough events lack a chain for the
	// warning depends on what else ran on the machine (it counts every
	// process's events); when it is given, it names the fields to add.
	pidOnly := script("pid.perf", "-F", "+pid")
	code, _, stderr = runCmd("convert", pidOnly, "--pid", pid, "-o", filepath.Join(dir, "pid.pb.gz"))
	warned := strings.Contains(stderr, "had no call chain")
	if code != exitOK || warned && !strings.Contains(stderr, "+ip,+sym,+dso") || strings.Contains(stderr, "skipped") {
		t.Errorf("perf script -F +pid: exit %d, stderr:\n%s", code, stderr)
	}
}
