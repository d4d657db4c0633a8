package collect

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
)

// TestWalkIgnoresStaleRecords plants, in the thread table of a walking
// recording, the records that a walk racing with a thread's exit can leave
// behind: for the next few thousand thread ids, records of threads that
// are not the ones that will get those ids (another birth), on CPU since
// the recording began. The target then starts and ends thousands of
// threads (the flood workload). Each new thread that finds such a record
// under its id must start from nothing (counted as stale-thread-record),
// and the records no thread took must add nothing at the end: the
// recorded CPU time stays within what the program's getrusage says. Before
// the records had an owner, each thread that found one was credited with
// the time since the recording began (a CI run's thread churn recorded
// 152% of its CPU time), and each record left over with the time to the
// end.
func TestWalkIgnoresStaleRecords(t *testing.T) {
	requireBPF(t)
	flood := groundtruth.Build(t, "flood")
	for _, timer := range []bool{false, true} {
		t.Run(fmt.Sprintf("timer=%v", timer), func(t *testing.T) {
			staleRecords(t, flood, timer)
		})
	}
}

func staleRecords(t *testing.T, flood string, timer bool) {
	cmd := exec.Command("/bin/sh", "-c", `read -r _; exec "$0" --iters 20000`, flood)
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s, err := Open(Plan{PIDs: []int{pid}, Freq: DefaultFreq, Accounting: AccountWalk, WalkTimer: timer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.walk == nil || (timer && s.walk.timer == nil) {
		t.Skipf("this kernel does not walk (timer %v) here", timer)
	}
	if err := s.SeedThreads(pid); err != nil {
		t.Fatal(err)
	}
	go s.Run(func(*RawSample) {})
	planted := plantStale(t, s, pid, 4000)
	steal0, _ := linux.MachineSteal()
	gate.Write([]byte("go\n"))
	gate.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("flood: %v\n%s", err, stderr.String())
	}
	res, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	steal1, _ := linux.MachineSteal()
	steal := steal1 - steal0
	m := regexp.MustCompile(`threads_per_s=(\d+) user_ns=(\d+) sys_ns=(\d+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no report from the workload:\n%s", stderr.String())
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	truth := time.Duration(num(m[2]) + num(m[3]))
	var cpu time.Duration
	n := 0
	for _, th := range res.Threads {
		if th.PID == uint32(pid) {
			cpu += time.Duration(th.Time[profile.OnCPU])
			n++
		}
	}
	stale := res.Lost["stale-thread-record"]
	t.Logf("%d records planted; %s threads/s; %d thread records; on-CPU %v, getrusage %v (%.1f%%), steal %v; stale records replaced %d; lost %v",
		planted, m[1], n, cpu, truth, 100*float64(cpu)/float64(truth), steal, stale, res.Lost)
	if stale < 100 {
		t.Errorf("%d stale records replaced, want the new threads' (hundreds at least)", stale)
	}
	if cpu > truth+truth/20+steal+20*time.Millisecond {
		t.Errorf("on-CPU %v, above the program's CPU time %v (steal %v): a stale record's time was counted", cpu, truth, steal)
	}
	if cpu < truth*8/10 {
		t.Errorf("on-CPU %v, under 80%% of the program's CPU time %v", cpu, truth)
	}
}

// plantStale enters, for up to n of the thread ids the kernel will give
// next, a record of another thread of pid, running since the recording
// began.
func plantStale(t *testing.T, s *Session, pid, n int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		t.Skipf("ns_last_pid: %v", err)
	}
	last, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	b, _ = os.ReadFile("/proc/sys/kernel/pid_max")
	max, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if max <= 0 {
		max = 32768
	}
	planted := 0
	for i := 1; i <= n; i++ {
		tid := (last+i)%max + 1
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", tid)); err == nil {
			continue
		}
		st := bpf.WallprofTstate{Pid: uint32(pid), FirstTs: s.startNs, InTs: s.startNs, OnCpu: 1,
			OutState: uint8(profile.OnCPU), Based: 1, Born: 1}
		err := s.objs.core.Threads.Update(uint32(tid), &st, ebpf.UpdateNoExist)
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			t.Fatalf("plant %d: %v", tid, err)
		}
		planted++
	}
	return planted
}
