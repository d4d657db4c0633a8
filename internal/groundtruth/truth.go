package groundtruth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"
)

// Truth is the content of a truth file; see the package documentation.
type Truth struct {
	Workload string        `json:"workload"`
	Mode     string        `json:"mode,omitempty"` // the workload's mode ("bursts"); empty by default
	PID      int           `json:"pid"`
	Scale    float64       `json:"scale"`
	NProc    int           `json:"nproc"`
	StartNS  int64         `json:"start_ns"`
	EndNS    int64         `json:"end_ns"`
	Partial  bool          `json:"partial"`
	Threads  []ThreadTruth `json:"threads"`
	Process  *Phase        `json:"process,omitempty"`
	Groups   []GroupTruth  `json:"groups"`
}

// ThreadTruth is one OS thread of a C workload.
type ThreadTruth struct {
	TID     int              `json:"tid"`
	Name    string           `json:"name"`
	StartNS int64            `json:"start_ns"`
	EndNS   int64            `json:"end_ns"`
	Phases  map[string]Phase `json:"phases"`
}

// GroupTruth is a group of goroutines of the Go workload running the same
// function; its times are summed over the group's goroutines.
type GroupTruth struct {
	Name     string           `json:"name"`
	Function string           `json:"function"`
	Count    int              `json:"count"`
	WallNS   int64            `json:"wall_ns"`
	Phases   map[string]Phase `json:"phases"`
}

// Phase is the measured split of one phase (or of a whole process).
// Fields a workload cannot measure are zero.
type Phase struct {
	WallNS     int64 `json:"wall_ns"`
	CPUNS      int64 `json:"cpu_ns"`
	RunDelayNS int64 `json:"run_delay_ns"`
	LockWaitNS int64 `json:"lock_wait_ns,omitempty"`
	// StolenNS is, on a virtual machine, the time the hypervisor took
	// from the thread while it held a CPU (steal), which CPUNS (the
	// kernel's CPU clock) leaves out: the wall time of the phase's runs
	// that never blocked that was neither CPU time nor a wait for a CPU.
	StolenNS int64 `json:"stolen_ns,omitempty"`
}

// Wall is the phase's wall-clock time.
func (p Phase) Wall() time.Duration { return time.Duration(p.WallNS) }

// CPU is the phase's on-CPU time.
func (p Phase) CPU() time.Duration { return time.Duration(p.CPUNS) }

// RunDelay is the phase's time spent runnable, waiting for a CPU.
func (p Phase) RunDelay() time.Duration { return time.Duration(p.RunDelayNS) }

// Stolen is the time the hypervisor took from the phase while it held a
// CPU (StolenNS). Blocked counts it, as the kernel's clocks leave it
// neither CPU time nor a wait for a CPU.
func (p Phase) Stolen() time.Duration { return time.Duration(p.StolenNS) }

// Blocked is the phase's wall time neither on a CPU nor runnable.
func (p Phase) Blocked() time.Duration { return time.Duration(p.WallNS - p.CPUNS - p.RunDelayNS) }

// Lifetime is how long the thread was observed alive by the workload.
func (t ThreadTruth) Lifetime() time.Duration { return time.Duration(t.EndNS - t.StartNS) }

// PhaseNames returns the thread's phase names, sorted.
func (t ThreadTruth) PhaseNames() []string {
	names := make([]string, 0, len(t.Phases))
	for n := range t.Phases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ReadTruth reads and checks the truth file at path.
func ReadTruth(path string) (*Truth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read truth: %w", err)
	}
	t, err := ParseTruth(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTruth decodes a truth file's content and checks its structure (not
// its timing: see Validate).
func ParseTruth(b []byte) (*Truth, error) {
	var t Truth
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("parse truth: %w", err)
	}
	if t.PID <= 0 {
		return nil, errors.New("parse truth: missing or invalid pid")
	}
	for i, th := range t.Threads {
		if th.TID <= 0 || th.Name == "" {
			return nil, fmt.Errorf("parse truth: thread %d: missing tid or name", i)
		}
	}
	for i, g := range t.Groups {
		if g.Function == "" {
			return nil, fmt.Errorf("parse truth: group %d: missing function", i)
		}
	}
	return &t, nil
}

// Thread returns the threads with the given name, in file order.
func (t *Truth) Thread(name string) []ThreadTruth {
	var out []ThreadTruth
	for _, th := range t.Threads {
		if th.Name == name {
			out = append(out, th)
		}
	}
	return out
}

// Group returns the goroutine group running function fn ("main.compute")
// or named name ("compute"), or nil.
func (t *Truth) Group(name string) *GroupTruth {
	for i := range t.Groups {
		if g := &t.Groups[i]; g.Function == name || g.Name == name {
			return g
		}
	}
	return nil
}

// PhaseTotal sums the phase named name over all threads and groups, and
// reports how many threads or goroutines ran it.
func (t *Truth) PhaseTotal(name string) (sum Phase, n int) {
	add := func(p Phase) {
		sum.WallNS += p.WallNS
		sum.CPUNS += p.CPUNS
		sum.RunDelayNS += p.RunDelayNS
		sum.LockWaitNS += p.LockWaitNS
		sum.StolenNS += p.StolenNS
	}
	for _, th := range t.Threads {
		if p, ok := th.Phases[name]; ok {
			add(p)
			n++
		}
	}
	for _, g := range t.Groups {
		if p, ok := g.Phases[name]; ok {
			add(p)
			n += g.Count
		}
	}
	return sum, n
}

// Validate checks that the truth is self-consistent: every thread ends
// after it starts, its phases fit in its lifetime, and within each phase
// on-CPU + runnable time does not exceed wall time (with slack for the
// granularity of the clocks: 1 ms + 1%).
func (t *Truth) Validate() error {
	var errs []error
	for _, th := range t.Threads {
		if th.EndNS < th.StartNS {
			errs = append(errs, fmt.Errorf("thread %d %s: ends before it starts", th.TID, th.Name))
		}
		var wall int64
		for _, name := range th.PhaseNames() {
			p := th.Phases[name]
			wall += p.WallNS
			if err := checkPhase(p); err != nil {
				errs = append(errs, fmt.Errorf("thread %d %s: phase %s: %w", th.TID, th.Name, name, err))
			}
		}
		if wall > th.EndNS-th.StartNS {
			errs = append(errs, fmt.Errorf("thread %d %s: phases last %v, more than its lifetime %v",
				th.TID, th.Name, time.Duration(wall), th.Lifetime()))
		}
	}
	for _, g := range t.Groups {
		for name, p := range g.Phases {
			if p.WallNS < 0 || p.WallNS > g.WallNS {
				errs = append(errs, fmt.Errorf("group %s: phase %s: wall %v outside [0, %v]",
					g.Name, name, p.Wall(), time.Duration(g.WallNS)))
			}
		}
	}
	return errors.Join(errs...)
}

func checkPhase(p Phase) error {
	if p.WallNS < 0 || p.CPUNS < 0 || p.RunDelayNS < 0 || p.StolenNS < 0 {
		return fmt.Errorf("negative time: %+v", p)
	}
	slack := int64(time.Millisecond) + p.WallNS/100
	if p.CPUNS+p.StolenNS+p.RunDelayNS > p.WallNS+slack {
		return fmt.Errorf("cpu %v + stolen %v + run delay %v exceed wall %v", p.CPU(), p.Stolen(), p.RunDelay(), p.Wall())
	}
	return nil
}
