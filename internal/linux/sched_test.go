package linux

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needRoot skips a test that needs root, and fails it in CI, which runs as
// root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("needs root (CI runs as root)")
	}
	t.Skip("needs root: setting a scheduling policy")
}

// onThread runs f on a fresh OS thread, which ends with it.
func onThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends here
		f()
	}()
	<-done
}

// threadCPU is the calling thread's CPU time.
func threadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// TestLockPromptSharesTheCPU: a thread given the walker's scheduling that
// spins (as the Go runtime does at times, waiting for another thread) on
// the CPU of an ordinary thread that spins too leaves it about half: at
// real-time priority the ordinary thread would get nothing until the
// kernel's real-time throttling (5%).
func TestLockPromptSharesTheCPU(t *testing.T) {
	needRoot(t)
	const spin = 300 * time.Millisecond
	var one unix.CPUSet
	one.Set(0)
	var prompt, plain time.Duration
	var attr *unix.SchedAttr
	var errPrompt, errPlain error
	start := make(chan struct{})
	var end time.Time // both spin until then
	done := make(chan struct{}, 2)
	run := func(lock bool, cpu *time.Duration, err *error) {
		onThread(func() {
			defer func() { done <- struct{}{} }()
			if *err = unix.SchedSetaffinity(0, &one); *err != nil {
				return
			}
			if lock {
				if *err = LockPrompt(); *err != nil {
					return
				}
				attr, *err = unix.SchedGetAttr(0, 0)
			}
			<-start
			c0 := threadCPU(t)
			for time.Now().Before(end) {
			}
			*cpu = threadCPU(t) - c0
		})
	}
	go run(true, &prompt, &errPrompt)
	go run(false, &plain, &errPlain)
	time.Sleep(10 * time.Millisecond)
	end = time.Now().Add(spin)
	close(start)
	<-done
	<-done
	if errPrompt != nil || errPlain != nil {
		t.Fatalf("setting up: %v, %v", errPrompt, errPlain)
	}
	if attr.Policy != unix.SCHED_NORMAL {
		t.Errorf("LockPrompt left policy %d, want SCHED_NORMAL", attr.Policy)
	}
	// Linux 6.12+ reports a fair thread's slice as its runtime.
	if attr.Runtime != 0 && attr.Runtime != uint64(promptSlice) {
		t.Errorf("slice %d ns, want %v", attr.Runtime, promptSlice)
	}
	share := float64(plain) / float64(prompt+plain)
	t.Logf("on one CPU for %v: the prompt thread %v, the ordinary one %v (%.0f%%)", spin, prompt, plain, 100*share)
	if share < 0.3 {
		t.Errorf("the ordinary thread had %.0f%% of the CPU it shared with a spinning prompt thread, want about half", 100*share)
	}
}

// RunApart runs f on a CPU the given process may not run on, and back
// where the thread was allowed after.
func TestRunApart(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU")
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var zero unix.CPUSet
	zero.Set(0)
	if err := unix.SchedSetaffinity(cmd.Process.Pid, &zero); err != nil {
		t.Fatal(err)
	}
	var ran int = -2
	cpu := RunApart([]int{cmd.Process.Pid}, func() {
		var s unix.CPUSet
		if unix.SchedGetaffinity(0, &s) == nil && s.Count() == 1 {
			for c := range maxCPUs {
				if s.IsSet(c) {
					ran = c
				}
			}
		}
	})
	if cpu < 1 || ran != cpu {
		t.Errorf("RunApart from a process pinned to CPU 0: reported CPU %d, f ran pinned to %d", cpu, ran)
	}
	// Every CPU the target's: f runs where the thread may.
	var all unix.CPUSet
	for c := range runtime.NumCPU() {
		all.Set(c)
	}
	if err := unix.SchedSetaffinity(cmd.Process.Pid, &all); err != nil {
		t.Fatal(err)
	}
	if cpu := RunApart([]int{cmd.Process.Pid}, func() {}); cpu != -1 {
		t.Errorf("RunApart from a process on every CPU moved to CPU %d", cpu)
	}
}
