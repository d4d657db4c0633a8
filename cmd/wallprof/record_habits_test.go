package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests check that 'wallprof record' takes the command lines perf
// and py-spy users type. They run the built binary as root.

// wallprofSplit runs the built command and returns its exit code, stdout
// and stderr apart.
func wallprofSplit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(wallprofBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run wallprof: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

// sleeper starts a process that sleeps until the test ends.
func sleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// pids lists the processes a profile's threads belong to.
func profilePIDs(t *testing.T, path string) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	for _, th := range readProfile(t, path).Threads {
		out[th.PID] = true
	}
	return out
}

// -g, attached values (-F99, -p1234, -ofile), bare seconds, and several
// PIDs with -p 1,2.
func TestRecordPerfFlags(t *testing.T) {
	requireRecording(t)
	a, b := sleeper(t), sleeper(t)
	out := filepath.Join(t.TempDir(), "a.pb.gz")
	start := time.Now()
	code, stdout, stderr := wallprofSplit(t, "record", "-g", "-F49", "-p"+strconv.Itoa(a)+","+strconv.Itoa(b), "-o"+out, "--duration", "1")
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("--duration 1 took %v", d)
	}
	if strings.Contains(stderr, "the kernel switched") {
		t.Errorf("the kernel's quirks are printed without -v:\n%s", stderr)
	}
	if !strings.Contains(stderr, "at 49 Hz, for 1s") {
		t.Errorf("stderr does not say 49 Hz for 1s:\n%s", stderr)
	}
	if got := profilePIDs(t, out); !got[a] || !got[b] || len(got) != 2 {
		t.Errorf("profile has processes %v, want %d and %d", got, a, b)
	}
}

// -p PID -- COMMAND records PID while the command runs, not the command,
// and exits with the command's status.
func TestRecordPIDWhileCommand(t *testing.T) {
	requireRecording(t)
	a := sleeper(t)
	out := filepath.Join(t.TempDir(), "a.pb.gz")
	start := time.Now()
	code, _, stderr := wallprofSplit(t, "record", "-p", strconv.Itoa(a), "-o", out, "--", "sh", "-c", "sleep 1; exit 7")
	if code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr:\n%s", code, stderr)
	}
	if d := time.Since(start); d < time.Second || d > 20*time.Second {
		t.Errorf("recording while 'sleep 1' ran took %v", d)
	}
	if got := profilePIDs(t, out); !got[a] || len(got) != 1 {
		t.Errorf("profile has processes %v, want only %d", got, a)
	}
	if p := readProfile(t, out); p.Duration < 900*time.Millisecond {
		t.Errorf("profile covers %v, want the command's second", p.Duration)
	}
}

// record -- COMMAND exits with the command's status; a command killed by
// signal N gives 128+N, as a shell does.
func TestRecordCommandStatus(t *testing.T) {
	requireRecording(t)
	dir := t.TempDir()
	for _, c := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		code, _, stderr := wallprofSplit(t, "record", "-q", "-o", filepath.Join(dir, "x.pb.gz"), "--", "sh", "-c", c.script)
		if code != c.want {
			t.Errorf("record -- sh -c %q: exit %d, want %d; stderr:\n%s", c.script, code, c.want, stderr)
		}
	}
	// Stopped by --duration first: the recording succeeded, 0.
	if code, _, stderr := wallprofSplit(t, "record", "-q", "--duration", "0.5", "-o", filepath.Join(dir, "y.pb.gz"), "--", "sleep", "30"); code != 0 {
		t.Errorf("record --duration 0.5 -- sleep 30: exit %d, want 0; stderr:\n%s", code, stderr)
	}
}

// -o - writes the profile, and nothing else, to stdout (the command's
// stdout goes to stderr); the format follows the name; --json writes the
// summary.
func TestRecordOutputs(t *testing.T) {
	requireRecording(t)
	dir := t.TempDir()
	code, stdout, stderr := wallprofSplit(t, "record", "-o", "-", "--format", "collapsed", "--", "sh", "-c", "echo hello; sleep 0.2")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if strings.Contains(stdout, "hello") || !strings.Contains(stderr, "hello") {
		t.Errorf("the command's stdout should go to stderr with -o -; stdout %q", stdout)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if i := strings.LastIndexByte(line, ' '); i < 0 || !isDigits(line[i+1:]) {
			t.Fatalf("stdout line %q is not a folded stack", line)
		}
	}

	// pprof to stdout, read back.
	code, stdout, stderr = wallprofSplit(t, "record", "-q", "-o", "-", "--", "sleep", "0.2")
	if code != 0 || !strings.HasPrefix(stdout, "\x1f\x8b") || stderr != "" {
		t.Fatalf("-o - (pprof): exit %d, stdout starts %q, stderr %q", code, stdout[:min(len(stdout), 4)], stderr)
	}

	// The name chooses the format; without -o, --format chooses the name.
	folded := filepath.Join(dir, "x.folded")
	if code, _, stderr := wallprofSplit(t, "record", "-q", "-o", folded, "--", "sleep", "0.2"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if data, _ := os.ReadFile(folded); bytes.HasPrefix(data, []byte("\x1f\x8b")) || len(data) == 0 {
		t.Errorf("%s is not collapsed stacks", folded)
	}
	cmd := exec.Command(wallprofBin(t), "record", "-q", "--format", "collapsed", "--", "sleep", "0.2")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "wallprof.folded")); err != nil {
		t.Errorf("--format collapsed without -o: %v", err)
	}

	// --json FILE: the summary, for CI.
	js := filepath.Join(dir, "sum.json")
	code, _, stderr = wallprofSplit(t, "record", "-o", filepath.Join(dir, "y.pb.gz"), "--json", js, "--", "sh", "-c", "sleep 0.2; exit 4")
	if code != 4 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var sum recordSummary
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Format != recordFormat || sum.StoppedBy != "command" || sum.CommandExit == nil || *sum.CommandExit != 4 ||
		sum.Threads == 0 || sum.Bytes == 0 || sum.Cost == nil || sum.DurationNs < int64(150*time.Millisecond) {
		t.Errorf("summary:\n%s", data)
	}
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// An output path that cannot be written fails before recording, not after
// --duration.
func TestRecordOutputCheckedFirst(t *testing.T) {
	requireRecording(t)
	a := sleeper(t)
	dir := t.TempDir()
	start := time.Now()
	code, _, stderr := wallprofSplit(t, "record", "-p", strconv.Itoa(a), "--duration", "30", "-o", dir)
	if code != exitError || !strings.Contains(stderr, "is a directory") {
		t.Errorf("-o DIRECTORY: exit %d, stderr %q", code, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("-o DIRECTORY failed after %v, not at once", d)
	}
}

// Recording a kernel thread: no complaint about its missing executable,
// and no share of a CPU time it hardly used.
func TestRecordKernelThread(t *testing.T) {
	requireRecording(t)
	code, _, stderr := wallprofSplit(t, "record", "-p", "2", "--duration", "0.5", "-o", filepath.Join(t.TempDir(), "k.pb.gz"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "/proc/2/exe") || strings.Contains(stderr, "no goroutine view") || strings.Contains(stderr, "% of target CPU") {
		t.Errorf("recording kthreadd:\n%s", stderr)
	}
}
