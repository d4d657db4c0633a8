package profile

import (
	"fmt"
	"time"
)

// GState is what a goroutine was doing, as the Go runtime sees it.
type GState uint8

// Goroutine states.
const (
	GRunning  GState = iota // on a thread, running Go code
	GRunnable               // ready, waiting for a P (the scheduler's run queue)
	GWaiting                // parked (chan, select, IO wait, sleep, mutex, ...) or in a system call
	NumGStates
)

var gstateNames = [NumGStates]string{"running", "runnable", "waiting"}

func (s GState) String() string {
	if s < NumGStates {
		return gstateNames[s]
	}
	return fmt.Sprintf("gstate(%d)", uint8(s))
}

// ParseGState is the inverse of GState.String.
func ParseGState(name string) (GState, bool) {
	for i, n := range gstateNames {
		if n == name {
			return GState(i), true
		}
	}
	return 0, false
}

// GoSample is goroutine time: the time one goroutine (or several of one
// group with the same stack) spent in one state, with its own stack. A Go
// program's goroutine samples are a second view of its time, beside the
// thread samples: summed, they give the goroutines' time, not the threads'.
type GoSample struct {
	Stack []*Location // leaf first
	PID   int
	// GoID is the goroutine's id; 0 when unknown (running time read from an
	// on-CPU sample that could not be matched to one goroutine).
	GoID  uint64
	State GState
	// WaitReason is the runtime's reason for a waiting goroutine ("chan
	// receive", "IO wait", "sleep", "sync.Mutex.Lock", "syscall", ...).
	WaitReason string
	// CreatedBy is the function whose go statement created the goroutine
	// ("" for the main goroutine); Func is the goroutine's own function.
	CreatedBy string
	Func      string
	// Labels are the goroutine's pprof labels (runtime/pprof.Do), where read.
	Labels map[string]string
	Value  int64 // nanoseconds
}

// GoInfo describes how the goroutine view was read.
type GoInfo struct {
	Version string // the target's Go version, e.g. "go1.26.0"
	// Snapshots is the number of times the goroutine table was read, at
	// Interval on average.
	Snapshots int
	Interval  time.Duration
	// MaxGoroutines is the most goroutines one snapshot saw.
	MaxGoroutines int
	// Dropped counts goroutine reads that stayed inconsistent after retries
	// (the goroutine changed while it was read); Retried counts retries.
	Dropped, Retried int
}
