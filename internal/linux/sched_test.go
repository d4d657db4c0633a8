package linux

import (
	"os"
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

// TestLockTimelyBoundsASpin: a thread given the walker's scheduling that
// spins (as the Go runtime does at times, waiting for another thread) has
// at most its budget of a CPU, so that the threads it shares a CPU with go
// on. At real-time priority it would have the whole CPU.
func TestLockTimelyBoundsASpin(t *testing.T) {
	needRoot(t)
	var got Timely
	var policy uint32
	var cpu, wall time.Duration
	onThread(func() {
		got = LockTimely(300*time.Microsecond, time.Millisecond)
		if a, err := unix.SchedGetAttr(0, 0); err == nil {
			policy = a.Policy
		}
		start, c0 := time.Now(), threadCPU(t)
		for time.Since(start) < 200*time.Millisecond {
		}
		wall, cpu = time.Since(start), threadCPU(t)-c0
	})
	if got != TimelyDeadline {
		if os.Getenv("CI") == "true" {
			t.Fatalf("LockTimely gave %v, want deadline (root, full CPU affinity)", got)
		}
		t.Skipf("LockTimely gave %v: no deadline scheduling here", got)
	}
	if policy != unix.SCHED_DEADLINE {
		t.Errorf("LockTimely said deadline, the thread's policy is %d", policy)
	}
	share := float64(cpu) / float64(wall)
	t.Logf("spinning %v: %v on a CPU (%.0f%%)", wall, cpu, 100*share)
	if share > 0.4 {
		t.Errorf("a spinning thread had %.0f%% of a CPU, want at most its budget (30%%)", 100*share)
	}
	if share < 0.1 {
		t.Errorf("a spinning thread had %.0f%% of a CPU, want about its budget (30%%)", 100*share)
	}
}

// TestLockTimelyNarrowAffinity: with a CPU affinity narrower than the
// machine (taskset, a container's cpuset), where the kernel refuses a
// deadline, the thread gets the short slice.
func TestLockTimelyNarrowAffinity(t *testing.T) {
	needRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to narrow the affinity")
	}
	var got Timely
	var attr *unix.SchedAttr
	var err error
	onThread(func() {
		var one unix.CPUSet
		one.Set(0)
		if err = unix.SchedSetaffinity(0, &one); err != nil {
			return
		}
		got = LockTimely(300*time.Microsecond, time.Millisecond)
		attr, err = unix.SchedGetAttr(0, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != TimelySlice || attr.Policy != unix.SCHED_NORMAL {
		t.Fatalf("LockTimely gave %v, policy %d; want a short slice of SCHED_NORMAL", got, attr.Policy)
	}
	// Linux 6.12+ reports a fair thread's slice as its runtime.
	if attr.Runtime != 0 && attr.Runtime != uint64(100*time.Microsecond) {
		t.Errorf("slice %d ns, want 100 µs", attr.Runtime)
	}
}
