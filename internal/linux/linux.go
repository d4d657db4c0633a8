// Package linux is the one place where wallprof talks to the kernel directly
// (perf_event_open, capabilities, clocks, /proc parsing helpers). Errors wrap
// the errno so that callers can match them with errors.Is, and the feature
// checks return the sentinel errors below.
//
// Other packages that import golang.org/x/sys/unix or syscall, and why
// (TestKernelCallsStayHere fails for any other):
//   - cmd/wallprof: signal numbers, and the process group of a launched
//     command (os/exec takes a syscall.SysProcAttr), which it signals.
//   - internal/collect: the perf events' ioctl and close when a recording
//     stops, errno matching, and the BPF statistics' type constant, beside
//     the cilium/ebpf objects they act on.
//   - internal/goruntime/goroutines: process_vm_readv on the target's
//     memory, the goroutine reader's hot path, and fstat of its binary.
//   - internal/load: the open-files limit of the load generator, and the
//     errnos that classify its connection errors.
//   - internal/symbolize: a file's device and inode (syscall.Stat_t), the
//     key of the symbol cache.
//
// BPF itself goes through github.com/cilium/ebpf, in internal/collect.
package linux

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sentinel errors for the preflight checks; the CLI turns them into hints.
var (
	ErrNoPrivileges = errors.New("not enough privileges")
	ErrNoBTF        = errors.New("kernel BTF not available")
	ErrKernelTooOld = errors.New("kernel too old")
)

// MinKernel is the oldest kernel wallprof supports: bpf_copy_from_user_task
// (5.18) and tp_btf sched_switch with prev_state (5.18).
var MinKernel = [2]int{5, 18}

const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges returns ErrNoPrivileges unless the process has
// CAP_SYS_ADMIN, or both CAP_BPF and CAP_PERFMON, in its effective set.
func CheckPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	return ErrNoPrivileges
}

// CheckBTF returns ErrNoBTF when the kernel does not expose its BTF.
func CheckBTF() error {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: /sys/kernel/btf/vmlinux: %v", ErrNoBTF, err)
	}
	return nil
}

// KernelRelease returns uname -r and its major and minor numbers.
func KernelRelease() (string, int, int, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", 0, 0, fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	major, minor, err := ParseRelease(rel)
	return rel, major, minor, err
}

// ParseRelease extracts major and minor from a kernel release string.
func ParseRelease(rel string) (int, int, error) {
	m := regexp.MustCompile(`^(\d+)\.(\d+)`).FindStringSubmatch(rel)
	if m == nil {
		return 0, 0, fmt.Errorf("cannot parse kernel release %q", rel)
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("cannot parse kernel release %q", rel)
	}
	return major, minor, nil
}

// CheckKernel returns ErrKernelTooOld when the running kernel is older than
// MinKernel.
func CheckKernel() error {
	rel, major, minor, err := KernelRelease()
	if err != nil {
		return err
	}
	if major < MinKernel[0] || (major == MinKernel[0] && minor < MinKernel[1]) {
		return fmt.Errorf("%w: running %s, need %d.%d or newer", ErrKernelTooOld, rel, MinKernel[0], MinKernel[1])
	}
	return nil
}

// Monotonic returns CLOCK_MONOTONIC in nanoseconds, the clock of
// bpf_ktime_get_ns.
func Monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// OnlineCPUs lists the online CPUs from /sys/devices/system/cpu/online.
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("read online CPUs: %w", err)
	}
	return ParseCPUList(strings.TrimSpace(string(b)))
}

// ParseCPUList parses a kernel CPU list such as "0-3,5".
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if found {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("bad CPU list %q", s)
	}
	return cpus, nil
}

// OpenCPUClock opens a sampling cpu-clock software event on one CPU for all
// tasks, firing every periodNs nanoseconds of that CPU's time. The event
// starts disabled.
func OpenCPUClock(cpu int, periodNs uint64) (int, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample: periodNs,
		Bits:   unix.PerfBitDisabled,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("open cpu-clock perf event on CPU %d: %w", cpu, err)
	}
	return fd, nil
}

// OpenCPUClocks opens a cpu-clock sampling event firing every periodNs on
// each of cpus, with BPF program progFD attached, and returns their file
// descriptors (those opened, also on error, for the caller to close).
//
// With stagger, each is enabled StaggerGap after the previous (a timer's
// period starts when it is enabled), not all at one instant: a sample's
// program on one CPU delays what that CPU was doing, a lock held there
// for example, and a sample another CPU took right then would catch its
// threads waiting for it, an effect of the sampling itself. (Found on
// redis: 9–15% of its CPU time sampled in a kernel spinlock's slow path,
// in one stack, against under 3% for perf at the same time; BENCHMARKS.md.)
func OpenCPUClocks(cpus []int, periodNs uint64, progFD int, stagger bool) ([]int, error) {
	gap := StaggerGap(time.Duration(periodNs), len(cpus))
	var fds []int
	for i, cpu := range cpus {
		if i > 0 && stagger {
			time.Sleep(gap)
		}
		fd, err := OpenCPUClock(cpu, periodNs)
		if err != nil {
			return fds, err
		}
		fds = append(fds, fd)
		if err := AttachPerfBPF(fd, progFD); err != nil {
			return fds, err
		}
	}
	return fds, nil
}

// StaggerGap is the time between two CPUs' timers of period period on a
// machine of n CPUs: spread evenly over the period, but at most 1 ms
// apart (far longer than a sample's program; a recording at 1 Hz on 64
// CPUs starts in 63 ms, not a second).
func StaggerGap(period time.Duration, n int) time.Duration {
	if n < 2 {
		return 0
	}
	return min(period/time.Duration(n), time.Millisecond)
}

// AttachPerfBPF attaches a BPF program to a perf event and enables it.
func AttachPerfBPF(fd, progFD int) error {
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, progFD); err != nil {
		return fmt.Errorf("attach BPF program to perf event: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("enable perf event: %w", err)
	}
	return nil
}

// ClosePerfEvent disables a perf event and closes it.
func ClosePerfEvent(fd int) {
	_ = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	_ = unix.Close(fd)
}

// FindKernelSymbol returns the first /proc/kallsyms text symbol whose name is
// base or base followed by a compiler suffix (".isra.0", ".constprop.0").
func FindKernelSymbol(base string) (string, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return "", fmt.Errorf("read kernel symbols: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || (fields[1] != "t" && fields[1] != "T") {
			continue
		}
		name := fields[2]
		if name == base || strings.HasPrefix(name, base+".") {
			return name, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read kernel symbols: %w", err)
	}
	return "", fmt.Errorf("kernel symbol %s not found", base)
}

// TaskInfo is what /proc says about one thread.
type TaskInfo struct {
	TID   int
	Name  string
	State byte // R, S, D, T, t, Z, X, I...
}

// ListTasks returns the threads of a process from /proc/PID/task.
func ListTasks(pid int) ([]TaskInfo, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list threads of %d: %w", pid, err)
	}
	var out []TaskInfo
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ti, err := ReadTask(pid, tid)
		if err != nil {
			continue // exited meanwhile
		}
		out = append(out, ti)
	}
	return out, nil
}

// ListPIDs returns the processes that exist now, from /proc.
func ListPIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// ReadTask reads one thread's name and state from /proc/PID/task/TID/stat.
func ReadTask(pid, tid int) (TaskInfo, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid), "stat"))
	if err != nil {
		return TaskInfo{}, err
	}
	return ParseStat(tid, string(b))
}

// ParseStat parses the name and state out of a /proc stat line. The name is
// between the first '(' and the last ')', and may contain anything.
func ParseStat(tid int, s string) (TaskInfo, error) {
	open := strings.IndexByte(s, '(')
	closing := strings.LastIndexByte(s, ')')
	if open < 0 || closing < open || closing+2 >= len(s) {
		return TaskInfo{}, fmt.Errorf("malformed stat line %q", s)
	}
	return TaskInfo{TID: tid, Name: s[open+1 : closing], State: s[closing+2]}, nil
}

// ThreadName reads /proc/PID/task/TID/comm.
func ThreadName(pid, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ProcessExists reports whether /proc/PID exists.
func ProcessExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// MachineSteal returns the time the hypervisor has taken from this
// machine's CPUs since it booted: the steal column of /proc/stat's cpu line,
// in ticks of USER_HZ (100 on Linux). 0 where the kernel does not report it.
func MachineSteal() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) // cpu user nice system idle iowait irq softirq steal
	if len(f) < 2 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", f)
	}
	if len(f) < 9 {
		return 0, nil
	}
	ticks, err := strconv.ParseUint(f[8], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: steal %q: %w", f[8], err)
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// CPUTime returns this process's user+system CPU time.
func CPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ThreadCPUTime returns the CPU time of the calling thread
// (CLOCK_THREAD_CPUTIME_ID), or 0 if it cannot be read. A goroutine must be
// locked to its thread (runtime.LockOSThread) between two readings for
// their difference to be its own CPU time.
func ThreadCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// MaxRSS returns this process's peak resident set size in bytes.
func MaxRSS() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// WaitExit blocks until process pid exits or done is closed. It uses a pidfd,
// so it works for processes that are not our children.
func WaitExit(pid int, done <-chan struct{}) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("watch process %d: %w", pid, err)
	}
	defer unix.Close(fd)
	for {
		select {
		case <-done:
			return nil
		default:
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("watch process %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}

// HasKprobes reports whether the kernel can attach kprobes (through the
// kprobe PMU or tracefs).
func HasKprobes() bool {
	for _, p := range []string{"/sys/bus/event_source/devices/kprobe", "/sys/kernel/tracing/kprobe_events",
		"/sys/kernel/debug/tracing/kprobe_events"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// TaskCounters are the scheduler's counters of one thread, as /proc shows
// them: its CPU time and its time waiting on a run queue (schedstat, in
// nanoseconds), and its voluntary and involuntary context switches.
type TaskCounters struct {
	ExecNs, RunDelayNs  uint64
	Voluntary, Involunt uint64
}

// ReadTaskCounters reads /proc/PID/task/TID/schedstat and status.
func ReadTaskCounters(pid, tid int) (TaskCounters, error) {
	var c TaskCounters
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid))
	b, err := os.ReadFile(filepath.Join(dir, "schedstat"))
	if err != nil {
		return c, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return c, fmt.Errorf("%s/schedstat: %q", dir, b)
	}
	if c.ExecNs, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return c, fmt.Errorf("%s/schedstat: %w", dir, err)
	}
	if c.RunDelayNs, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return c, fmt.Errorf("%s/schedstat: %w", dir, err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "voluntary_ctxt_switches":
			if err != nil {
				return c, fmt.Errorf("%s/status: %w", dir, err)
			}
			c.Voluntary = n
		case "nonvoluntary_ctxt_switches":
			if err != nil {
				return c, fmt.Errorf("%s/status: %w", dir, err)
			}
			c.Involunt = n
		}
	}
	return c, nil
}

// FileOwner is the user id that owns the file info describes (false when
// the file system does not say).
func FileOwner(info os.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// Terminate asks process p to end (SIGTERM), as a service manager does.
func Terminate(p *os.Process) error { return p.Signal(unix.SIGTERM) }
