package linux

import (
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line  string
		name  string
		state byte
	}{
		{"1234 (bash) S 1 1234 1234 0 -1 4194560 ...", "bash", 'S'},
		{"7 (my thread) R 1 7", "my thread", 'R'},
		{"7 ((a) b)) D 1 7", "(a) b)", 'D'},
		{"7 (a) b) Z 1 7", "a) b", 'Z'},
		{"7 (x) y (z) T 1 7", "x) y (z", 'T'},
		{"7 () I 2 0", "", 'I'},
		{"7 ( ) S 2 0", " ", 'S'},
		{"7 (x) t", "x", 't'},
		{"7 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 3 0 0", "kworker/0:1-events", 'I'},
	} {
		ti, err := ParseStat(42, c.line)
		if err != nil {
			t.Errorf("ParseStat(%q): %v", c.line, err)
			continue
		}
		if ti.TID != 42 || ti.Name != c.name || ti.State != c.state {
			t.Errorf("ParseStat(%q) = %+v, want name %q state %c", c.line, ti, c.name, c.state)
		}
	}
}

func TestParseStatMalformed(t *testing.T) {
	for _, line := range []string{
		"",
		"1234",
		"1234 bash S",
		"1234 (bash S 1",
		"1234 bash) S 1",
		"1234 )bash( S 1",
		"1234 (bash)",
		"1234 (bash) ",
	} {
		if ti, err := ParseStat(1, line); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want an error", line, ti)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"5", []int{5}},
		{"0-3", []int{0, 1, 2, 3}},
		{"2-2", []int{2}},
		{"0-1,4,6-7", []int{0, 1, 4, 6, 7}},
		{"0,2,4", []int{0, 2, 4}},
		{"0-1,", []int{0, 1}},
		{"8-9,0-1", []int{8, 9, 0, 1}},
	} {
		got, err := ParseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseCPUListBad(t *testing.T) {
	for _, in := range []string{
		"",
		",",
		"a",
		"0-a",
		"a-3",
		"3-1",
		"-1",
		"1-",
		"0-3,x",
		"0 - 3",
		"0-1-2",
		"0,,z",
	} {
		if got, err := ParseCPUList(in); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseRelease(t *testing.T) {
	for _, c := range []struct {
		rel          string
		major, minor int
	}{
		{"6.18.44-fc-v657", 6, 18},
		{"5.4.0", 5, 4},
		{"5.18", 5, 18},
		{"6.8.0-45-generic", 6, 8},
		{"4.19.0-rc1", 4, 19},
		{"10.0.1+", 10, 0},
	} {
		major, minor, err := ParseRelease(c.rel)
		if err != nil || major != c.major || minor != c.minor {
			t.Errorf("ParseRelease(%q) = %d, %d, %v; want %d, %d", c.rel, major, minor, err, c.major, c.minor)
		}
	}
	for _, rel := range []string{"", "garbage", "6", "6.", ".18", "v6.18", "6-18", " 6.18", "x6.18"} {
		if major, minor, err := ParseRelease(rel); err == nil {
			t.Errorf("ParseRelease(%q) = %d, %d, want an error", rel, major, minor)
		}
	}
}

func TestKernelRelease(t *testing.T) {
	rel, major, minor, err := KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	if rel == "" || major < 2 || minor < 0 {
		t.Errorf("KernelRelease() = %q, %d, %d", rel, major, minor)
	}
}

func TestMonotonic(t *testing.T) {
	prev := Monotonic()
	if prev == 0 {
		t.Fatal("Monotonic() = 0")
	}
	for i := 0; i < 10000; i++ {
		now := Monotonic()
		if now < prev {
			t.Fatalf("Monotonic went back: %d after %d", now, prev)
		}
		prev = now
	}
	const nap = 20 * time.Millisecond
	before := Monotonic()
	time.Sleep(nap)
	if d := time.Duration(Monotonic() - before); d < nap {
		t.Errorf("Monotonic advanced %v over a %v sleep", d, nap)
	}
}

func TestOnlineCPUs(t *testing.T) {
	cpus, err := OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) == 0 {
		t.Fatal("no online CPUs")
	}
	for i, c := range cpus {
		if c < 0 || (i > 0 && c <= cpus[i-1]) {
			t.Fatalf("online CPUs %v are not distinct, sorted and non-negative", cpus)
		}
	}
	// The CPUs this process may run on are online.
	if n := runtime.NumCPU(); n > len(cpus) {
		t.Errorf("runtime.NumCPU() = %d but only %d CPUs online (%v)", n, len(cpus), cpus)
	}
}

func TestReadOwnTasks(t *testing.T) {
	pid := os.Getpid()
	tasks, err := ListTasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	var main *TaskInfo
	for i := range tasks {
		if tasks[i].TID == pid {
			main = &tasks[i]
		}
	}
	if main == nil {
		t.Fatalf("ListTasks(%d) = %+v, missing the main thread", pid, tasks)
	}
	if main.Name == "" || main.Name != ThreadName(pid, pid) {
		t.Errorf("main thread name %q, comm %q", main.Name, ThreadName(pid, pid))
	}
	if !ProcessExists(pid) {
		t.Error("ProcessExists(self) = false")
	}
	if _, err := ReadTask(pid, 1<<30); err == nil {
		t.Error("ReadTask of a thread that does not exist succeeded")
	}
	if ThreadName(pid, 1<<30) != "" {
		t.Error("ThreadName of a thread that does not exist is not empty")
	}
}

func TestCPUTimeAndRSS(t *testing.T) {
	if CPUTime() < 0 {
		t.Error("negative CPU time")
	}
	if MaxRSS() <= 0 {
		t.Error("MaxRSS() <= 0")
	}
}

// ThreadCPUTime counts the thread's own work, not the time it sleeps.
func TestThreadCPUTime(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := ThreadCPUTime()
	if start <= 0 {
		t.Fatalf("ThreadCPUTime() = %v", start)
	}
	x := 0
	for deadline := time.Now().Add(5 * time.Second); ThreadCPUTime()-start < time.Millisecond; x++ {
		if time.Now().After(deadline) {
			t.Fatalf("1ms of work not counted in 5s (%v)", ThreadCPUTime()-start)
		}
	}
	before := ThreadCPUTime()
	time.Sleep(20 * time.Millisecond)
	if d := ThreadCPUTime() - before; d < 0 || d > 10*time.Millisecond {
		t.Errorf("sleeping 20ms counted %v of CPU", d)
	}
	_ = x
}

func TestReadTaskCounters(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skipf("no schedstat on this kernel: %v", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := os.Getpid(), syscall.Gettid()
	before, err := ReadTaskCounters(pid, tid)
	if err != nil {
		t.Fatal(err)
	}
	// Burn 20 ms of this thread's CPU time (its own CPU clock, not the
	// wall clock: on busy CPUs 20 ms of wall time may be 5 ms of CPU) and
	// sleep a few times on this thread: its CPU time and its voluntary
	// switches must grow.
	threadCPU := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	for start := threadCPU(); threadCPU()-start < 20*time.Millisecond; {
	}
	for range 3 {
		time.Sleep(time.Millisecond)
	}
	after, err := ReadTaskCounters(pid, tid)
	if err != nil {
		t.Fatal(err)
	}
	if after.ExecNs < before.ExecNs+10_000_000 {
		t.Errorf("CPU time went from %d to %d ns over a 20 ms burn", before.ExecNs, after.ExecNs)
	}
	if after.Voluntary <= before.Voluntary && after.Involunt <= before.Involunt {
		t.Errorf("no switch counted over three sleeps: %+v then %+v", before, after)
	}
	if after.RunDelayNs < before.RunDelayNs {
		t.Errorf("run_delay went back: %d then %d", before.RunDelayNs, after.RunDelayNs)
	}
	if _, err := ReadTaskCounters(pid, 1<<30); err == nil {
		t.Error("no error for a thread that does not exist")
	}
}

func TestStaggerGap(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		period time.Duration
		n      int
		want   time.Duration
	}{
		{10101010, 1, 0},       // one CPU: nothing to stagger
		{10101010, 2, ms},      // 99 Hz on 2: at most 1 ms apart
		{10101010, 64, 157828}, // 99 Hz on 64: spread over the period
		{1001001, 2, 500500},   // 999 Hz on 2: half a period
		{time.Second, 64, ms},  // 1 Hz on 64: starts in 63 ms
	} {
		if got := StaggerGap(c.period, c.n); got != c.want {
			t.Errorf("StaggerGap(%v, %d) = %v, want %v", c.period, c.n, got, c.want)
		}
	}
}
