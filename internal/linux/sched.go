package linux

import (
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Timely says how LockTimely had the kernel schedule the calling thread.
type Timely int

const (
	// TimelyNone: neither policy was granted; the thread is an ordinary
	// one.
	TimelyNone Timely = iota
	// TimelyDeadline: SCHED_DEADLINE, with a budget per period.
	TimelyDeadline
	// TimelySlice: an ordinary thread with a short time slice.
	TimelySlice
)

func (t Timely) String() string {
	switch t {
	case TimelyDeadline:
		return "deadline"
	case TimelySlice:
		return "short slice"
	}
	return "ordinary"
}

// LockTimely locks the calling goroutine to its OS thread and asks the
// kernel to run the thread as soon as it wakes, ahead of the threads
// running then, but never for more than budget in any period:
// SCHED_DEADLINE (runtime budget, deadline and period period). Where that
// is refused (a CPU affinity narrower than the machine's, as under taskset
// or a container's cpuset; a deadline bandwidth already taken), it gives
// the thread a time slice of 100 µs, which lets a waking ordinary thread
// preempt the one running (Linux 6.12+; ignored before). It sets the
// thread's timer slack to 1 ns. The goroutine must not unlock: the thread
// ends with it (see runtime.LockOSThread).
//
// Not a real-time policy (SCHED_FIFO): a Go thread runs the runtime too,
// and the runtime spins at times for another of the process's threads
// (runtime.exitsyscall waiting for its P); at real-time priority on the
// CPU where that thread waits, the spin lasts until the kernel's real-time
// throttling stops it, most of a second in which nothing else runs there
// (traced: doc/recorder.md). A deadline budget ends such a spin within
// the period.
func LockTimely(budget, period time.Duration) Timely {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	err := unix.SchedSetAttr(0, &unix.SchedAttr{
		Policy:   unix.SCHED_DEADLINE,
		Flags:    unix.SCHED_FLAG_RESET_ON_FORK,
		Runtime:  uint64(budget),
		Deadline: uint64(period),
		Period:   uint64(period),
	}, 0)
	if err == nil {
		return TimelyDeadline
	}
	err = unix.SchedSetAttr(0, &unix.SchedAttr{
		Policy:  unix.SCHED_NORMAL,
		Flags:   unix.SCHED_FLAG_RESET_ON_FORK,
		Runtime: uint64(100 * time.Microsecond),
	}, 0)
	if err == nil {
		return TimelySlice
	}
	return TimelyNone
}

// SleepUntil blocks the calling thread until CLOCK_MONOTONIC reads t
// (nanoseconds, as Monotonic), in the kernel: the thread is woken by its
// own timer, not by the Go runtime's.
func SleepUntil(t uint64) {
	ts := unix.NsecToTimespec(int64(t))
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// TaskIterLink creates the link of a BPF task iterator (progFD, a program
// of attach type BPF_TRACE_ITER on "task") that visits the threads of
// process pid alone (Linux 6.1+), and returns its file descriptor.
func TaskIterLink(progFD int, pid uint32) (int, error) {
	// union bpf_iter_link_info's task member: tid, pid, pid_fd.
	info := [3]uint32{0, pid, 0}
	// union bpf_attr for BPF_LINK_CREATE: prog_fd, target_fd,
	// attach_type, flags, then iter_info (a pointer) and iter_info_len.
	var attr struct {
		progFD, targetFD, attachType, flags uint32
		iterInfo                            uint64
		iterInfoLen                         uint32
		_                                   [28]byte
	}
	attr.progFD = uint32(progFD)
	attr.attachType = unix.BPF_TRACE_ITER
	attr.iterInfo = uint64(uintptr(unsafe.Pointer(&info)))
	attr.iterInfoLen = uint32(unsafe.Sizeof(info))
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(&info)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}
