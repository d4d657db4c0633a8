package latency

import (
	"math"
	"testing"
	"time"
)

// TestSlowRunning checks how the running reads of slow calls are given
// their on-CPU stacks: each stack its samples' time, the rest of the
// reads as time off a CPU, and the samples scaled down to the reads when
// they hold more.
func TestSlowRunning(t *testing.T) {
	every := 10 * time.Millisecond
	w := &WaitSampler{
		cpuPeriod: 2500 * time.Microsecond, // a sample is a quarter of a read
		stackList: [][]uint64{{0x10, 0x20}, {0x30, 0x20}},
		slowRuns:  map[int]uint64{0: 10, 1: 2, 2: 3},
		slowCPU: map[int]map[uint32]uint64{
			0: {1: 8, 2: 4},  // 3 reads of 10 on a CPU: 7 off
			1: {1: 12, 2: 4}, // 4 reads of samples for 2 running reads: scaled by 1/2
		},
	}
	got := map[[3]int]float64{} // fn, stack (0: none), off-CPU
	for _, s := range w.slowRunning(every) {
		if s.State != StateRunning {
			t.Errorf("state %q, want running", s.State)
		}
		st := 0 // none
		switch {
		case s.Stack == nil:
		case s.Stack[0] == 0x10:
			st = 1
		case s.Stack[0] == 0x30:
			st = 2
		}
		off := 0
		if s.OffCPU {
			off = 1
		}
		got[[3]int{s.Func, st, off}] += s.Reads
	}
	want := map[[3]int]float64{
		{0, 1, 0}: 2, {0, 2, 0}: 1, {0, 0, 1}: 7,
		{1, 1, 0}: 1.5, {1, 2, 0}: 0.5,
		{2, 0, 1}: 3, // no sample at all: all off a CPU
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("function %d, stack %d, off-CPU %d: %g reads, want %g", k[0], k[1], k[2], got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected function %d, stack %d, off-CPU %d: %g reads", k[0], k[1], k[2], v)
		}
	}
	// Without on-CPU samples, the running reads stay as they are.
	w.cpuPeriod = 0
	for _, s := range w.slowRunning(every) {
		if s.Stack != nil || s.OffCPU || s.Reads != float64(w.slowRuns[s.Func]) {
			t.Errorf("without on-CPU sampling: %+v", s)
		}
	}
}
