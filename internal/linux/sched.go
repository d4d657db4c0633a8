package linux

import (
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LockPrompt locks the calling goroutine to its OS thread and gives the
// thread a time slice of 100 µs and a timer slack of 1 ns, so that the
// kernel runs it as soon as its timer fires: a waking ordinary thread with
// a shorter slice than the one running preempts it (EEVDF, Linux 6.12+; a
// longer wait before), and one woken on a busy CPU is moved to an idle one
// if there is one. The goroutine must not unlock: the thread ends with it
// (see runtime.LockOSThread).
//
// Not a real-time policy, nor a deadline: a Go thread runs the runtime too,
// and the runtime spins at times for another of the process's threads
// (runtime.exitsyscall, waiting for its P). At SCHED_FIFO on the CPU where
// that thread waits, the spin lasted until the kernel's real-time
// throttling stopped it, most of a second in which nothing else ran there
// (traced: doc/recorder.md). And a woken real-time or deadline thread stays
// on its previous CPU, preempting what runs there, where an ordinary one
// goes to an idle CPU: unpinned, a deadline walker stayed on the CPU of the
// program it profiled and slowed it twice as much.
func LockPrompt() error {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	return unix.SchedSetAttr(0, &unix.SchedAttr{
		Policy:  unix.SCHED_NORMAL,
		Flags:   unix.SCHED_FLAG_RESET_ON_FORK,
		Runtime: uint64(promptSlice),
	}, 0)
}

// promptSlice is LockPrompt's time slice (the kernel's least).
const promptSlice = 100 * time.Microsecond

// SleepUntil blocks the calling thread until CLOCK_MONOTONIC reads t
// (nanoseconds, as Monotonic), in the kernel: the thread is woken by its
// own timer, not by the Go runtime's. It returns false when a signal ended
// the sleep before t (the caller decides whether to sleep again).
func SleepUntil(t uint64) bool {
	ts := unix.NsecToTimespec(int64(t))
	return unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) != unix.EINTR
}

// Interrupt ends a sleep of thread tid of this process (SleepUntil,
// SleepUntilHeld) early: it sends the signal the Go runtime's preemption
// uses, which every Go thread handles and otherwise ignores.
func Interrupt(tid int) error {
	return unix.Tgkill(os.Getpid(), tid, unix.SIGURG)
}

// SleepUntilHeld is SleepUntil without telling the Go runtime: the
// goroutine keeps its P through the sleep, as if it ran. The runtime's
// sysmon hands the P of a goroutine in a system call to another thread
// when it finds it there twice, and wakes that thread; each return then
// takes a P back and wakes sysmon, which polls every 20 µs for a while. A
// goroutine that sleeps a millisecond a thousand times a second kept sysmon
// awake: held, it is a goroutine that runs. It must yield now and then
// (runtime.Gosched) within 10 ms, or sysmon sends it a preemption signal.
//
// It returns false when a signal ended the sleep before t: the caller
// yields (runtime.Gosched), then sleeps again. The signal may be the
// runtime's request to stop: a stop of the world waits for every P, and
// sends the request again every 100 µs until the goroutine yields. Slept
// through, walks 5 s apart held each of the collector's stops for the rest
// of a sleep while the runtime re-sent its signal: recording a 2-s
// ping-pong took 51 s and 9.6 s of wallprof's CPU (TestRecordLongWalk...).
func SleepUntilHeld(t uint64) bool {
	ts := unix.NsecToTimespec(int64(t))
	_, _, e := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME,
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return e != unix.EINTR
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

// RunApart runs f on the calling thread moved, for f's time, to the first
// CPU it may run on that none of processes pids may (by their main
// threads' affinity): a BPF timer started there stays there, away from
// a target pinned elsewhere. Where every CPU is the targets', f runs where
// the thread is. It reports the CPU f ran on (-1: not moved).
func RunApart(pids []int, f func()) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var mine, theirs unix.CPUSet
	if unix.SchedGetaffinity(0, &mine) != nil {
		f()
		return -1
	}
	for _, pid := range pids {
		var s unix.CPUSet
		if unix.SchedGetaffinity(pid, &s) != nil {
			continue
		}
		for c := range maxCPUs {
			if s.IsSet(c) {
				theirs.Set(c)
			}
		}
	}
	cpu := -1
	for c := range maxCPUs {
		if mine.IsSet(c) && !theirs.IsSet(c) {
			cpu = c
			break
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	if cpu < 0 || unix.SchedSetaffinity(0, &one) != nil {
		f()
		return -1
	}
	f()
	_ = unix.SchedSetaffinity(0, &mine)
	return cpu
}

// maxCPUs is how many CPUs a unix.CPUSet holds.
const maxCPUs = len(unix.CPUSet{}) * 64
