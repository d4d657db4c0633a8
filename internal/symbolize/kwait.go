package symbolize

import "strings"

// kernelBlock are the kernel functions in which a thread blocks: sleep,
// poll, futex, pipe, socket and disk waits.
var kernelBlock = map[string]bool{
	"do_nanosleep": true, "hrtimer_nanosleep": true, "schedule_hrtimeout_range_clock": true,
	"schedule_hrtimeout_range": true, "schedule_timeout": true, "ep_poll": true, "do_epoll_wait": true,
	"do_sys_poll": true, "do_select": true, "futex_wait_queue": true, "futex_do_wait": true,
	"futex_wait": true, "io_schedule": true, "io_schedule_timeout": true, "folio_wait_bit_common": true,
	"pipe_read": true, "anon_pipe_read": true, "unix_stream_read_generic": true, "sk_wait_data": true,
	"wait_woken": true,
}

// kernelPreempt are the functions a thread preempted on its way back to
// user space waits in (interrupt exit).
var kernelPreempt = map[string]bool{"irqentry_exit_to_user_mode": true, "exit_to_user_mode_loop": true}

// kernelScheduler are the scheduler's own functions.
var kernelScheduler = map[string]bool{
	"schedule": true, "__schedule": true, "preempt_schedule_irq": true, "finish_task_switch": true,
}

// kernelName drops a compiler suffix (finish_task_switch.isra.0).
func kernelName(fn string) string {
	name, _, _ := strings.Cut(fn, ".")
	return name
}

// IsKernelBlock reports whether fn is a kernel function in which a thread
// blocks (sleep, poll, futex, pipe, socket, disk). The CPU is not there
// beyond the few instructions on the way in and out: perf never shows one
// as the leaf of more than a trace of on-CPU time, and on-CPU time credited
// to one was spent elsewhere.
func IsKernelBlock(fn string) bool { return kernelBlock[kernelName(fn)] }

// IsKernelWait reports whether fn is a kernel function in which a thread
// waits, blocked (IsKernelBlock) or preempted (interrupt exit, the
// scheduler). A timer that fires while interrupts are off is taken where
// they come back on, often in the latter, so perf shows some on-CPU time
// there too.
func IsKernelWait(fn string) bool {
	return IsKernelBlock(fn) || kernelPreempt[kernelName(fn)] || IsKernelScheduler(fn)
}

// IsKernelScheduler reports whether fn is one of the scheduler's own
// functions (schedule, finish_task_switch...). A timer that expired during
// a context switch, with interrupts off, fires in finish_task_switch.
func IsKernelScheduler(fn string) bool { return kernelScheduler[kernelName(fn)] }
