package linux

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LockRealtime locks the calling goroutine to its OS thread and gives the
// thread the lowest real-time priority (SCHED_FIFO 1) and a timer slack of
// 1 ns, so that it runs when its timer fires, ahead of every ordinary
// thread, rather than when a CPU is free. The goroutine must not unlock:
// the thread ends with it (see runtime.LockOSThread).
func LockRealtime() error {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	return unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0)
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
