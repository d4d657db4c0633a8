package goroutines

import "strconv"

// Status is a goroutine's state (runtime/runtime2.go), without the _Gscan
// bit.
type Status uint32

// The states of runtime/runtime2.go (the same values in Go 1.19–1.26;
// Leaked and DeadExtra exist from Go 1.26).
const (
	Idle      Status = 0  // just allocated
	Runnable  Status = 1  // on a run queue, waiting for a CPU
	Running   Status = 2  // running Go code on a thread
	Syscall   Status = 3  // in a system call (or cgo call) on a thread
	Waiting   Status = 4  // blocked in the runtime; see WaitReason
	Moribund  Status = 5  // unused by the runtime
	Dead      Status = 6  // exited or not yet started
	Enqueue   Status = 7  // unused by the runtime
	Copystack Status = 8  // its stack is being moved
	Preempted Status = 9  // stopped itself for a suspendG preemption
	Leaked    Status = 10 // found leaked by the GC (Go 1.26 goroutine leak detection)
	DeadExtra Status = 11 // dead, attached to an extra M for cgo callbacks (Go 1.26)

	scanBit = 0x1000 // _Gscan
)

var statusNames = [...]string{"idle", "runnable", "running", "syscall", "waiting", "moribund", "dead", "enqueue", "copystack", "preempted", "leaked", "dead"}

// String returns the state's name as in goroutine dumps ("chan receive"
// is a wait reason, not a state): "running", "waiting", ...
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// hasStack reports whether the goroutine's saved registers (g.sched)
// describe its stack: every state but running, dead and idle.
func (s Status) hasStack() bool {
	switch s {
	case Runnable, Syscall, Waiting, Copystack, Preempted, Leaked:
		return true
	}
	return false
}

// exists reports whether a goroutine in this state is a live goroutine.
func (s Status) exists() bool {
	return s != Idle && s != Dead && s != DeadExtra && s != Moribund && s != Enqueue
}
