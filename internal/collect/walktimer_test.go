package collect

import (
	"math"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/wallprof/wallprof/internal/profile"
)

// kernelHasTimerWalk reports whether the kernel has what the walk timer
// needs (the open-coded task iterator, Linux 6.7+).
func kernelHasTimerWalk() bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	_, err = spec.AnyTypeByName("bpf_iter_task_new")
	return err == nil
}

// A walk from the BPF timer reads a sleeping process's thread at every
// walk without waking wallprof: its thread waits where it waited, so no
// stack is to be taken after the first. Its time is the wall time, asleep,
// and the recording says how it was made.
func TestWalkTimerWakesOnlyForStacks(t *testing.T) {
	requireBPF(t)
	if !kernelHasTimerWalk() {
		t.Skip("the kernel has no open-coded task iterator (Linux 6.7+)")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(50 * time.Millisecond) // exec'ed: sleeping in nanosleep
	s, err := Open(Plan{PIDs: []int{cmd.Process.Pid}, Freq: DefaultFreq, Accounting: AccountWalk, WalkTimer: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.walk == nil || s.walk.timer == nil {
		s.Close()
		t.Fatal("the kernel has the open-coded task iterator but the walks do not run from the BPF timer")
	}
	var samples int
	go s.Run(func(*RawSample) { samples++ })
	time.Sleep(time.Second)
	var fires uint64
	if err := s.objs.core.WalkFires.Get(&fires); err != nil {
		t.Fatal(err)
	}
	s.walk.mu.Lock()
	passes := s.walk.timer.passes
	s.walk.mu.Unlock()
	res, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d walks, %d second passes, %d samples, profiler CPU %v", fires, passes, samples, res.Cost.ProfilerCPU)
	// At 99 Hz, 8 walks a sampling period: ~790 a second.
	if fires < 300 {
		t.Errorf("the timer fired %d times in a second, want ~790", fires)
	}
	if passes > 2 {
		t.Errorf("wallprof took stacks %d times for a thread that never moved (%d walks), want at most 2", passes, fires)
	}
	if !res.WalkTimer {
		t.Error("the result does not say the walks ran from the timer")
	}
	if res.Cost.ProfilerCPU <= 0 {
		t.Error("no profiler CPU counted")
	}
	var th *ThreadRecord
	for _, r := range res.Threads {
		if int(r.TID) == cmd.Process.Pid {
			th = r
		}
	}
	if th == nil {
		t.Fatalf("no record of the sleeping thread among %d", len(res.Threads))
	}
	wall := float64(res.EndNs - res.StartNs)
	if asleep := float64(th.Time[profile.Sleeping]); asleep < 0.98*wall || asleep > 1.001*wall {
		t.Errorf("the sleeping thread slept %.0f ms of the recording's %.0f ms", asleep/1e6, wall/1e6)
	}
	if p := Build(res, NewAggregator(nil), nil, "sleep"); p.Recorder.Accounting != profile.AccountWalkTimer {
		t.Errorf("the profile says accounting %q, want %q", p.Recorder.Accounting, profile.AccountWalkTimer)
	}
}

// The timer's intervals: of mean 1; as often under gapQuiet as a Poisson
// process's (so a walk comes that soon after another at the mean rate),
// none between that and the uniform part; and a variance well under the
// exponential's (the sampling error).
func TestWalkGapQuantiles(t *testing.T) {
	q := walkGapQuantiles()
	var sum, sq float64
	below := map[float64]int{0.05: 0, 0.1: 0, gapQuiet: 0}
	for _, v := range q {
		x := float64(v) / 65536
		sum += x
		sq += x * x
		for b := range below {
			if x < b {
				below[b]++
			}
		}
		if x > gapQuiet+0.01 && x < 0.7 {
			t.Errorf("an interval of %.3f: between the exponential part and the uniform one", x)
		}
	}
	n := float64(len(q))
	mean := sum / n
	if mean < 0.995 || mean > 1.005 {
		t.Errorf("mean interval %.4f, want 1", mean)
	}
	for b, k := range below {
		want := 1 - math.Exp(-b)
		if got := float64(k) / n; math.Abs(got-want) > 2/n {
			t.Errorf("%.3f of the intervals under %.2f, want %.3f (exponential)", got, b, want)
		}
	}
	if v := sq/n - mean*mean; v > 0.35 {
		t.Errorf("variance %.3f of the mean's square, want about 0.29", v)
	}
}
