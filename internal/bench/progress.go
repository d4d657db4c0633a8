package bench

import "time"

// Progress is where a long run stands: RunConfig.Progress receives it
// before each step (a round of the benchmarks, or the explanation of one
// regression) and once when the last step is done.
type Progress struct {
	Phase   string        // "round" or "explain"
	Done    int           // steps done
	Total   int           // steps in all
	Elapsed time.Duration // since the first step began
	DoneAt  time.Duration // Elapsed when step Done ended (0 before)
}

// Remaining estimates the time the steps left will take: the mean time of
// the steps done, times the steps left, less the time already spent in
// the current step (never below 0). ok is false before a step is done.
func (p Progress) Remaining() (d time.Duration, ok bool) {
	if p.Done <= 0 {
		return 0, false
	}
	if p.Done >= p.Total {
		return 0, true
	}
	mean := p.DoneAt / time.Duration(p.Done)
	d = mean*time.Duration(p.Total-p.Done) - (p.Elapsed - p.DoneAt)
	return max(d, 0), true
}

// NewProgress returns the function that reports the steps of one phase
// to report: step(n) says that the n steps before are done and step n
// (0-based) begins, step(total) that all are done. A nil report is fine.
func NewProgress(report func(Progress), phase string, total int) (step func(n int)) {
	p := Progress{Phase: phase, Total: total}
	start := time.Now()
	return func(n int) {
		if report == nil {
			return
		}
		p.Elapsed = time.Since(start)
		if n > 0 {
			p.DoneAt = p.Elapsed
		}
		p.Done = n
		report(p)
	}
}
